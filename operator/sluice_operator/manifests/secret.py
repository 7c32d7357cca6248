"""The per-job Secret (the coordinator's REST token and Spark's RPC authentication secret) and the
namespace's state key Secret.

The values come from the caller (the service layer draws them once), so this stays a pure builder.
Each pod mounts only the key it needs: the coordinator gets both, TaskManagers only Spark's secret,
so code running in a TaskManager cannot call the coordinator's REST API with the operator's rights.

The state key authenticates the `_metadata` of checkpoints and savepoints (docs/security.md). It is one
per namespace, not per job, so that a savepoint moves between the StreamJobs of a namespace; no
StreamJob owns it, so deleting a job never takes it (and with it the authenticity of every savepoint
made with it). Only coordinators mount it: TaskManagers check state files against digests the
coordinator vouched for, and never hold the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice_operator.models import constants as c

from ._common import Manifest, Owner, metadata

REST_TOKEN_KEY = "rest-token"
SPARK_SECRET_KEY = "spark-secret"

REST_TOKEN_DIR = "/var/run/sluice/rest"
REST_TOKEN_FILE = f"{REST_TOKEN_DIR}/token"
SPARK_SECRET_DIR = "/var/run/sluice/spark"
SPARK_SECRET_FILE = f"{SPARK_SECRET_DIR}/secret"

STATE_KEY_SECRET = "sluice-state-key"
STATE_KEY_KEY = "state-key"
STATE_KEY_DIR = "/var/run/sluice/state"
STATE_KEY_FILE = f"{STATE_KEY_DIR}/key"

REST_TOKEN_VOLUME = "sluice-rest-token"
STATE_KEY_VOLUME = "sluice-state-key"
SPARK_SECRET_VOLUME = "sluice-spark-secret"
# The files belong to root unless the pod has an fsGroup: readable by all, so that the image's non-root
# user can read them. Only this pod's containers see the mount.
_MODE = 0o444


def job_secret_name(job: str) -> str:
    return f"{job}-auth"


def job_secret(owner: Owner, rest_token: str, spark_secret: str) -> Manifest:
    """Owned by the StreamJob, so Kubernetes deletes it with the job."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(owner, job_secret_name(owner.name)),
        "type": "Opaque",
        "stringData": {REST_TOKEN_KEY: rest_token, SPARK_SECRET_KEY: spark_secret},
    }


def state_key_secret(namespace: str, key_hex: str) -> Manifest:
    """The namespace's state key; labelled as the operator's, owned by no StreamJob."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": STATE_KEY_SECRET,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "sluice", c.LABEL_MANAGED_BY: c.MANAGED_BY},
        },
        "type": "Opaque",
        "stringData": {STATE_KEY_KEY: key_hex},
    }


def usable_state_key(data: Mapping[str, str] | None) -> bytes | None:
    """The key a state key Secret's data holds, or None when it holds none usable (too short, not hex)."""
    try:
        key = bytes.fromhex((data or {}).get(STATE_KEY_KEY, "").strip())
    except ValueError:
        return None
    return key if len(key) >= 32 else None


def _secret_volume(job: str, volume: str, key: str, path: str, secret: str | None = None) -> dict[str, Any]:
    return {
        "name": volume,
        "secret": {
            "secretName": secret or job_secret_name(job),
            "items": [{"key": key, "path": path}],
            "defaultMode": _MODE,
        },
    }


def rest_token_volume(job: str) -> dict[str, Any]:
    return _secret_volume(job, REST_TOKEN_VOLUME, REST_TOKEN_KEY, REST_TOKEN_FILE.rsplit("/", 1)[1])


def spark_secret_volume(job: str) -> dict[str, Any]:
    return _secret_volume(job, SPARK_SECRET_VOLUME, SPARK_SECRET_KEY, SPARK_SECRET_FILE.rsplit("/", 1)[1])


def state_key_volume() -> dict[str, Any]:
    name = STATE_KEY_FILE.rsplit("/", 1)[1]
    return _secret_volume("", STATE_KEY_VOLUME, STATE_KEY_KEY, name, secret=STATE_KEY_SECRET)


def state_key_mount() -> dict[str, Any]:
    return {"name": STATE_KEY_VOLUME, "mountPath": STATE_KEY_DIR, "readOnly": True}


def rest_token_mount() -> dict[str, Any]:
    return {"name": REST_TOKEN_VOLUME, "mountPath": REST_TOKEN_DIR, "readOnly": True}


def spark_secret_mount() -> dict[str, Any]:
    return {"name": SPARK_SECRET_VOLUME, "mountPath": SPARK_SECRET_DIR, "readOnly": True}

"""A savepoint trigger the coordinator accepted survives the loss of the operator's record of it.

A real job (process kubelet, real coordinator, real kube-apiserver) is upgraded in `savepoint` mode.
The operator triggers the upgrade's stop with savepoint, the coordinator accepts it, and writing the
trigger onto the Savepoint fails, as it did when the kube-apiserver restarted at that moment on a real
node (issue 25). That moment cannot be timed from outside, so the fault is injected where it happens:
every patch that would record the trigger (`InProgress` with a trigger id) fails like a connection to
an API server that is down. The operator then never has the trigger on record: it can only ask again
with the same request id (and must get the same trigger back, not a second stop) and, once the old run
has ended, find its stop in the run's stored result.

The job's storage is an S3 server (moto) that the operator and the job's pods both reach: under the
process kubelet a pod mounts an emptyDir over /tmp, so files the operator reads under pytest's /tmp
would not be the ones the coordinator writes.
"""

from __future__ import annotations

import json
import random
import socket
from typing import Any

import aiohttp
import pytest

from sluice_operator.models import SavepointState, SavepointStatus
from sluice_operator.services.act.recorder import Recorder
from testkit.kube import KubeEnv, streamjob_manifest
from testkit.s3 import S3Server, client_env

pytestmark = pytest.mark.kube

JOB = "lost-trigger"
UPGRADE = f"{JOB}-upgrade-2"


def _rest_port() -> int:
    # Under the process kubelet a coordinator binds its REST port on 0.0.0.0 of this machine: a port of
    # this test's own, below the ephemeral range, so that no other job of the machine holds it.
    for _ in range(100):
        port = random.randrange(20000, 32000)
        with socket.socket() as sock:
            try:
                sock.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port for the coordinator's REST API")


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    return s3_server.create_bucket()


@pytest.fixture
def operator_settings(s3_server: S3Server, bucket: str) -> dict[str, str | None]:
    """Storage in a bucket, for the operator and (through the job env) the coordinator and TaskManagers."""
    env = client_env(s3_server.endpoint_url)
    return {
        "SLUICE_OPERATOR_STORAGE": bucket,
        "SLUICE_OPERATOR_COORDINATOR_REST_PORT": str(_rest_port()),
        **env,
        **{f"SLUICE_OPERATOR_JOB_ENV_{k}": v for k, v in env.items()},
    }


@pytest.mark.timeout(900)
@pytest.mark.s3
def test_an_upgrade_whose_trigger_could_not_be_recorded_completes_from_the_same_savepoint(
    kube_env: KubeEnv,
    kube_namespace: str,
    operator: Any,
    process_kubelet: Any,
    s3_server: S3Server,
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded = Recorder.savepoint_status
    lost: list[str] = []

    async def api_server_down_for_the_trigger(
        self: Recorder, savepoint: str, status: SavepointStatus
    ) -> None:
        if savepoint == UPGRADE and status.state is SavepointState.IN_PROGRESS and status.trigger_id:
            lost.append(status.trigger_id)
            raise aiohttp.ClientConnectionError("the kube-apiserver is down (injected by the test)")
        await recorded(self, savepoint, status)

    monkeypatch.setattr(Recorder, "savepoint_status", api_server_down_for_the_trigger)

    manifest = streamjob_manifest(JOB, parallelism=1, extra="upgradeMode: savepoint\n")
    kube_env.kubectl("apply", "-f", "-", input=manifest, namespace=kube_namespace)
    before = kube_env.wait_for(
        f"streamjob {JOB}",
        lambda o: (
            (o.get("status") or {}).get("lifecycleState") == "Running"
            and (o.get("status") or {}).get("lastCheckpoint")
        ),
        namespace=kube_namespace,
        timeout=300,
    )["status"]["job"]
    # A spec change that restarts the job through its upgrade mode: a stop with savepoint, then a new run.
    kube_env.kubectl(
        "patch",
        "streamjob",
        JOB,
        "--type",
        "merge",
        "-p",
        '{"spec": {"restartNonce": 1}}',
        namespace=kube_namespace,
    )
    upgrade = kube_env.wait_for(
        f"savepoint {UPGRADE}",
        lambda o: (o.get("status") or {}).get("state") in ("Completed", "Failed", "Abandoned"),
        namespace=kube_namespace,
        timeout=300,
    )
    status = upgrade["status"]
    assert status["state"] == "Completed", (status, operator.logs()[-5000:])
    assert lost, "the fault never hit: the trigger was recorded, so this test showed nothing"
    assert len(set(lost)) == 1, f"every request was answered with the first trigger: {lost}"
    # Completed from the stored result of the old run (the trigger was never on record to be followed).
    files = s3_server.filesystem()
    with files.open(f"{bucket}/checkpoints/{kube_namespace}/{JOB}/{before['id']}/job-result.json") as stored:
        result = json.loads(stored.read())
    assert result["stopRequestId"] == f"{upgrade['metadata']['uid']}.0", result
    assert (status["path"], status["jobId"]) == (result["stopSavepoint"], before["id"])
    taken = files.glob(f"{bucket.removeprefix('s3://')}/savepoints/{kube_namespace}/{JOB}/*/_metadata")
    assert len(taken) == 1, f"one stop, one savepoint: {taken}"
    after = kube_env.wait_for(
        f"streamjob {JOB}",
        lambda o: (
            ((o.get("status") or {}).get("job") or {}).get("id") not in (None, before["id"])
            and o["status"].get("lifecycleState") == "Running"
        ),
        namespace=kube_namespace,
        timeout=300,
    )["status"]["job"]
    assert after["restoredFrom"] == status["path"], after
    assert "is not running" not in operator.logs()

"""Names, labels, owner references and the merge of user pod templates, shared by every builder."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from sluice_operator.models import constants as c

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Owner:
    """The StreamJob that owns what the operator creates for it."""

    name: str
    namespace: str
    uid: str

    def reference(self) -> dict[str, Any]:
        return {
            "apiVersion": c.API_VERSION,
            "kind": c.STREAMJOB_KIND,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def coordinator_name(job: str) -> str:
    return f"{job}-coordinator"


def rest_service_name(job: str) -> str:
    return f"{job}-rest"


def config_map_name(job: str) -> str:
    return f"{job}-config"


def driver_account_name(job: str) -> str:
    return f"{job}-driver"


def taskmanager_prefix(job: str) -> str:
    return f"{job}-taskmanager"


def labels(job: str, role: str | None = None) -> dict[str, str]:
    out = {
        "app.kubernetes.io/name": "sluice",
        "app.kubernetes.io/instance": job,
        c.LABEL_MANAGED_BY: c.MANAGED_BY,
        c.LABEL_JOB: job,
    }
    if role is not None:
        out[c.LABEL_ROLE] = role
    return out


def metadata(owner: Owner, name: str, role: str | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": owner.namespace,
        "labels": labels(owner.name, role),
        "ownerReferences": [owner.reference()],
    }


def merge_pod(template: dict[str, Any] | None, generated: Manifest, container: str) -> Manifest:
    """Lay the generated pod over the user's partial pod template.

    The user's template contributes everything the operator does not set (node selectors, tolerations,
    sidecars, volumes...). For the main container (by name) the operator's image, args and ports win,
    lists (env, volume mounts) are concatenated with the operator's entries last so they take
    precedence, and the user's resources apply unless the spec sets resources. Security contexts (of the
    pod and the main container) are the other way round: the operator's hardened defaults, with the
    user's fields over them, since the user's template is where an exception is asked for (and
    refused unless the operator's configuration allows it: services/observe/privileges.py).
    """
    merged: Manifest = copy.deepcopy(template or {})
    meta = merged.setdefault("metadata", {})
    for key in ("labels", "annotations"):
        values = {**(meta.get(key) or {}), **generated["metadata"].get(key, {})}
        if values:
            meta[key] = values
    for key, value in generated["metadata"].items():
        if key not in ("labels", "annotations"):
            meta[key] = value
    spec = merged.setdefault("spec", {})
    ours = generated["spec"]
    for key, value in ours.items():
        if key == "containers":
            spec["containers"] = _merge_containers(spec.get("containers") or [], value, container)
        elif key == "volumes":
            spec["volumes"] = [*(spec.get("volumes") or []), *value]
        elif key == "securityContext":
            spec[key] = {**value, **(spec.get(key) or {})}
        else:
            spec[key] = value
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        **{k: v for k, v in merged.items() if k not in ("apiVersion", "kind")},
    }


def _merge_containers(
    user: list[dict[str, Any]], ours: list[dict[str, Any]], main: str
) -> list[dict[str, Any]]:
    by_name = {entry.get("name"): entry for entry in ours}
    out: list[dict[str, Any]] = []
    for entry in user:
        generated = by_name.pop(entry.get("name"), None)
        out.append(entry if generated is None else _merge_container(entry, generated))
    # The main container comes first so `kubectl logs` and Spark's template lookup find it by default.
    rest = list(by_name.values())
    main_first = [e for e in rest if e.get("name") == main] + [e for e in rest if e.get("name") != main]
    merged_main = [e for e in out if e.get("name") == main]
    others = [e for e in out if e.get("name") != main]
    return merged_main + main_first + others


def _merge_container(user: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(user)
    for key, value in ours.items():
        if key in ("env", "volumeMounts", "ports"):
            names = {_identity(item) for item in value}
            merged[key] = [i for i in merged.get(key) or [] if _identity(i) not in names] + value
        elif key == "envFrom":
            merged[key] = [*(merged.get(key) or []), *value]
        elif key == "resources" and not value:
            continue
        elif key == "securityContext":
            merged[key] = {**value, **(merged.get(key) or {})}
        else:
            merged[key] = value
    return merged


def _identity(item: dict[str, Any]) -> Any:
    return item.get("name") or item.get("mountPath") or item.get("containerPort")

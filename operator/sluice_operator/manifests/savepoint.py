"""Savepoint objects the operator creates for stops, upgrades, deletions and periodic savepoints."""

from __future__ import annotations

from sluice_operator.models import SavepointKind, StopMode
from sluice_operator.models import constants as c

from ._common import Manifest, Owner, labels


def savepoint_name(job: str, kind: SavepointKind, stamp: int) -> str:
    """`<job>-<kind>-<stamp>`; the stamp (generation or epoch seconds) makes creation idempotent."""
    return f"{job}-{kind.value}-{stamp}"[:253]


def operator_savepoint(
    owner: Owner,
    *,
    kind: SavepointKind,
    stop: StopMode,
    stamp: int,
    dispose_on_delete: bool,
    target_directory: str | None = None,
    generation: int | None = None,
    owned: bool = True,
) -> Manifest:
    """With `generation`, labelled with the job's generation it stops; not `owned`, it outlives the job
    (the garbage collector leaves it when the job is deleted)."""
    spec: dict[str, object] = {
        "jobName": owner.name,
        "stop": stop.value,
        "disposeOnDelete": dispose_on_delete,
    }
    if target_directory is not None:
        spec["targetDirectory"] = target_directory
    metadata: dict[str, object] = {
        "name": savepoint_name(owner.name, kind, stamp),
        "namespace": owner.namespace,
        "labels": {
            **labels(owner.name),
            c.LABEL_TRIGGER: kind.value,
            **({c.LABEL_GENERATION: str(generation)} if generation is not None else {}),
        },
    }
    if owned:
        metadata["ownerReferences"] = [owner.reference()]
    return {"apiVersion": c.API_VERSION, "kind": c.SAVEPOINT_KIND, "metadata": metadata, "spec": spec}

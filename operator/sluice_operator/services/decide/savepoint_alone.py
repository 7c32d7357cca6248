"""A Savepoint on its own: what only it can tell, that it cannot be taken at all (its spec is invalid,
or its job does not exist). Everything else about it is decided with its job (savepoints.py)."""

from __future__ import annotations

from sluice_operator.models import SavepointState

from ..common.observed import SavepointView
from ..common.plan import Event, PatchSavepoint, Plan


def fail_alone(view: SavepointView, namespace: str, *, job_exists: bool) -> Plan | None:
    """The plan that fails `view`, or None when its job exists and decides the rest."""
    if view.spec is None:
        error = view.spec_error
    elif job_exists:
        return None
    else:
        error = (
            f"StreamJob {view.spec.job_name!r} not found in namespace {namespace!r}: "
            "create the job first or correct spec.jobName"
        )
    status = view.status.model_copy(update={"state": SavepointState.FAILED, "error": error})
    failed = Event("Warning", "Failed", status.error or "", savepoint=view.name, uid=view.uid)
    return Plan(actions=[PatchSavepoint(view.name, status)], events=[failed])


__all__ = ["fail_alone"]

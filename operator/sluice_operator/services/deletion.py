"""Deleting a StreamJob: its savepoint on deletion, then everything it owns (the finalizer)."""

from __future__ import annotations

import time

from sluice_operator import manifests as m
from sluice_operator.kube import Obj
from sluice_operator.models import LifecycleState, OperatorConfig, StreamJobSpec
from sluice_operator.models import constants as c

from .act.execute import execute
from .act.record import record_deleting
from .clients.deps import Deps
from .common.objects import ObjectMeta, StreamJobObject
from .common.observed import Observed
from .common.outcome import Finalized
from .common.plan import Plan
from .decide.deletion import coordinator_first, plan_deletion_savepoint, teardown
from .observe.auth import rest_token, state_key
from .observe.gather import gather
from .observe.job import job_savepoints
from .observe.validate import InvalidSpecError, require_storage, streamjob_spec


async def finalize_job(deps: Deps, config: OperatorConfig, found: Obj) -> Finalized:
    """Called while the StreamJob has a deletionTimestamp; done=True lets the finalizer go."""
    job = StreamJobObject.parse(found)
    owner = job.owner
    ns = owner.namespace
    if job.status.lifecycle_state is not LifecycleState.DELETING:
        recorded = record_deleting(job.recorded, job.status)
        await execute(deps, Observed(), Plan(), owner, status=recorded.patch, said=recorded.events)
    try:
        spec = streamjob_spec(job.spec)
        require_storage(spec, config)  # without storage the job never ran: nothing to save
    except InvalidSpecError:
        spec = None
    if (
        spec is not None
        and spec.savepoints.on_delete
        and await _savepoint_before_delete(deps, config, job, spec)
    ):
        return Finalized(False, "waiting for the savepoint on deletion")
    views = await job_savepoints(deps.kube, ns, owner.name, owner.uid)
    await execute(deps, Observed(), coordinator_first(owner, views), owner)
    coordinator = m.coordinator_name(owner.name)
    pods = await deps.kube.list_pods(ns, f"{c.LABEL_JOB}={owner.name}")
    pod_names = [ObjectMeta.parse(pod).name for pod in pods]
    if coordinator in pod_names:
        # Its Spark driver replaces executor pods that go while it still runs (its shutdown takes the
        # grace period): TaskManagers deleted now could come back as new pods. Once it is gone,
        # nothing makes them; its own pods also go with it (they are its dependents).
        return Finalized(False, f"waiting for pod {coordinator} to stop")
    await execute(deps, Observed(), teardown(config, owner, pod_names), owner)
    return Finalized(True)


async def _savepoint_before_delete(
    deps: Deps, config: OperatorConfig, job: StreamJobObject, spec: StreamJobSpec
) -> bool:
    """Whether a stop-with-savepoint of the running job is still under way."""
    token = await rest_token(deps.kube, job.owner)
    found = await gather(
        deps,
        config,
        job,
        spec,
        rest_token=token,
        state_key=await state_key(deps.kube, job.owner.namespace),
        now_ms=int(time.time() * 1000),
        new_job_id="",
    )
    plan = Plan(status=found.ctx.status)
    waiting = plan_deletion_savepoint(found.ctx, found.obs, plan, deletion_stamp(job.meta))
    await execute(deps, found.obs, plan, found.ctx.owner, storage=found.storage)
    return waiting


def deletion_stamp(meta: ObjectMeta) -> int:
    """The stamp of the deletion savepoint's name: the deletion's time, fixed once deletion started.

    Not the generation: a user's stop Savepoint may still change spec.state, and the generation with it,
    while the job is being deleted; a name derived from it would start a second savepoint.
    """
    return meta.deletion_ms // 1000 if meta.deletion_ms is not None else meta.generation


__all__ = ["deletion_stamp", "finalize_job"]

"""Deleting a StreamJob: its savepoint on deletion, then everything it owns (the finalizer)."""

from __future__ import annotations

import time
from dataclasses import replace

from sluice_operator import manifests as m
from sluice_operator.kube import Obj
from sluice_operator.models import (
    LifecycleState,
    OperatorConfig,
    RunState,
    SavepointKind,
    SavepointState,
    StopMode,
    StreamJobSpec,
)
from sluice_operator.models import constants as c

from .act.auth import rest_token
from .act.execute import execute
from .act.record import record_deleting
from .common._time import millis
from .common.context import JobContext
from .common.observed import Observed
from .common.outcome import Finalized
from .common.plan import CreateSavepoint, DeleteOwned, Event, Plan
from .decide.savepoints import plan_savepoints
from .observe.gather import gather, owner_of, read_status, state_key
from .observe.job import Deps, job_savepoints
from .observe.validate import InvalidSpecError, require_storage, streamjob_spec


async def finalize_job(deps: Deps, config: OperatorConfig, job: Obj) -> Finalized:
    """Called while the StreamJob has a deletionTimestamp; done=True lets the finalizer go."""
    owner = owner_of(job)
    ns = owner.namespace
    status = read_status(job)
    if status.lifecycle_state is not LifecycleState.DELETING:
        recorded = record_deleting(dict(job.get("status") or {}), status)
        await execute(deps, Observed(), Plan(), owner, status=recorded.patch, said=recorded.events)
    try:
        spec = streamjob_spec(job.get("spec"))
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
    coordinator = m.coordinator_name(owner.name)
    # Owned Savepoints go with the job; their own finalizer disposes of the files with disposeOnDelete.
    first = [DeleteOwned(c.SAVEPOINT_KIND, view.name) for view in views if view.owned]
    await execute(deps, Observed(), Plan(actions=[*first, DeleteOwned("Pod", coordinator)]), owner)
    pods = await deps.kube.list_pods(ns, f"{c.LABEL_JOB}={owner.name}")
    if any(pod["metadata"]["name"] == coordinator for pod in pods):
        # Its Spark driver replaces executor pods that go while it still runs (its shutdown takes the
        # grace period): TaskManagers deleted now could come back as new pods. Once it is gone,
        # nothing makes them; its own pods also go with it (they are its dependents).
        return Finalized(False, f"waiting for pod {coordinator} to stop")
    await execute(deps, Observed(), teardown(config, owner, pods), owner)
    return Finalized(True)


def teardown(config: OperatorConfig, owner: m.Owner, pods: list[Obj]) -> Plan:
    """Deleting everything the job's runs made, once its coordinator (which makes executor pods) is gone."""
    owned = [("Pod", pod["metadata"]["name"]) for pod in pods]
    owned += [
        ("Service", m.rest_service_name(owner.name)),
        ("ConfigMap", m.config_map_name(owner.name)),
        ("RoleBinding", m.driver_account_name(owner.name)),
        ("Role", m.driver_account_name(owner.name)),
        ("ServiceAccount", m.driver_account_name(owner.name)),
        # Owned by the job, so the garbage collector would get it too, but only after the job is gone:
        # a job recreated under the same name at once would find the old Secret and be refused it.
        ("Secret", m.job_secret_name(owner.name)),
    ]
    if config.network_policies:  # else the operator may lack the rights to delete (or need) them
        owned.append(("NetworkPolicy", m.network_policy_name(owner.name)))
    if config.pod_monitor is not None:
        # Like the Secret: gone now, so that a job recreated at once under the name is not refused it.
        owned.append((m.POD_MONITOR_KIND, m.pod_monitor_name(owner.name)))
    return Plan(actions=[DeleteOwned(kind, name) for kind, name in owned])


async def _savepoint_before_delete(deps: Deps, config: OperatorConfig, job: Obj, spec: StreamJobSpec) -> bool:
    """Whether a stop-with-savepoint of the running job is still under way."""
    token = await rest_token(deps.kube, owner_of(job))
    found = await gather(
        deps,
        config,
        job,
        spec,
        rest_token=token,
        state_key=await state_key(deps, owner_of(job).namespace),
        now_ms=int(time.time() * 1000),
        new_job_id="",
    )
    plan = Plan(status=found.ctx.status)
    waiting = plan_deletion_savepoint(found.ctx, found.obs, plan, deletion_stamp(job))
    await execute(deps, found.obs, plan, found.ctx.owner, storage=found.storage)
    return waiting


def deletion_stamp(job: Obj) -> int:
    """The stamp of the deletion savepoint's name: the deletion's time, fixed once deletion started.

    Not the generation: a user's stop Savepoint may still change spec.state, and the generation with it,
    while the job is being deleted; a name derived from it would start a second savepoint.
    """
    meta = job["metadata"]
    stamp = millis(meta.get("deletionTimestamp"))
    return stamp // 1000 if stamp is not None else int(meta.get("generation") or 0)


def plan_deletion_savepoint(ctx: JobContext, obs: Observed, plan: Plan, stamp: int) -> bool:
    """The savepoint on deletion (spec.savepoints.onDelete): create it, trigger it, follow it.

    Returns True while the finalizer must wait for it. A job that is not running is deleted without one,
    and so is a job whose deletion savepoint failed: deletion is what the user asked for.
    """
    name = m.savepoint_name(ctx.owner.name, SavepointKind.DELETION, stamp)
    mine = next((v for v in obs.savepoints if v.name == name), None)
    running = obs.coordinator is not None and obs.coordinator.state == RunState.RUNNING
    if mine is None:
        if not running:
            state = f" (job state {obs.coordinator.state})" if obs.coordinator is not None else ""
            plan.events.append(
                Event(
                    "Normal",
                    "NoSavepointOnDelete",
                    f"no savepoint on deletion: the job is not running{state}",
                )
            )
            return False
        manifest = m.operator_savepoint(
            ctx.owner,
            kind=SavepointKind.DELETION,
            stop=StopMode.SUSPEND,
            stamp=stamp,
            dispose_on_delete=False,
        )
        # Not owned by the job: the savepoint outlives it, so the state can be restored elsewhere.
        del manifest["metadata"]["ownerReferences"]
        plan.actions.append(CreateSavepoint(manifest))
        plan.events.append(Event("Normal", "SavepointOnDelete", f"taking savepoint {name} before deletion"))
        return True
    if mine.status.state.terminal:
        if mine.status.state is not SavepointState.COMPLETED:
            why = f"savepoint {name} {mine.status.state.value.lower()}: {mine.status.error}"
            plan.events.append(Event("Warning", "DeletedWithoutSavepoint", f"{why}; deleting the job anyway"))
        return False
    # The operator made it, so it must not be taken for a user's request to change spec.state (which a
    # Savepoint without the job as owner otherwise is). Savepoints already in flight are followed too:
    # the deletion savepoint waits for them instead of being refused by a busy coordinator.
    views = [replace(mine, owned=True)]
    views += [
        v for v in obs.savepoints if v.status.trigger_id and not v.status.state.terminal and v is not mine
    ]
    plan_savepoints(ctx, replace(obs, savepoints=views), plan)
    return True


__all__ = ["deletion_stamp", "finalize_job", "plan_deletion_savepoint"]

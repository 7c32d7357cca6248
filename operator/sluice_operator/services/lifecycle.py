"""Deleting a StreamJob, and the life of a Savepoint object on its own (missing job, disposal)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from sluice_operator import manifests as m
from sluice_operator.kube import Obj
from sluice_operator.models import (
    LifecycleState,
    OperatorConfig,
    SavepointKind,
    SavepointState,
    StopMode,
    StreamJobSpec,
)
from sluice_operator.models import constants as c

from ._time import millis
from .auth import rest_token
from .context import JobContext
from .execute import execute, savepoint_patch
from .monitoring import delete_pod_monitor
from .observe import Deps, job_savepoints, observe_job, savepoint_view
from .observed import Observed
from .plan import CreateSavepoint, Event, Plan
from .reconcile import job_storage, owner_of, read_status
from .savepoints import plan_savepoints
from .storage import Storage
from .validate import InvalidSpecError, require_storage, streamjob_spec


@dataclass
class Finalized:
    done: bool
    events: list[Event]
    message: str = ""


async def finalize_job(deps: Deps, config: OperatorConfig, job: Obj) -> Finalized:
    """Called while the StreamJob has a deletionTimestamp; done=True lets the finalizer go."""
    owner = owner_of(job)
    ns = owner.namespace
    events: list[Event] = []
    old = dict(job.get("status") or {})
    if old.get("lifecycleState") != LifecycleState.DELETING.value:
        await deps.kube.patch_status(c.STREAMJOB_PLURAL, ns, owner.name, {"lifecycleState": "Deleting"})
        events.append(Event("Normal", "Deleting", "deleting the job and everything it owns"))
    try:
        spec = streamjob_spec(job.get("spec"))
        require_storage(spec, config)  # without storage the job never ran: nothing to save
    except InvalidSpecError:
        spec = None
    if spec is not None and spec.savepoints.on_delete:
        waiting = await _savepoint_before_delete(deps, config, job, spec, events)
        if waiting:
            return Finalized(False, events, "waiting for the savepoint on deletion")
    for view in await job_savepoints(deps.kube, ns, owner.name, owner.uid):
        if view.owned:  # their own finalizer disposes of the files when disposeOnDelete is set
            await deps.kube.delete_custom(c.SAVEPOINT_PLURAL, ns, view.name)
    coordinator = m.coordinator_name(owner.name)
    await deps.kube.delete_pod(ns, coordinator)
    pods = await deps.kube.list_pods(ns, f"{c.LABEL_JOB}={owner.name}")
    if any(pod["metadata"]["name"] == coordinator for pod in pods):
        # Its Spark driver replaces executor pods that go while it still runs (its shutdown takes the
        # grace period): TaskManagers deleted now could come back as new pods. Once it is gone,
        # nothing makes them; its own pods also go with it (they are its dependents).
        return Finalized(False, events, f"waiting for pod {coordinator} to stop")
    for pod in pods:
        await deps.kube.delete_pod(ns, pod["metadata"]["name"])
    owned = [
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
    for kind, name in owned:
        await deps.kube.delete(kind, ns, name)
    if config.pod_monitor is not None:
        # Like the Secret: gone now, so that a job recreated at once under the name is not refused it.
        await delete_pod_monitor(deps.kube, owner)
    return Finalized(True, events)


async def _savepoint_before_delete(
    deps: Deps, config: OperatorConfig, job: Obj, spec: StreamJobSpec, events: list[Event]
) -> bool:
    """True while a stop-with-savepoint of the running job is still under way."""
    owner = owner_of(job)
    status = read_status(job)
    checkpoint_dir = m.checkpoint_dir(spec, owner, config)
    storage = await job_storage(deps, config, owner.namespace, spec, checkpoint_dir)
    obs = await observe_job(
        deps,
        storage=storage,
        owner=owner,
        spec=spec,
        status=status,
        checkpoint_dir=checkpoint_dir,
        rest_token=await rest_token(deps.kube, owner),
    )
    ctx = JobContext(
        owner=owner,
        generation=int(job["metadata"].get("generation") or 0),
        spec=spec,
        status=status,
        config=config,
        now_ms=int(time.time() * 1000),
        new_job_id="",
    )
    plan = Plan(status={})
    waiting = plan_deletion_savepoint(ctx, obs, plan, deletion_stamp(job))
    await execute(deps, obs, plan, owner)
    events.extend(plan.events)
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
    running = obs.coordinator is not None and obs.coordinator.state == "RUNNING"
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


async def reconcile_savepoint(deps: Deps, savepoint: Obj) -> list[Event]:
    """What only a Savepoint itself can tell: its job does not exist. The rest is up to the job."""
    meta = savepoint["metadata"]
    view = savepoint_view(savepoint, None)
    if view.status.state.terminal or meta.get("deletionTimestamp"):
        return []
    if view.spec is None:
        status = view.status.model_copy(update={"state": SavepointState.FAILED, "error": view.spec_error})
    else:
        job = await deps.kube.get_custom(c.STREAMJOB_PLURAL, meta["namespace"], view.spec.job_name)
        if job is not None:
            return []
        error = (
            f"StreamJob {view.spec.job_name!r} not found in namespace {meta['namespace']!r}: "
            "create the job first or correct spec.jobName"
        )
        status = view.status.model_copy(update={"state": SavepointState.FAILED, "error": error})
    await deps.kube.patch_status(c.SAVEPOINT_PLURAL, meta["namespace"], meta["name"], savepoint_patch(status))
    return [Event("Warning", "Failed", status.error or "")]


async def dispose_savepoint(deps: Deps, config: OperatorConfig, savepoint: Obj) -> Finalized:
    """On deletion of a Savepoint with disposeOnDelete: delete its files; done=True lets the finalizer go.

    A savepoint still in flight has no path yet but will write files: its deletion waits until it has
    ended (its job keeps following it), so that they do not outlive the object. Without the job nobody
    follows it any more, and there is nothing to wait for.
    """
    view = savepoint_view(savepoint, None)
    if view.spec is None or not view.spec.dispose_on_delete:
        return Finalized(True, [])
    ns = savepoint["metadata"]["namespace"]
    job = await deps.kube.get_custom(c.STREAMJOB_PLURAL, ns, view.spec.job_name)
    if job is not None and view.status.trigger_id and not view.status.state.terminal:
        return Finalized(False, [], f"savepoint {view.name} is in progress; its files go once it has ended")
    path = view.status.path
    if not path:
        return Finalized(True, [])
    spec = None
    if job is not None:
        try:
            spec = streamjob_spec(job.get("spec"))
        except InvalidSpecError:
            spec = None
    storage: Storage = await job_storage(deps, config, ns, spec, path)
    removed = await storage.dispose(path)
    message = f"deleted savepoint files at {path}" if removed else f"{path} was already gone"
    return Finalized(True, [Event("Normal", "Disposed", message)])


__all__ = [
    "Finalized",
    "deletion_stamp",
    "dispose_savepoint",
    "finalize_job",
    "plan_deletion_savepoint",
    "reconcile_savepoint",
]

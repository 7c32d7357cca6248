"""Carrying out a plan: its status and actions, against Kubernetes, the coordinator and storage.

The one place a plan is executed, and the one holder of the `Recorder`: the job's decided status is
written first (it records a run about to be started before its pod exists), then the actions in order,
with the status writes some of them lead to. Acting decides nothing: every outcome an action can have
(a savepoint trigger accepted or refused, the runs left once old ones are deleted) was decided with the
plan, and what it led to goes back as `Executed` for the record step to report.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sluice_operator import manifests as m
from sluice_operator.models import constants as c

from ..clients.deps import Deps
from ..clients.rest import Coordinator, CoordinatorError
from ..clients.storage import Storage
from ..common._time import rfc3339
from ..common.acted import (
    Done,
    Executed,
    FilesDisposed,
    MonitorEnsured,
    Refused,
    Result,
    RunsDeleted,
    SecretReady,
    StateKeyReady,
)
from ..common.objects import ObjectMeta
from ..common.observed import Observed
from ..common.plan import (
    Action,
    CreateSavepoint,
    DeleteCheckpointRuns,
    DeleteOwned,
    DeletePods,
    DeleteSavepoint,
    DisposeSavepointFiles,
    EnsureJobSecret,
    EnsurePodMonitor,
    EnsureStateKey,
    Event,
    LabelSavepoint,
    PatchSavepoint,
    Plan,
    Prerequisite,
    SetDesiredState,
    StartRun,
    TriggerSavepoint,
)
from .auth import ensure_job_secret, ensure_state_key
from .monitoring import delete_pod_monitor, ensure_pod_monitor
from .record import action_events
from .recorder import Recorder

log = logging.getLogger(__name__)


async def start_run(deps: Deps, run: m.Run) -> None:
    """Create what a run needs, then its coordinator pod (Spark creates the TaskManagers)."""
    kube = deps.kube
    if run.spec.service_account is None:
        for manifest in (
            m.driver_service_account(run.owner),
            m.driver_role(run.owner),
            m.driver_role_binding(run.owner),
        ):
            await kube.create(manifest)
    if run.config.network_policies:
        config = run.config
        await kube.create(
            m.network_policy(
                run.owner,
                config.operator_namespace,
                config.operator_pod_labels,
                config.scraper,
                config.coordinator_rest_port,
            )
        )
    await kube.create(m.config_map(run))
    await kube.create(m.rest_service(run))
    await kube.create(m.coordinator_pod(run))


async def _trigger(deps: Deps, obs: Observed, action: TriggerSavepoint, recorder: Recorder) -> Done | Refused:
    pod = obs.pod
    try:
        if pod is None or pod.ip is None:
            raise CoordinatorError("the coordinator pod has no IP")
        coordinator = Coordinator(deps.http, pod.ip, pod.rest_port, obs.rest_token)
        trigger = await coordinator.trigger_savepoint(
            action.stop, action.target_directory, request_id=action.request_id
        )
    except CoordinatorError as error:
        refused = action.refused.model_copy(update={"error": str(error)})
        await recorder.savepoint_status(action.name, refused)
        return Refused(action, refused)
    accepted = action.accepted.model_copy(update={"trigger_id": trigger, "trigger_time": rfc3339(_now_ms())})
    await recorder.savepoint_status(action.name, accepted)
    return Done(action)


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class _Acting:
    deps: Deps
    obs: Observed
    owner: m.Owner
    recorder: Recorder
    storage: Storage | None


async def execute(
    deps: Deps,
    obs: Observed,
    plan: Plan,
    owner: m.Owner,
    *,
    status: dict[str, Any] | None = None,
    said: Sequence[Event] = (),
    storage: Storage | None = None,
) -> Executed:
    """Write the job's `status` patch (if any), run the actions in order, then post the events: the
    plan's, what the status change `said`, and what acting did. The first failure stops the rest (the
    next reconcile starts over). `storage` is the job's checkpoint storage, for a plan that deletes
    earlier runs."""
    recorder = Recorder(deps.kube, deps.events, owner)
    if status:
        await recorder.job_status(owner.name, status)
    acting = _Acting(deps, obs, owner, recorder, storage)
    results: list[Result] = []
    for action in plan.actions:
        if isinstance(action, Prerequisite):  # asked for on every reconcile: not logged each time
            results.append(await _prerequisite(acting, action))
            continue
        log.info("%s/%s: %s", owner.namespace, owner.name, _describe(action))
        results.append(await _one(acting, action))
    executed = Executed(tuple(results))
    recorder.say([*plan.events, *said, *action_events(executed)])
    return executed


async def _one(acting: _Acting, action: Action) -> Result:
    match action:
        case StartRun(run=run):
            await start_run(acting.deps, run)
        case DeletePods(names=names):
            for name in names:
                await acting.deps.kube.delete_pod(acting.owner.namespace, name)
        case SetDesiredState():
            await _set_desired_state(acting, action)
        case DeleteCheckpointRuns():
            return await _delete_runs(acting, action)
        case DeleteOwned():
            await _delete_owned(acting, action)
        case _:
            return await _on_savepoint(acting, action)
    return Done(action)


async def _prerequisite(acting: _Acting, action: Prerequisite) -> Result:
    kube, owner = acting.deps.kube, acting.owner
    match action:
        case EnsureJobSecret():
            return SecretReady(action, await ensure_job_secret(kube, owner))
        case EnsureStateKey():
            return StateKeyReady(action, await ensure_state_key(kube, owner.namespace))
        case EnsurePodMonitor(config=config):
            return MonitorEnsured(action, await ensure_pod_monitor(kube, owner, config))


async def _on_savepoint(acting: _Acting, action: Action) -> Result:
    kube, ns = acting.deps.kube, acting.owner.namespace
    match action:
        case CreateSavepoint(manifest=manifest):
            await kube.create_custom(c.SAVEPOINT_PLURAL, ns, manifest)
        case TriggerSavepoint():
            return await _trigger(acting.deps, acting.obs, action, acting.recorder)
        case PatchSavepoint(name=name, status=status):
            await acting.recorder.savepoint_status(name, status)
        case DeleteSavepoint(name=name):
            await kube.delete_custom(c.SAVEPOINT_PLURAL, ns, name)
        case LabelSavepoint(name=name, labels=labels):
            await kube.patch_custom(c.SAVEPOINT_PLURAL, ns, name, {"metadata": {"labels": labels}})
        case DisposeSavepointFiles(path=path):
            return FilesDisposed(action, await _storage(acting).dispose(path))
    return Done(action)


def _storage(acting: _Acting) -> Storage:
    if acting.storage is None:
        raise RuntimeError(f"a plan that deletes files is executed with their storage ({acting.owner})")
    return acting.storage


async def _delete_owned(acting: _Acting, action: DeleteOwned) -> None:
    kube, ns = acting.deps.kube, acting.owner.namespace
    match action.kind:
        case c.SAVEPOINT_KIND:
            await kube.delete_custom(c.SAVEPOINT_PLURAL, ns, action.name)
        case "Pod":
            await kube.delete_pod(ns, action.name)
        case m.POD_MONITOR_KIND:
            await delete_pod_monitor(kube, acting.owner)  # only the job's own, if the CRD is there
        case _:
            await kube.delete(action.kind, ns, action.name)


async def _set_desired_state(acting: _Acting, action: SetDesiredState) -> None:
    kube, ns = acting.deps.kube, acting.owner.namespace
    patch = {"spec": {"state": action.state.value}}
    job = await kube.patch_custom(c.STREAMJOB_PLURAL, ns, acting.owner.name, patch)
    generation = str(ObjectMeta.parse(job).generation)
    labels = {"metadata": {"labels": {c.LABEL_GENERATION: generation}}}
    await kube.patch_custom(c.SAVEPOINT_PLURAL, ns, action.savepoint, labels)


async def _delete_runs(acting: _Acting, action: DeleteCheckpointRuns) -> RunsDeleted:
    """Deleting first: if storage fails, the runs stay recorded and the next reconcile tries again.
    `deleted` lists the runs whose directory was there (one gone already is not listed)."""
    storage, root = _storage(acting), action.checkpoint_dir.rstrip("/")
    deleted = [run for run in action.runs if await storage.dispose(f"{root}/{run}")]
    await acting.recorder.job_status(acting.owner.name, {"checkpointRuns": list(action.remaining)})
    return RunsDeleted(action, tuple(deleted))


def _describe(action: Action) -> str:
    match action:
        case StartRun(run=run):
            return f"start job {run.job_id} from {run.restore_from or 'empty state'}"
        case DeletePods(names=names, reason=reason):
            return f"delete pods {', '.join(names)} ({reason})"
        case DeleteOwned(kind=kind, name=name):
            return f"delete {kind} {name} (the job is being deleted)"
        case DeleteCheckpointRuns(runs=runs):
            return f"delete the checkpoints of earlier runs {', '.join(runs)}"
        case _:
            return type(action).__name__


__all__ = ["execute", "start_run"]

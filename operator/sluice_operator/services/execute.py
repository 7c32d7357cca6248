"""Carrying out a plan's actions against Kubernetes and the coordinator."""

from __future__ import annotations

import logging
import time
from typing import Any

from sluice_operator import manifests as m
from sluice_operator.models import SavepointState
from sluice_operator.models import constants as c

from ._time import rfc3339
from .observe import Deps
from .observed import Observed, SavepointView
from .plan import (
    Action,
    CreateSavepoint,
    DeletePods,
    DeleteSavepoint,
    Event,
    LabelSavepoint,
    PatchSavepoint,
    Plan,
    SetDesiredState,
    StartRun,
    TriggerSavepoint,
)
from .rest import Coordinator, CoordinatorError
from .savepoints import LABEL_GENERATION

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
            m.network_policy(run.owner, config.operator_namespace, config.operator_pod_labels, config.scraper)
        )
    await kube.create(m.config_map(run))
    await kube.create(m.rest_service(run))
    await kube.create(m.coordinator_pod(run))


def savepoint_patch(status: Any) -> dict[str, Any]:
    # Nulls are kept: in a merge patch they remove fields, e.g. the trigger id of a retried savepoint.
    return dict(status.model_dump(mode="json", by_alias=True, exclude_none=False))


async def _trigger(deps: Deps, obs: Observed, action: TriggerSavepoint, plan: Plan, namespace: str) -> None:
    view = next(v for v in obs.savepoints if v.name == action.name)
    ip = obs.pod.ip if obs.pod is not None else None
    try:
        if ip is None:
            raise CoordinatorError("the coordinator pod has no IP")
        coordinator = Coordinator(deps.http, ip, token=obs.rest_token)
        trigger = await coordinator.trigger_savepoint(action.stop, action.target_directory)
    except CoordinatorError as error:
        await _trigger_failed(deps, view, str(error), plan, namespace)
        return
    status = view.status.model_copy(
        update={
            "state": SavepointState.IN_PROGRESS,
            "trigger_id": trigger,
            "job_id": action.job_id,
            "trigger_time": rfc3339(_now_ms()),
            "error": None,
        }
    )
    await deps.kube.patch_status(c.SAVEPOINT_PLURAL, namespace, action.name, savepoint_patch(status))


async def _trigger_failed(deps: Deps, view: SavepointView, error: str, plan: Plan, namespace: str) -> None:
    failures = view.status.failures + 1
    limit = view.spec.backoff_limit if view.spec is not None else 0
    state = SavepointState.FAILED if failures > limit else SavepointState.PENDING
    status = view.status.model_copy(update={"state": state, "failures": failures, "error": error})
    await deps.kube.patch_status(c.SAVEPOINT_PLURAL, namespace, view.name, savepoint_patch(status))
    if state is SavepointState.FAILED:
        plan.events.append(Event("Warning", "SavepointFailed", f"savepoint {view.name} failed: {error}"))
        plan.events.append(Event("Warning", "Failed", error, savepoint=view.name, uid=view.uid))


def _now_ms() -> int:
    return int(time.time() * 1000)


async def execute(deps: Deps, obs: Observed, plan: Plan, owner: m.Owner) -> None:
    """Run the actions in order; the first failure stops the rest (the next reconcile starts over)."""
    for action in plan.actions:
        log.info("%s/%s: %s", owner.namespace, owner.name, _describe(action))
        await _one(deps, obs, plan, owner, action)


async def _one(deps: Deps, obs: Observed, plan: Plan, owner: m.Owner, action: Action) -> None:
    kube = deps.kube
    ns = owner.namespace
    match action:
        case StartRun(run=run):
            await start_run(deps, run)
        case DeletePods(names=names):
            for name in names:
                await kube.delete_pod(ns, name)
        case CreateSavepoint(manifest=manifest):
            await kube.create_custom(c.SAVEPOINT_PLURAL, ns, manifest)
        case TriggerSavepoint():
            await _trigger(deps, obs, action, plan, ns)
        case PatchSavepoint(name=name, status=status):
            await kube.patch_status(c.SAVEPOINT_PLURAL, ns, name, savepoint_patch(status))
        case DeleteSavepoint(name=name):
            await kube.delete_custom(c.SAVEPOINT_PLURAL, ns, name)
            plan.events.append(
                Event("Normal", "SavepointDeleted", f"deleted Savepoint {name}: {action.reason}")
            )
        case SetDesiredState(state=state, savepoint=savepoint):
            job = await kube.patch_custom(c.STREAMJOB_PLURAL, ns, owner.name, {"spec": {"state": state}})
            generation = str(job.get("metadata", {}).get("generation"))
            await kube.patch_custom(
                c.SAVEPOINT_PLURAL, ns, savepoint, {"metadata": {"labels": {LABEL_GENERATION: generation}}}
            )
        case LabelSavepoint(name=name, labels=labels):
            await kube.patch_custom(c.SAVEPOINT_PLURAL, ns, name, {"metadata": {"labels": labels}})


def _describe(action: Action) -> str:
    match action:
        case StartRun(run=run):
            return f"start job {run.job_id} from {run.restore_from or 'empty state'}"
        case DeletePods(names=names, reason=reason):
            return f"delete pods {', '.join(names)} ({reason})"
        case _:
            return type(action).__name__


__all__ = ["execute", "start_run"]

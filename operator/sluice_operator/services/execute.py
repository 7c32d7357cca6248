"""Carrying out a plan's actions against Kubernetes and the coordinator; what was done is returned.

Acting decides nothing: every outcome an action can have (a savepoint trigger accepted or refused) was
decided with the plan, and what it led to goes back as `Executed` for the record step to report.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from sluice_operator import manifests as m
from sluice_operator.models import SavepointStatus
from sluice_operator.models import constants as c

from ._time import rfc3339
from .observe import Deps
from .observed import Observed
from .plan import (
    Action,
    CreateSavepoint,
    DeletePods,
    DeleteSavepoint,
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


@dataclass(frozen=True)
class Done:
    action: Action


@dataclass(frozen=True)
class Refused:
    """A savepoint trigger the coordinator refused (or could not be asked): `status` was written."""

    action: TriggerSavepoint
    status: SavepointStatus


@dataclass(frozen=True)
class Executed:
    """What was done and what was refused, in the order of the plan's actions. An action that raised is
    not in it, nor any after it: the exception goes to the caller and the next reconcile starts over."""

    results: tuple[Done | Refused, ...] = ()


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


def savepoint_patch(status: SavepointStatus) -> dict[str, Any]:
    # Nulls are kept: in a merge patch they remove fields, e.g. the trigger id of a retried savepoint.
    return dict(status.model_dump(mode="json", by_alias=True, exclude_none=False))


async def _trigger(deps: Deps, obs: Observed, action: TriggerSavepoint, namespace: str) -> Done | Refused:
    pod = obs.pod
    try:
        if pod is None or pod.ip is None:
            raise CoordinatorError("the coordinator pod has no IP")
        coordinator = Coordinator(deps.http, pod.ip, pod.rest_port, obs.rest_token)
        trigger = await coordinator.trigger_savepoint(action.stop, action.target_directory)
    except CoordinatorError as error:
        refused = action.refused.model_copy(update={"error": str(error)})
        await deps.kube.patch_status(c.SAVEPOINT_PLURAL, namespace, action.name, savepoint_patch(refused))
        return Refused(action, refused)
    accepted = action.accepted.model_copy(update={"trigger_id": trigger, "trigger_time": rfc3339(_now_ms())})
    await deps.kube.patch_status(c.SAVEPOINT_PLURAL, namespace, action.name, savepoint_patch(accepted))
    return Done(action)


def _now_ms() -> int:
    return int(time.time() * 1000)


async def execute(deps: Deps, obs: Observed, plan: Plan, owner: m.Owner) -> Executed:
    """Run the actions in order; the first failure stops the rest (the next reconcile starts over)."""
    results: list[Done | Refused] = []
    for action in plan.actions:
        log.info("%s/%s: %s", owner.namespace, owner.name, _describe(action))
        results.append(await _one(deps, obs, owner, action))
    return Executed(tuple(results))


async def _one(deps: Deps, obs: Observed, owner: m.Owner, action: Action) -> Done | Refused:
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
            return await _trigger(deps, obs, action, ns)
        case PatchSavepoint(name=name, status=status):
            await kube.patch_status(c.SAVEPOINT_PLURAL, ns, name, savepoint_patch(status))
        case DeleteSavepoint(name=name):
            await kube.delete_custom(c.SAVEPOINT_PLURAL, ns, name)
        case SetDesiredState(state=state, savepoint=savepoint):
            patch = {"spec": {"state": state.value}}
            job = await kube.patch_custom(c.STREAMJOB_PLURAL, ns, owner.name, patch)
            generation = str(job.get("metadata", {}).get("generation"))
            await kube.patch_custom(
                c.SAVEPOINT_PLURAL, ns, savepoint, {"metadata": {"labels": {LABEL_GENERATION: generation}}}
            )
        case LabelSavepoint(name=name, labels=labels):
            await kube.patch_custom(c.SAVEPOINT_PLURAL, ns, name, {"metadata": {"labels": labels}})
    return Done(action)


def _describe(action: Action) -> str:
    match action:
        case StartRun(run=run):
            return f"start job {run.job_id} from {run.restore_from or 'empty state'}"
        case DeletePods(names=names, reason=reason):
            return f"delete pods {', '.join(names)} ({reason})"
        case _:
            return type(action).__name__


__all__ = ["Done", "Executed", "Refused", "execute", "savepoint_patch", "start_run"]

"""Deciding a StreamJob's deletion: the savepoint it takes first, then everything its runs made."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sluice_operator import manifests as m
from sluice_operator.models import OperatorConfig, RunState, SavepointKind, SavepointState, StopMode
from sluice_operator.models import constants as c

from ..common.context import JobContext
from ..common.observed import Observed, SavepointView
from ..common.plan import CreateSavepoint, DeleteOwned, Event, Plan
from .savepoints import plan_savepoints


def coordinator_first(owner: m.Owner, savepoints: Sequence[SavepointView]) -> Plan:
    """What goes first: the job's own Savepoints (their finalizer disposes of the files with
    disposeOnDelete) and its coordinator pod."""
    first = [DeleteOwned(c.SAVEPOINT_KIND, view.name) for view in savepoints if view.owned]
    return Plan(actions=[*first, DeleteOwned("Pod", m.coordinator_name(owner.name))])


def teardown(config: OperatorConfig, owner: m.Owner, pods: Sequence[str]) -> Plan:
    """Deleting everything the job's runs made, once its coordinator (which makes executor pods) is gone:
    the job's remaining `pods` (their names), then what it made once."""
    owned = [("Pod", pod) for pod in pods]
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
            # Not owned by the job: the savepoint outlives it, so the state can be restored elsewhere.
            owned=False,
        )
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


__all__ = ["coordinator_first", "plan_deletion_savepoint", "teardown"]

"""Recording a reconcile: the status patch and the events, from the decision and what acting did.

Pure: the status stays a `StreamJobStatus` until `status_patch` dumps it once, against the status as
Kubernetes holds it, into a merge patch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluice_operator.models import (
    Condition,
    ConditionType,
    DegradedReason,
    LifecycleState,
    MonitorReason,
    SavepointState,
    StreamJobStatus,
)

from ..common.acted import Executed, FilesDisposed, MonitorState, Refused, RunsDeleted
from ..common.conditions import set_condition
from ..common.plan import DeleteSavepoint, Event
from ..common.savepoint_events import outcome_events


def status_delta(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A merge patch turning `old` into `new` (fields gone from `new` become null), or {} if equal.

    A merge patch merges nested objects key by key, so the same applies inside them: a new run's `job`
    must not keep the `endTime` of the run before.
    """
    delta: dict[str, Any] = {}
    for key, value in new.items():
        before = old.get(key)
        if before == value:
            continue
        if isinstance(before, dict) and isinstance(value, dict):
            delta[key] = status_delta(before, value)
        else:
            delta[key] = value
    delta.update({k: None for k in old if k not in new})
    return delta


def status_patch(old: dict[str, Any], status: StreamJobStatus) -> dict[str, Any]:
    """The merge patch from the stored status `old` to `status`; {} when there is nothing to write."""
    return status_delta(old, status.model_dump(mode="json", by_alias=True, exclude_none=True))


@dataclass(frozen=True)
class StatusRecord:
    status: StreamJobStatus
    patch: dict[str, Any]
    events: list[Event]  # what the status change itself says (a new error, a PodMonitor change)


def record_status(
    old: dict[str, Any],
    decided: StreamJobStatus,
    monitor: MonitorState | None,
    *,
    generation: int,
    now_ms: int,
) -> StatusRecord:
    """The status a decision leads to, with the `Monitored` condition of the PodMonitor step."""
    conditions, events = monitor_condition(decided.conditions, monitor, generation=generation, now_ms=now_ms)
    status = decided.model_copy(update={"conditions": conditions})
    if status.error and status.error != old.get("error"):
        events.append(Event("Warning", "Error", status.error))
    return StatusRecord(status, status_patch(old, status), events)


def record_degraded(
    old: dict[str, Any],
    status: StreamJobStatus,
    reason: DegradedReason,
    message: str,
    *,
    generation: int,
    now_ms: int,
) -> StatusRecord:
    """A job that cannot be decided on: the rest of its status stays, `Degraded` says why."""
    conditions = set_condition(
        status.conditions,
        ConditionType.DEGRADED,
        True,
        reason,
        message,
        generation=generation,
        now_ms=now_ms,
    )
    degraded = status.model_copy(
        update={"error": message, "observed_generation": generation, "conditions": conditions}
    )
    events = [Event("Warning", reason, message)] if old.get("error") != message else []
    return StatusRecord(degraded, status_patch(old, degraded), events)


def record_deleting(old: dict[str, Any], status: StreamJobStatus) -> StatusRecord:
    """The job's deletion has started (its finalizer runs): `lifecycleState` Deleting."""
    deleting = status.model_copy(update={"lifecycle_state": LifecycleState.DELETING})
    events = [Event("Normal", "Deleting", "deleting the job and everything it owns")]
    return StatusRecord(deleting, status_patch(old, deleting), events)


def monitor_condition(
    conditions: list[Condition], state: MonitorState | None, *, generation: int, now_ms: int
) -> tuple[list[Condition], list[Event]]:
    """`conditions` with the `Monitored` condition (None: the option is off, no condition); its events.

    One event when the condition's reason changes, not on every reconcile: a missing CRD is said once.
    """
    previous = next((c for c in conditions if c.type == ConditionType.MONITORED), None)
    if state is None:
        return [c for c in conditions if c is not previous], []
    updated = set_condition(
        conditions,
        ConditionType.MONITORED,
        state.ok,
        state.reason,
        state.message,
        generation=generation,
        now_ms=now_ms,
    )
    before = previous.reason if previous else None
    if state.reason == before or (state.reason is MonitorReason.READY and before == MonitorReason.CREATED):
        return updated, []
    return updated, [Event("Normal" if state.ok else "Warning", state.reason, state.message)]


def action_events(executed: Executed) -> list[Event]:
    """The events of what acting did: Savepoints and earlier runs' checkpoints deleted, and triggers
    refused for good."""
    events: list[Event] = []
    for result in executed.results:  # in the order of the actions
        if isinstance(result, FilesDisposed):
            path = result.action.path
            message = f"deleted savepoint files at {path}" if result.removed else f"{path} was already gone"
            events.append(
                Event("Normal", "Disposed", message, savepoint=result.action.name, uid=result.action.uid)
            )
        elif isinstance(result, RunsDeleted):
            events += [
                Event("Normal", "CheckpointsDeleted", f"deleted the checkpoints of earlier run {run}")
                for run in result.deleted
            ]
        elif isinstance(result, Refused):
            if result.status.state is SavepointState.FAILED:
                events.extend(outcome_events(result.action.name, result.action.uid, result.status))
        elif isinstance(result.action, DeleteSavepoint):
            deleted = result.action
            events.append(
                Event("Normal", "SavepointDeleted", f"deleted Savepoint {deleted.name}: {deleted.reason}")
            )
    return events


__all__ = [
    "StatusRecord",
    "action_events",
    "monitor_condition",
    "record_degraded",
    "record_deleting",
    "record_status",
    "status_delta",
    "status_patch",
]

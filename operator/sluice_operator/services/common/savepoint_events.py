"""The events of a savepoint that has ended, in the same words whoever says them: deciding, for one it
followed to its end; recording, for a trigger the coordinator refused for good."""

from __future__ import annotations

from sluice_operator.models import SavepointState, SavepointStatus

from .plan import Event


def outcome_events(name: str, uid: str | None, status: SavepointStatus) -> list[Event]:
    """The events of a savepoint that has ended: one on its job, one on the Savepoint itself."""
    if status.state is SavepointState.COMPLETED:
        return [
            Event("Normal", "SavepointCompleted", f"savepoint {name} completed at {status.path}"),
            Event("Normal", "Completed", f"savepoint at {status.path}", savepoint=name, uid=uid),
        ]
    if status.state in (SavepointState.FAILED, SavepointState.ABANDONED):
        text = f"savepoint {name} {status.state.value.lower()}: {status.error}"
        return [
            Event("Warning", f"Savepoint{status.state.value}", text),
            Event("Warning", status.state.value, status.error or "", savepoint=name, uid=uid),
        ]
    return []


__all__ = ["outcome_events"]

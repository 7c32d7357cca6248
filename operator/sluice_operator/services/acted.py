"""What acting on a plan did, for the record step to report: in the order of the plan's actions."""

from __future__ import annotations

from dataclasses import dataclass

from sluice_operator.models import SavepointStatus

from .plan import Action, DeleteCheckpointRuns, TriggerSavepoint


@dataclass(frozen=True)
class Done:
    action: Action


@dataclass(frozen=True)
class Refused:
    """A savepoint trigger the coordinator refused (or could not be asked): `status` was written."""

    action: TriggerSavepoint
    status: SavepointStatus


@dataclass(frozen=True)
class RunsDeleted:
    """Earlier runs' checkpoints deleted: `deleted` are those whose directory was still there."""

    action: DeleteCheckpointRuns
    deleted: tuple[str, ...]


Result = Done | Refused | RunsDeleted


@dataclass(frozen=True)
class Executed:
    """What was done and what was refused, in the order of the plan's actions. An action that raised is
    not in it, nor any after it: the exception goes to the caller and the next reconcile starts over."""

    results: tuple[Result, ...] = ()


__all__ = ["Done", "Executed", "Refused", "Result", "RunsDeleted"]

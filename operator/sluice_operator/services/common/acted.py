"""What acting on a plan did, for the record step to report: in the order of the plan's actions."""

from __future__ import annotations

from dataclasses import dataclass, field

from sluice_operator.models import MonitorReason, SavepointStatus

from .plan import (
    Action,
    DeleteCheckpointRuns,
    DisposeSavepointFiles,
    EnsureJobSecret,
    EnsurePodMonitor,
    EnsureStateKey,
    TriggerSavepoint,
)


@dataclass(frozen=True)
class MonitorState:
    """How keeping the job's PodMonitor went: what its `Monitored` condition says."""

    ok: bool
    reason: MonitorReason
    message: str


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


@dataclass(frozen=True)
class SecretReady:
    """The job's Secret is in place; `token` is its REST token (never logged, never recorded)."""

    action: EnsureJobSecret
    token: str = field(repr=False)


@dataclass(frozen=True)
class StateKeyReady:
    """The namespace's state key Secret is in place; `key` is what it holds (never logged)."""

    action: EnsureStateKey
    key: bytes = field(repr=False)


@dataclass(frozen=True)
class MonitorEnsured:
    action: EnsurePodMonitor
    state: MonitorState


@dataclass(frozen=True)
class FilesDisposed:
    """A Savepoint's files deleted (`removed`), or found gone already."""

    action: DisposeSavepointFiles
    removed: bool


Result = Done | Refused | RunsDeleted | SecretReady | StateKeyReady | MonitorEnsured | FilesDisposed


@dataclass(frozen=True)
class Executed:
    """What was done and what was refused, in the order of the plan's actions. An action that raised is
    not in it, nor any after it: the exception goes to the caller and the next reconcile starts over."""

    results: tuple[Result, ...] = ()

    @property
    def rest_token(self) -> str | None:
        return next((r.token for r in self.results if isinstance(r, SecretReady)), None)

    @property
    def state_key(self) -> bytes | None:
        return next((r.key for r in self.results if isinstance(r, StateKeyReady)), None)

    @property
    def monitor(self) -> MonitorState | None:
        return next((r.state for r in self.results if isinstance(r, MonitorEnsured)), None)


__all__ = [
    "Done",
    "Executed",
    "FilesDisposed",
    "MonitorEnsured",
    "MonitorState",
    "Refused",
    "Result",
    "RunsDeleted",
    "SecretReady",
]

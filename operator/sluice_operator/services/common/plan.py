"""The outcome of a decision: actions to carry out, the status to write, events to post."""

from __future__ import annotations

from dataclasses import dataclass, field

from sluice_operator.manifests import Manifest, Run
from sluice_operator.models import JobState, PodMonitorConfig, SavepointStatus, StreamJobStatus, TriggerStop


@dataclass(frozen=True)
class Event:
    type: str  # Normal or Warning
    reason: str
    message: str
    savepoint: str | None = None  # post on this Savepoint instead of the StreamJob
    uid: str | None = None  # of that Savepoint: `kubectl describe` finds events by uid


@dataclass(frozen=True)
class StartRun:
    run: Run


@dataclass(frozen=True)
class DeletePods:
    names: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class CreateSavepoint:
    manifest: Manifest


@dataclass(frozen=True)
class TriggerSavepoint:
    """Ask the coordinator for a savepoint, then record what it answered on the Savepoint.

    Both outcomes are decided here: `accepted` is written with the trigger id and time the coordinator's
    answer gives, `refused` (a failed attempt, with the retry already counted against the backoff
    limit) with the coordinator's error.
    """

    name: str
    stop: TriggerStop | None  # None: a savepoint that leaves the job running
    target_directory: str
    job_id: str
    accepted: SavepointStatus
    refused: SavepointStatus
    uid: str | None = None  # of the Savepoint, for the events of a refusal that fails it
    request_id: str | None = None
    """Sent with the trigger: the coordinator answers a request id it accepted before with the same
    trigger, so a trigger asked for again after its record was lost starts nothing new."""


@dataclass(frozen=True)
class PatchSavepoint:
    name: str
    status: SavepointStatus


@dataclass(frozen=True)
class DeleteSavepoint:
    name: str
    reason: str


@dataclass(frozen=True)
class SetDesiredState:
    """A user's stop Savepoint decides the job's desired state: the operator writes it into the spec."""

    state: JobState
    savepoint: str


@dataclass(frozen=True)
class LabelSavepoint:
    name: str
    labels: dict[str, str]


@dataclass(frozen=True)
class DeleteCheckpointRuns:
    """Delete the checkpoint directories of earlier runs nothing can restore from any more.

    `remaining` is `status.checkpointRuns` once they are gone, written after deleting: if storage
    fails, the runs stay recorded and the next reconcile decides to delete them again.
    """

    checkpoint_dir: str
    runs: tuple[str, ...]
    remaining: tuple[str, ...]


@dataclass(frozen=True)
class EnsureJobSecret:
    """Create the job's Secret (REST token, Spark secret) unless it exists; an existing one is kept."""


@dataclass(frozen=True)
class EnsureStateKey:
    """Create the namespace's state key Secret unless it exists; an existing one is never drawn again."""


@dataclass(frozen=True)
class EnsurePodMonitor:
    """Keep the job's PodMonitor in place (with the operator's PodMonitor option)."""

    config: PodMonitorConfig


@dataclass(frozen=True)
class DeleteOwned:
    """Delete an object of the job's (its finalizer's part); one gone already counts as deleted."""

    kind: str  # Pod, Service, ..., Savepoint, PodMonitor
    name: str


@dataclass(frozen=True)
class DisposeSavepointFiles:
    """Delete the files of a Savepoint with disposeOnDelete (its finalizer's part)."""

    name: str
    path: str
    uid: str | None = None  # of the Savepoint, for the event that says so


Prerequisite = EnsureJobSecret | EnsureStateKey | EnsurePodMonitor

Action = (
    StartRun
    | DeletePods
    | CreateSavepoint
    | TriggerSavepoint
    | PatchSavepoint
    | DeleteSavepoint
    | (SetDesiredState | LabelSavepoint | DeleteCheckpointRuns | DeleteOwned | DisposeSavepointFiles)
    | Prerequisite
)


@dataclass
class Plan:
    status: StreamJobStatus = field(default_factory=StreamJobStatus)
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue_s: float | None = None  # come back sooner than the regular timer

    def soon(self, seconds: float) -> None:
        self.requeue_s = seconds if self.requeue_s is None else min(self.requeue_s, seconds)

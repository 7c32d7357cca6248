"""The REST documents the operator reads from a job's coordinator (docs/reference/rest-api.md).

The coordinator builds them and the operator parses them, both through these classes: a field renamed
on one side is a type error on the other. Only what the operator reads is here; the coordinator's
answers carry more beside it (vertices, TaskManagers, metrics: the dashboard's), and a reader ignores
fields it does not know. States are text on the reading side: a newer runtime may report a state an
older operator lacks (`sluice_contract.states` has the ones there are).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .codec import Document, DocumentError, is_none, wire
from .states import CheckpointKind, StopMode

__all__ = [
    "CheckpointSummary",
    "CheckpointsSummary",
    "DocumentError",
    "JobRates",
    "JobSummary",
    "SavepointProgress",
    "SavepointTriggered",
    "SubtaskCounts",
]


@dataclass(frozen=True)
class SubtaskCounts(Document):
    total: int = 0
    running: int = 0
    finished: int = 0


@dataclass(frozen=True)
class JobRates(Document):
    records_read_per_second: float | None = None
    """What the sources emit, per second; None until measured."""
    records_written_per_second: float | None = None
    """What the sinks take, per second; None until measured."""


@dataclass(frozen=True)
class JobSummary(Document):
    """`GET /v1/job`: which run this is, its state and its progress."""

    job_id: str
    state: str
    """A `JobState`."""
    start_time: int | None = None
    """ms since the epoch."""
    end_time: int | None = None
    restarts: int | None = None
    error: str | None = None
    subtasks: SubtaskCounts = SubtaskCounts()
    rates: JobRates = JobRates()


_ONCE_COMPLETED = wire(omit_when=is_none)


@dataclass(frozen=True)
class CheckpointSummary(Document):
    """One checkpoint or savepoint as `GET /v1/checkpoints` shows it (`latest`, `history`). What it cost
    and which operators had finished are shown once it completed (`_ONCE_COMPLETED`: left out till then)."""

    id: int
    kind: CheckpointKind
    status: str
    """A `CheckpointStatus`."""
    trigger_time: int
    completion_time: int | None = None
    path: str | None = None
    error: str | None = None
    fully_finished_operators: tuple[str, ...] | None = field(default=None, metadata=_ONCE_COMPLETED)
    finished_subtasks: int | None = field(default=None, metadata=_ONCE_COMPLETED)
    duration_ms: int | None = field(default=None, metadata=_ONCE_COMPLETED)
    sync_ms: float | None = field(default=None, metadata=_ONCE_COMPLETED)
    """The longest synchronous part of a subtask's snapshot (its record processing stopped)."""
    async_ms: float | None = field(default=None, metadata=_ONCE_COMPLETED)
    start_delay_ms: float | None = field(default=None, metadata=_ONCE_COMPLETED)
    alignment_ms: float | None = field(default=None, metadata=_ONCE_COMPLETED)
    bytes_written: int | None = field(default=None, metadata=_ONCE_COMPLETED)
    state_size: int | None = field(default=None, metadata=_ONCE_COMPLETED)
    """All the state the checkpoint references, shared files included."""


@dataclass(frozen=True)
class CheckpointsSummary(Document):
    """`GET /v1/checkpoints`: the latest completed checkpoint and the recent ones, newest first."""

    latest: CheckpointSummary | None = None
    history: tuple[CheckpointSummary, ...] = ()


@dataclass(frozen=True)
class SavepointTriggered(Document):
    """The answer to `POST /v1/savepoints`."""

    trigger_id: str


@dataclass(frozen=True)
class SavepointProgress(Document):
    """`GET /v1/savepoints/{triggerId}`."""

    status: str
    """A `CheckpointStatus`: IN_PROGRESS until the savepoint completed or failed."""
    path: str | None = None
    checkpoint_id: int | None = None
    error: str | None = None
    stop: StopMode | None = None
    """The stop-with-savepoint it was taken for, or None (the job goes on)."""

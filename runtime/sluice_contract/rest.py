"""The REST documents the operator reads from a job's coordinator (docs/reference/rest-api.md).

The coordinator builds them and the operator parses them, both through these classes: a field renamed
on one side is a type error on the other. Only what the operator reads is here; the coordinator's
answers carry more beside it (vertices, TaskManagers, metrics: the dashboard's), and a reader ignores
fields it does not know. States are text on the reading side: a newer runtime may report a state an
older operator lacks (`sluice_contract.states` has the ones there are).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .codec import Document, DocumentError, is_none, wire
from .states import CheckpointKind, StopMode

__all__ = [
    "REQUEST_ID_MAX",
    "CheckpointSummary",
    "CheckpointsSummary",
    "DocumentError",
    "JobRates",
    "JobSummary",
    "SavepointProgress",
    "SavepointTrigger",
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


REQUEST_ID_MAX = 64
"""The longest request id a savepoint request may carry."""
_REQUEST_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{REQUEST_ID_MAX - 1}}}")
_STOPS = f'false, "{StopMode.SUSPEND.value}" or "{StopMode.TERMINATE.value}"'


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _stop(value: Any, where: str, name: str) -> StopMode | None:
    # `is False`, not `==`: 0 == False in Python, and 0 is no way to say "no stop".
    if value is False or value is None:
        return None
    if isinstance(value, str) and value in tuple(StopMode):
        return StopMode(value)
    raise DocumentError(f"{where}: {name} must be {_STOPS}, not {_shown(value)}")


def _target(value: Any, where: str, name: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise DocumentError(f"{where}: {name} must be a URI string, not {_shown(value)}")
    return value


def _request_id(value: Any, where: str, name: str) -> str | None:
    # Chosen by the caller, kept by the coordinator, stored in the job result and shown in logs: a short
    # word of letters, digits, '.', '_' and '-' (a Kubernetes uid fits), nothing a log or a path reads.
    if value is None:
        return None
    if not isinstance(value, str) or _REQUEST_ID.fullmatch(value) is None:
        raise DocumentError(
            f"{where}: {name} must be 1 to {REQUEST_ID_MAX} letters, digits, '.', '_' or '-', starting "
            f"with a letter or digit, not {_shown(value)}"
        )
    return value


@dataclass(frozen=True)
class SavepointTrigger(Document):
    """The body of `POST /v1/savepoints`: a savepoint, or a stop with one (FLIP-34)."""

    refuse_unknown = True

    stop: StopMode | None = field(
        default=None, metadata=wire(read=_stop, write=lambda mode: False if mode is None else mode.value)
    )
    """None (sent as false): a savepoint that leaves the job running."""
    target_directory: str | None = field(default=None, metadata=wire(read=_target, omit_when=is_none))
    """None: the job's default savepoint directory."""
    request_id: str | None = field(default=None, metadata=wire(read=_request_id, omit_when=is_none))
    """Chosen by the caller to make the request idempotent (Flink's client-chosen `triggerId`): the
    coordinator answers a request id it has accepted before with that request's trigger, and starts
    nothing new. A stop's request id is stored with the job's result (`stopRequestId`), so a caller that
    lost the answer can still find its savepoint once the coordinator is gone."""


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

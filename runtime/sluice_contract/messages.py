"""The control messages between a job's coordinator and its TaskManagers, on the declarative codec.

Each is a JSON object with a `type`, read into its class before anyone reads a field (the framing,
the type dispatch and the errors are `sluice.transport.messages`). Fields not named here are ignored:
a newer peer may send more. The one field that carries Python objects, the deployed job graph, is an
opaque base64 string that a TaskManager unpickles only from a coordinator that proved it holds the
job's secret. The checkpoint acknowledgement (`ack`) is the checkpoint package's: it carries state
handles, which this package does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from .codec import Document, DocumentError, check, is_none, wire, wrong
from .states import StopMode, SubtaskState

STATE_WRITE = "state-write"
"""The `cause` of a decline whose subtask failed to write its state."""
SubtaskKey = tuple[int, int]
"""`(vertex, subtask)`; on the wire a `[vertex, subtask]` pair, or a `"vertex:subtask"` key."""
Figures = dict[str, int | float | None]


class Message(Document):
    """A control message: its `TYPE` goes first on the wire, as `type`."""

    TYPE: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE} | super().to_json()

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        if isinstance(data, dict) and data.get("type") != cls.TYPE:
            raise wrong(where or cls.__name__, "type", data.get("type"), repr(cls.TYPE))
        return super().from_json(data, where)


# -- coordinator -> TaskManager ---------------------------------------------------------------------


@dataclass(frozen=True)
class Deploy(Message):
    TYPE: ClassVar[str] = "deploy"
    attempt: int = field(metadata=wire(minimum=0))
    job_id: str
    graph: str
    """The pickled job graph, base64 (`sluice.transport.messages.encode_blob`)."""
    tasks: tuple[SubtaskKey, ...] = field(metadata=wire(minimum=0))
    """The subtasks this TaskManager runs."""
    placement: Mapping[SubtaskKey, int] = field(metadata=wire(minimum=0))
    """Every subtask's TaskManager."""
    taskmanagers: Mapping[int, tuple[str, int]]
    """Every TaskManager's data address."""
    restore: str | None
    attempt_token: str
    wait_for_final_checkpoint: bool
    restore_digest: str | None = field(default=None, metadata=wire(omit_when=is_none))
    """The SHA-256 of the `_metadata` at `restore` that the coordinator authenticated: TaskManagers
    hold no state key, and read only that file."""


@dataclass(frozen=True)
class Trigger(Message):
    TYPE: ClassVar[str] = "trigger"
    checkpoint: int = field(metadata=wire(minimum=0))
    timestamp: int
    location: str
    savepoint: bool
    tasks: tuple[SubtaskKey, ...] = field(metadata=wire(minimum=0))
    """The subtasks that start the checkpoint (sources, and tasks whose inputs all finished)."""
    completed: int = field(default=0, metadata=wire(minimum=0, required=True))
    """The newest checkpoint completed when this one was triggered (0: none). Its barrier carries it,
    so that a subtask whose notice of that completion is still on its way bases an incremental snapshot
    on it, not on an older chain the coordinator may have deleted since."""


@dataclass(frozen=True)
class _CheckpointNotice(Message):
    checkpoint: int = field(metadata=wire(minimum=0))


@dataclass(frozen=True)
class Complete(_CheckpointNotice):
    """The checkpoint completed: two-phase-commit sinks commit what they pre-committed for it."""

    TYPE: ClassVar[str] = "complete"


@dataclass(frozen=True)
class Abort(_CheckpointNotice):
    """The checkpoint failed: subtasks stop aligning for it and their operators learn it was aborted."""

    TYPE: ClassVar[str] = "abort"


def _drain_flag(value: Any, where: str, name: str) -> StopMode:
    return StopMode.of_drain(check(bool, value, where, name))


@dataclass(frozen=True)
class Stop(Message):
    """Stop-with-savepoint: the sources stop, with drain (TERMINATE) or without (SUSPEND)."""

    TYPE: ClassVar[str] = "stop"
    mode: StopMode = field(metadata=wire(name="drain", read=_drain_flag, write=lambda mode: mode.drains))


@dataclass(frozen=True)
class JobEnd(Document):
    """The job ended for good: what sinks may still commit (the latest checkpoint, the savepoints)."""

    latest_checkpoint: int
    savepoints: tuple[int, ...] = field(metadata=wire(minimum=0))


@dataclass(frozen=True)
class Shutdown(Message):
    TYPE: ClassVar[str] = "shutdown"
    job_ended: JobEnd | None = field(default=None, metadata=wire(omit_when=is_none))
    """Set when no attempt follows, so that sinks release what only a restore would commit."""


ToTaskManager = Deploy | Trigger | Complete | Abort | Stop | Shutdown
TO_TASKMANAGER_TYPES: tuple[type[ToTaskManager], ...] = (Deploy, Trigger, Complete, Abort, Stop, Shutdown)

# -- TaskManager -> coordinator -----------------------------------------------------------------------


@dataclass(frozen=True)
class Register(Message):
    TYPE: ClassVar[str] = "register"
    tm: int = field(metadata=wire(minimum=0))
    host: str
    data_port: int
    pid: int


@dataclass(frozen=True)
class Heartbeat(Message):
    """Sent by a TaskManager's heartbeat thread on a connection of its own (see engine/_pulse.py)."""

    TYPE: ClassVar[str] = "heartbeat"
    tm: int = field(metadata=wire(minimum=0))
    pid: int
    data_port: int


@dataclass(frozen=True)
class TaskReport(Message):
    """A subtask changed state."""

    TYPE: ClassVar[str] = "task"
    vertex: int = field(metadata=wire(minimum=0))
    subtask: int = field(metadata=wire(minimum=0))
    state: SubtaskState
    error: str | None = field(default=None, metadata=wire(omit_when=is_none))
    """FAILED: what failed."""
    trace: str | None = field(default=None, metadata=wire(omit_when=is_none))
    """FAILED: the traceback."""
    drain: bool | None = field(default=None, metadata=wire(omit_when=is_none))
    """END_OF_DATA: whether the input ended with drain (flushed, timers fired)."""
    storage: bool | None = field(default=None, metadata=wire(omit_when=is_none))
    """FAILED: the store failed while the subtask read the state it restores (the job suspends)."""


@dataclass(frozen=True)
class Decline(Message):
    """A subtask could not take its part of a checkpoint."""

    TYPE: ClassVar[str] = "decline"
    checkpoint: int = field(metadata=wire(minimum=0))
    vertex: int = field(metadata=wire(minimum=0))
    subtask: int = field(metadata=wire(minimum=0))
    reason: str
    cause: str | None = field(default=None, metadata=wire(omit_when=is_none))
    """`STATE_WRITE` when writing state failed: counts toward --tolerable-checkpoint-failures."""


def _figures(value: Any, where: str, name: str) -> dict[str, Figures]:
    # The keys stay text (the coordinator shows them as sent), checked as "vertex:subtask".
    by_subtask = check(Mapping[SubtaskKey, Mapping[str, int | float | None]], value, where, name)
    return {f"{v}:{s}": figures for (v, s), figures in by_subtask.items()}


@dataclass(frozen=True)
class MetricsReport(Message):
    """A TaskManager's subtask figures: `"<vertex>:<subtask>"` -> {figure name: number or null}."""

    TYPE: ClassVar[str] = "metrics"
    tm: int = field(metadata=wire(minimum=0))
    metrics: dict[str, Figures] = field(default_factory=dict, metadata=wire(read=_figures, required=True))


TaskManagerReport = Register | Heartbeat | TaskReport | Decline | MetricsReport
TASKMANAGER_REPORT_TYPES: tuple[type[TaskManagerReport], ...] = (
    Register,
    Heartbeat,
    TaskReport,
    Decline,
    MetricsReport,
)

__all__ = [
    "STATE_WRITE",
    "TASKMANAGER_REPORT_TYPES",
    "TO_TASKMANAGER_TYPES",
    "Abort",
    "Complete",
    "Decline",
    "Deploy",
    "DocumentError",
    "Figures",
    "Heartbeat",
    "JobEnd",
    "Message",
    "MetricsReport",
    "Register",
    "Shutdown",
    "Stop",
    "SubtaskKey",
    "TaskManagerReport",
    "TaskReport",
    "ToTaskManager",
    "Trigger",
]

"""Control messages: JSON objects with a `type`, one frozen dataclass per type, checked when they arrive.

Control messages travel between the coordinator and TaskManagers on the control connection. They are
JSON, a format whose decoding runs no code, and every message is parsed into its type before anyone
reads a field: an unknown type, a missing field or a field of the wrong type ends the connection with a
message saying what was wrong, instead of a KeyError deep inside the job master. Fields not named here
are ignored (a newer peer may send more). The one field that carries Python objects, the deployed job
graph, is an opaque base64 string that a TaskManager unpickles only from a coordinator that proved it
holds the job's secret.

The acknowledgement of a checkpoint (`ack`) is the checkpoint package's
(`sluice.checkpoint.acknowledgement`): this module knows frames and fields, not state handles, so the
coordinator adds its parser to `TASKMANAGER_REPORTS`.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self, TypeVar

from sluice._json import Fields, FormatError
from sluice._states import StopMode, SubtaskState

M = TypeVar("M")
STATE_WRITE = "state-write"
"""The `cause` of a decline whose subtask failed to write its state."""
SubtaskKey = tuple[int, int]


class MessageError(ValueError):
    """A control message that is not JSON or does not match its type."""


def _subtasks(fields: Fields, name: str) -> tuple[SubtaskKey, ...]:
    pairs = fields.array(name)
    for pair in pairs:
        ok = isinstance(pair, list) and len(pair) == 2
        if not ok or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in pair):
            raise FormatError(f"{fields.where}: {name!r} must list [vertex, subtask] pairs, not {pair!r}")
    return tuple((v, s) for v, s in pairs)


def _subtask_key(text: str, where: str) -> SubtaskKey:
    vertex, sep, subtask = text.partition(":")
    if not (sep and vertex.isdecimal() and subtask.isdecimal()):
        raise FormatError(f"{where}: subtasks are named 'vertex:subtask', not {text!r}")
    return int(vertex), int(subtask)


# -- coordinator -> TaskManager ---------------------------------------------------------------------


@dataclass(frozen=True)
class Deploy:
    TYPE: ClassVar[str] = "deploy"
    attempt: int
    job_id: str
    graph: str
    """The pickled job graph, base64 (`encode_blob`)."""
    tasks: tuple[SubtaskKey, ...]
    """The subtasks this TaskManager runs."""
    placement: Mapping[SubtaskKey, int]
    """Every subtask's TaskManager."""
    taskmanagers: Mapping[int, tuple[str, int]]
    """Every TaskManager's data address."""
    restore: str | None
    attempt_token: str
    wait_for_final_checkpoint: bool
    restore_digest: str | None = None
    """The SHA-256 of the `_metadata` at `restore` that the coordinator authenticated: TaskManagers
    hold no state key, and read only that file."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "attempt": self.attempt,
            "jobId": self.job_id,
            "graph": self.graph,
            "tasks": [list(t) for t in self.tasks],
            "placement": {f"{v}:{s}": tm for (v, s), tm in self.placement.items()},
            "taskmanagers": {str(tm): [host, port] for tm, (host, port) in self.taskmanagers.items()},
            "restore": self.restore,
            "attemptToken": self.attempt_token,
            "waitForFinalCheckpoint": self.wait_for_final_checkpoint,
        }
        if self.restore_digest is not None:
            out["restoreDigest"] = self.restore_digest
        return out

    @staticmethod
    def from_fields(fields: Fields) -> Deploy:
        placement = Fields(fields.data.get("placement"), f"{fields.where} placement")
        where: dict[SubtaskKey, int] = {}
        for key in placement.data:
            where[_subtask_key(key, placement.where)] = placement.integer(key, minimum=0)
        addresses: dict[int, tuple[str, int]] = {}
        taskmanagers = Fields(fields.data.get("taskmanagers"), f"{fields.where} taskmanagers")
        for key, address in taskmanagers.data.items():
            ok = isinstance(address, list) and len(address) == 2 and isinstance(address[0], str)
            if not (
                key.isdecimal() and ok and isinstance(address[1], int) and not isinstance(address[1], bool)
            ):
                raise FormatError(f"{taskmanagers.where}: {key!r} must map to [host, port], not {address!r}")
            addresses[int(key)] = (address[0], address[1])
        return Deploy(
            attempt=fields.integer("attempt", minimum=0),
            job_id=fields.text("jobId"),
            graph=fields.text("graph"),
            tasks=_subtasks(fields, "tasks"),
            placement=where,
            taskmanagers=addresses,
            restore=fields.optional_text("restore"),
            attempt_token=fields.text("attemptToken"),
            wait_for_final_checkpoint=fields.flag("waitForFinalCheckpoint"),
            restore_digest=fields.optional_text("restoreDigest"),
        )


@dataclass(frozen=True)
class Trigger:
    TYPE: ClassVar[str] = "trigger"
    checkpoint: int
    timestamp: int
    location: str
    savepoint: bool
    tasks: tuple[SubtaskKey, ...]
    """The subtasks that start the checkpoint (sources, and tasks whose inputs all finished)."""
    completed: int = 0
    """The newest checkpoint completed when this one was triggered (0: none). Its barrier carries it,
    so that a subtask whose notice of that completion is still on its way bases an incremental snapshot
    on it, not on an older chain the coordinator may have deleted since."""

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "checkpoint": self.checkpoint,
            "timestamp": self.timestamp,
            "location": self.location,
            "savepoint": self.savepoint,
            "tasks": [list(t) for t in self.tasks],
            "completed": self.completed,
        }

    @staticmethod
    def from_fields(fields: Fields) -> Trigger:
        return Trigger(
            fields.integer("checkpoint", minimum=0),
            fields.integer("timestamp"),
            fields.text("location"),
            fields.flag("savepoint"),
            _subtasks(fields, "tasks"),
            fields.integer("completed", minimum=0),
        )


@dataclass(frozen=True)
class _CheckpointNotice:
    TYPE: ClassVar[str]
    checkpoint: int

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "checkpoint": self.checkpoint}

    @classmethod
    def from_fields(cls, fields: Fields) -> Self:
        return cls(fields.integer("checkpoint", minimum=0))


@dataclass(frozen=True)
class Complete(_CheckpointNotice):
    """The checkpoint completed: two-phase-commit sinks commit what they pre-committed for it."""

    TYPE: ClassVar[str] = "complete"


@dataclass(frozen=True)
class Abort(_CheckpointNotice):
    """The checkpoint failed: subtasks stop aligning for it and their operators learn it was aborted."""

    TYPE: ClassVar[str] = "abort"


@dataclass(frozen=True)
class Stop:
    """Stop-with-savepoint: the sources stop, with drain (TERMINATE) or without (SUSPEND)."""

    TYPE: ClassVar[str] = "stop"
    mode: StopMode

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "drain": self.mode.drains}

    @staticmethod
    def from_fields(fields: Fields) -> Stop:
        return Stop(StopMode.of_drain(fields.flag("drain")))


@dataclass(frozen=True)
class JobEnd:
    """The job ended for good: what sinks may still commit (the latest checkpoint, the savepoints)."""

    latest_checkpoint: int
    savepoints: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"latestCheckpoint": self.latest_checkpoint, "savepoints": list(self.savepoints)}


@dataclass(frozen=True)
class Shutdown:
    TYPE: ClassVar[str] = "shutdown"
    job_ended: JobEnd | None = None
    """Set when no attempt follows, so that sinks release what only a restore would commit."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE}
        if self.job_ended is not None:
            out["jobEnded"] = self.job_ended.to_json()
        return out

    @staticmethod
    def from_fields(fields: Fields) -> Shutdown:
        if fields.data.get("jobEnded") is None:
            return Shutdown()
        ended = Fields(fields.data["jobEnded"], f"{fields.where} jobEnded")
        return Shutdown(JobEnd(ended.integer("latestCheckpoint"), tuple(ended.integers("savepoints"))))


ToTaskManager = Deploy | Trigger | Complete | Abort | Stop | Shutdown
TO_TASKMANAGER: Mapping[str, Callable[[Fields], ToTaskManager]] = {
    c.TYPE: c.from_fields for c in (Deploy, Trigger, Complete, Abort, Stop, Shutdown)
}

# -- TaskManager -> coordinator -----------------------------------------------------------------------


@dataclass(frozen=True)
class Register:
    TYPE: ClassVar[str] = "register"
    tm: int
    host: str
    data_port: int
    pid: int

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "tm": self.tm,
            "host": self.host,
            "dataPort": self.data_port,
            "pid": self.pid,
        }

    @staticmethod
    def from_fields(fields: Fields) -> Register:
        return Register(
            fields.integer("tm", minimum=0),
            fields.text("host"),
            fields.integer("dataPort"),
            fields.integer("pid"),
        )


@dataclass(frozen=True)
class Heartbeat:
    """Sent by a TaskManager's heartbeat thread on a connection of its own (see engine/_pulse.py)."""

    TYPE: ClassVar[str] = "heartbeat"
    tm: int
    pid: int
    data_port: int

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "tm": self.tm, "pid": self.pid, "dataPort": self.data_port}

    @staticmethod
    def from_fields(fields: Fields) -> Heartbeat:
        return Heartbeat(fields.integer("tm", minimum=0), fields.integer("pid"), fields.integer("dataPort"))


@dataclass(frozen=True)
class TaskReport:
    """A subtask changed state."""

    TYPE: ClassVar[str] = "task"
    vertex: int
    subtask: int
    state: SubtaskState
    error: str | None = None
    """FAILED: what failed."""
    trace: str | None = None
    """FAILED: the traceback."""
    drain: bool | None = None
    """END_OF_DATA: whether the input ended with drain (flushed, timers fired)."""
    storage: bool | None = None
    """FAILED: the store failed while the subtask read the state it restores (the job suspends)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE, "vertex": self.vertex, "subtask": self.subtask}
        out["state"] = self.state
        for name in ("error", "trace", "drain", "storage"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    @staticmethod
    def from_fields(fields: Fields) -> TaskReport:
        drain, storage = fields.data.get("drain"), fields.data.get("storage")
        return TaskReport(
            fields.integer("vertex", minimum=0),
            fields.integer("subtask", minimum=0),
            fields.choice("state", SubtaskState),
            fields.optional_text("error"),
            fields.optional_text("trace"),
            None if drain is None else fields.flag("drain"),
            None if storage is None else fields.flag("storage"),
        )


@dataclass(frozen=True)
class Decline:
    """A subtask could not take its part of a checkpoint."""

    TYPE: ClassVar[str] = "decline"
    checkpoint: int
    vertex: int
    subtask: int
    reason: str
    cause: str | None = None
    """`STATE_WRITE` when writing state failed: counts toward --tolerable-checkpoint-failures."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "checkpoint": self.checkpoint,
            "vertex": self.vertex,
            "subtask": self.subtask,
            "reason": self.reason,
        }
        if self.cause is not None:
            out["cause"] = self.cause
        return out

    @staticmethod
    def from_fields(fields: Fields) -> Decline:
        return Decline(
            fields.integer("checkpoint", minimum=0),
            fields.integer("vertex", minimum=0),
            fields.integer("subtask", minimum=0),
            fields.text("reason"),
            fields.optional_text("cause"),
        )


Figures = dict[str, int | float | None]


@dataclass(frozen=True)
class MetricsReport:
    """A TaskManager's subtask figures: `"<vertex>:<subtask>"` -> {figure name: number or null}."""

    TYPE: ClassVar[str] = "metrics"
    tm: int
    metrics: dict[str, Figures] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "tm": self.tm, "metrics": self.metrics}

    @staticmethod
    def from_fields(fields: Fields) -> MetricsReport:
        samples = Fields(fields.data.get("metrics"), f"{fields.where} metrics")
        for key, sample in samples.data.items():
            _subtask_key(key, samples.where)
            if not isinstance(sample, dict):
                raise FormatError(f"metrics must map 'vertex:subtask' to an object, not {key!r}: {sample!r}")
            for name, value in sample.items():
                number = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
                if not (value is None or (number and not isinstance(value, bool))):
                    raise FormatError(f"metric {name!r} of subtask {key} is {value!r}, not a number")
        return MetricsReport(fields.integer("tm", minimum=0), samples.data)


# The reports whose fields this module knows; the coordinator adds the checkpoint acknowledgement.
TASKMANAGER_REPORTS: Mapping[
    str, Callable[[Fields], Register | Heartbeat | TaskReport | Decline | MetricsReport]
]
TASKMANAGER_REPORTS = {
    c.TYPE: c.from_fields for c in (Register, Heartbeat, TaskReport, Decline, MetricsReport)
}


class Message(Protocol):
    """Every control message: the dataclasses here, and the checkpoint acknowledgement."""

    def to_json(self) -> dict[str, Any]: ...


def encode_message(message: Message) -> bytes:
    return json.dumps(message.to_json(), separators=(",", ":"), allow_nan=False).encode()


def decode_message(payload: bytes, kinds: Mapping[str, Callable[[Fields], M]]) -> M:
    """Parses a payload into the message of its type, one of `kinds`; MessageError says what is wrong."""
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
        raise MessageError(f"a control message is not JSON: {err}") from None
    if not isinstance(value, dict):
        raise MessageError(f"a control message must be a JSON object, not {type(value).__name__}")
    kind = value.get("type")
    parse = kinds.get(kind) if isinstance(kind, str) else None
    if parse is None:
        raise MessageError(f"unknown control message type {kind!r}; expected one of {sorted(kinds)}")
    try:
        return parse(Fields(value, f"control message {kind!r}"))
    except FormatError as err:
        raise MessageError(str(err)) from None


def encode_blob(data: bytes) -> str:
    """Bytes inside a JSON message (the pickled job graph)."""
    return base64.b64encode(data).decode("ascii")


def decode_blob(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)

"""A subtask's acknowledgement of a checkpoint: the `ack` control message, and the handles in it.

A TaskManager builds it once the subtask's state is written (`sluice.engine.task`); the coordinator
parses it when it arrives and builds `_metadata` from the acknowledgements of all subtasks
(`sluice.checkpoint.coordinator`). It arrives over the network: every field is checked on arrival, and
a malformed acknowledgement ends the TaskManager's control connection, as any malformed message does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from sluice._json import Fields, FormatError
from sluice.checkpoint.metadata import (
    PendingCommit,
    SubtaskHandle,
    digest_of,
    file_name,
    key_groups_of,
    keyed_files_of,
    protected_files_of,
)
from sluice.state.chain_files import KeyedFile


def _figure(fields: Fields, name: str) -> float:
    # The cost figures are statistics only: one that is missing or not a number counts as nothing
    # instead of failing the checkpoint.
    value = fields.data.get(name)
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return 0.0


@dataclass(frozen=True)
class AckedOperator:
    """One operator of the acknowledging subtask's chain."""

    uid: str
    finished: bool
    """The operator subtask had finished: it has no state but, maybe, transactions to commit."""
    path: str | None = None
    """Its state file beside `_metadata`, or None."""
    size: int = 0
    key_groups: tuple[int, int] | None = None
    operator_state: bool = True
    union: bool = False
    pending_commits: bool = False
    """A finished operator whose state file holds transactions to commit once the checkpoint completes."""
    keyed_files: tuple[KeyedFile, ...] = ()
    protected_files: tuple[str, ...] = ()
    """Shared files the subtask is still writing (a compaction of its chain): kept, never restored."""
    bytes_written: int = 0
    """Bytes written for this checkpoint (the state file and the newest keyed file)."""
    state_size: int = 0
    """Bytes of all state it references, files shared with earlier checkpoints included."""
    sha256: str | None = None
    """The digest of the state file at `path`, taken while it was written."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "uid": self.uid,
            "finished": self.finished,
            "union": self.union,
            "operatorState": self.operator_state,
            "keyGroups": None if self.key_groups is None else list(self.key_groups),
            "pendingCommits": self.pending_commits,
            "path": self.path,
            "size": self.size,
            "bytesWritten": self.bytes_written,
            "stateSize": self.state_size,
        }
        if self.keyed_files:
            out["keyedFiles"] = [f.as_json() for f in self.keyed_files]
        if self.protected_files:
            out["protectedFiles"] = list(self.protected_files)
        if self.sha256 is not None:
            out["sha256"] = self.sha256
        return out

    @staticmethod
    def from_json(fields: Fields) -> AckedOperator:
        return AckedOperator(
            uid=fields.text("uid"),
            finished=fields.flag("finished"),
            path=None if fields.data.get("path") is None else file_name(fields, "path"),
            size=fields.integer("size", minimum=0),
            key_groups=key_groups_of(fields),
            operator_state=fields.flag("operatorState"),
            union=fields.flag("union"),
            pending_commits=fields.flag("pendingCommits"),
            keyed_files=keyed_files_of(fields),
            protected_files=protected_files_of(fields),
            bytes_written=int(_figure(fields, "bytesWritten")),
            state_size=int(_figure(fields, "stateSize")),
            sha256=digest_of(fields),
        )

    def handle(self, index: int) -> SubtaskHandle:
        """What `_metadata` keeps of a running operator subtask."""
        return SubtaskHandle(
            index,
            self.path,
            self.size,
            self.key_groups,
            self.operator_state,
            self.union,
            self.keyed_files,
            self.protected_files,
            self.sha256,
        )

    def commit(self, index: int) -> PendingCommit | None:
        """What `_metadata` keeps of a finished operator subtask: its transactions to commit, if any."""
        if self.pending_commits and self.path is not None:
            return PendingCommit(index, self.path, self.size, self.sha256)
        return None


@dataclass(frozen=True)
class Acknowledgement:
    TYPE: ClassVar[str] = "ack"
    checkpoint: int
    vertex: int
    subtask: int
    operators: tuple[AckedOperator, ...]
    """One per operator of the chain, in chain order."""
    end_of_data: bool
    sync_ms: float = 0.0
    """How long record processing stopped for the synchronous part of the snapshot."""
    async_ms: float = 0.0
    """How long writing the state took, beside processing."""
    start_delay_ms: float = 0.0
    """From the trigger to the checkpoint's first barrier at this subtask (in-flight data upstream)."""
    alignment_ms: float = 0.0
    """From the first barrier to the last one at this subtask."""

    def to_json(self) -> dict[str, Any]:
        return {
            "type": Acknowledgement.TYPE,
            "checkpoint": self.checkpoint,
            "vertex": self.vertex,
            "subtask": self.subtask,
            "operators": [op.to_json() for op in self.operators],
            "endOfData": self.end_of_data,
            "syncMs": self.sync_ms,
            "asyncMs": self.async_ms,
            "startDelayMs": self.start_delay_ms,
            "alignmentMs": self.alignment_ms,
        }

    @staticmethod
    def from_json(message: dict[str, Any]) -> Acknowledgement:
        """Parses an `ack` control message; FormatError names the field that is wrong."""
        if message.get("type") != Acknowledgement.TYPE:
            raise FormatError(f"an acknowledgement has type 'ack', not {message.get('type')!r}")
        return Acknowledgement.from_fields(Fields(message, "acknowledgement"))

    @staticmethod
    def from_fields(fields: Fields) -> Acknowledgement:
        """The fields of an `ack` message (see `sluice.transport.messages.decode_message`)."""
        checkpoint = fields.data.get("checkpoint")
        fields = Fields(fields.data, f"acknowledgement of checkpoint {checkpoint!r}")
        return Acknowledgement(
            checkpoint=fields.integer("checkpoint", minimum=0),
            vertex=fields.integer("vertex", minimum=0),
            subtask=fields.integer("subtask", minimum=0),
            operators=tuple(AckedOperator.from_json(f) for f in fields.objects("operators")),
            end_of_data=fields.flag("endOfData"),
            sync_ms=round(_figure(fields, "syncMs"), 3),
            async_ms=round(_figure(fields, "asyncMs"), 3),
            start_delay_ms=round(_figure(fields, "startDelayMs"), 3),
            alignment_ms=round(_figure(fields, "alignmentMs"), 3),
        )

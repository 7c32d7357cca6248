"""A subtask's acknowledgement of a checkpoint: the `ack` control message, and the handles in it.

A TaskManager builds it once the subtask's state is written (`sluice.engine.task`); the coordinator
parses it when it arrives and builds `_metadata` from the acknowledgements of all subtasks
(`sluice.checkpoint.coordinator`). It arrives over the network: every field is checked on arrival, and
a malformed acknowledgement ends the TaskManager's control connection, as any malformed message does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from sluice.checkpoint.metadata import (
    DIGEST,
    KEY_GROUPS,
    PROTECTED_FILES,
    PendingCommit,
    SubtaskHandle,
    state_file,
)
from sluice.state.chain_files import KeyedFile
from sluice_contract.codec import Document, is_empty, wire
from sluice_contract.messages import Message

# The handles' fields get exactly the checks `_metadata` gives them when it is read back.
_PATH = wire(read=state_file)
_KEYED_FILES = wire(omit_when=is_empty)


def _figure(value: Any, where: str, name: str) -> float:
    # The cost figures are statistics only: one that is not a number counts as nothing instead of
    # failing the checkpoint.
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return 0.0


def _count(value: Any, where: str, name: str) -> int:
    return int(_figure(value, where, name))


def _duration(value: Any, where: str, name: str) -> float:
    return round(_figure(value, where, name), 3)


_REQUIRED = wire(required=True)


@dataclass(frozen=True)
class AckedOperator(Document):
    """One operator of the acknowledging subtask's chain."""

    uid: str
    finished: bool
    """The operator subtask had finished: it has no state but, maybe, transactions to commit."""
    path: str | None = field(default=None, metadata=_PATH)
    """Its state file beside `_metadata`, or None."""
    size: int = field(default=0, metadata=wire(minimum=0, required=True))
    key_groups: tuple[int, int] | None = field(default=None, metadata=KEY_GROUPS)
    operator_state: bool = field(default=True, metadata=_REQUIRED)
    union: bool = field(default=False, metadata=_REQUIRED)
    pending_commits: bool = field(default=False, metadata=_REQUIRED)
    """A finished operator whose state file holds transactions to commit once the checkpoint completes."""
    keyed_files: tuple[KeyedFile, ...] = field(default=(), metadata=_KEYED_FILES)
    protected_files: tuple[str, ...] = field(default=(), metadata=PROTECTED_FILES)
    """Shared files the subtask is still writing (a compaction of its chain): kept, never restored."""
    bytes_written: int = field(default=0, metadata=wire(read=_count))
    """Bytes written for this checkpoint (the state file and the newest keyed file)."""
    state_size: int = field(default=0, metadata=wire(read=_count))
    """Bytes of all state it references, files shared with earlier checkpoints included."""
    sha256: str | None = field(default=None, metadata=DIGEST)
    """The digest of the state file at `path`, taken while it was written."""

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
class Acknowledgement(Message):
    TYPE: ClassVar[str] = "ack"
    checkpoint: int = field(metadata=wire(minimum=0))
    vertex: int = field(metadata=wire(minimum=0))
    subtask: int = field(metadata=wire(minimum=0))
    operators: tuple[AckedOperator, ...]
    """One per operator of the chain, in chain order."""
    end_of_data: bool
    sync_ms: float = field(default=0.0, metadata=wire(read=_duration))
    """How long record processing stopped for the synchronous part of the snapshot."""
    async_ms: float = field(default=0.0, metadata=wire(read=_duration))
    """How long writing the state took, beside processing."""
    start_delay_ms: float = field(default=0.0, metadata=wire(read=_duration))
    """From the trigger to the checkpoint's first barrier at this subtask (in-flight data upstream)."""
    alignment_ms: float = field(default=0.0, metadata=wire(read=_duration))
    """From the first barrier to the last one at this subtask."""

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        """Parses an `ack` control message; FormatError names the checkpoint and the field that is wrong."""
        checkpoint = data.get("checkpoint") if isinstance(data, dict) else None
        return super().from_json(data, f"acknowledgement of checkpoint {checkpoint!r}")

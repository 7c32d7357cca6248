"""The part of a checkpoint's `_metadata` that both sides read: what the checkpoint is, not its state.

The coordinator writes the whole document (`sluice.checkpoint.metadata.CheckpointMetadata`: these
fields, and each operator's state handles, which only the runtime reads). The operator reads this part
of it to find a run's restore point and to show a checkpoint in a StreamJob's status. The handles stay
out: they are the runtime's business, and the damage check reads what it needs of them itself
(`sluice_contract.checkpoints`). The fields here have the names and types of the runtime's, and the
stop mode one reader; a test holds the two together (`tests/unit/contract/test_metadata_summary.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sluice_contract.codec import Document, wire, wrong
from sluice_contract.states import CheckpointKind, StopMode


def stop_mode_field(value: Any, where: str, name: str) -> StopMode:
    """`stopMode` as `_metadata` stores it: `drain` or `no-drain` (null is no stop)."""
    if value not in ("drain", "no-drain"):
        raise wrong(where, name, value, "null, 'drain' or 'no-drain'")
    return StopMode.from_metadata(value)


def stop_mode_text(mode: StopMode | None) -> str | None:
    return None if mode is None else mode.in_metadata


STOP_MODE = wire(absent_is_null=True, read=stop_mode_field, write=stop_mode_text)
"""The metadata of a `stop_mode: StopMode | None` field of `_metadata`."""


@dataclass(frozen=True)
class OperatorSummary(Document):
    uid: str
    fully_finished: bool
    """Every subtask had finished: no state, and the operator does not run again after a restore."""


@dataclass(frozen=True)
class MetadataSummary(Document):
    """A checkpoint or savepoint as its `_metadata` describes it; the rest of the file is ignored."""

    checkpoint_id: int = field(metadata=wire(minimum=0))
    job_id: str
    kind: CheckpointKind
    timestamp: int
    """When the checkpoint was triggered, ms since the epoch."""
    stop_mode: StopMode | None = field(metadata=STOP_MODE)
    """The stop-with-savepoint this savepoint was taken for, or None (the job went on)."""
    operators: tuple[OperatorSummary, ...]

    @property
    def fully_finished(self) -> tuple[str, ...]:
        """The uids of the operators whose every subtask had finished."""
        return tuple(op.uid for op in self.operators if op.fully_finished)

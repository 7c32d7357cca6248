"""The state one operator subtask hands to a checkpoint, what its chain reports of it, and what it gets
back on restore."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sluice.state.snapshots import SnapshotWrite


@dataclass
class OperatorSnapshot:
    """One operator subtask's state at a checkpoint.

    `keyed` maps key group -> entry name -> data; everything under a key group moves together when the
    parallelism changes. `lists` is list state (dealt round-robin on rescale), `unions` union list
    state (every subtask gets all), `broadcast` broadcast state (identical on all subtasks).
    """

    keyed: dict[int, dict[str, Any]] = field(default_factory=dict)
    lists: dict[str, list[Any]] = field(default_factory=dict)
    unions: dict[str, list[Any]] = field(default_factory=dict)
    broadcast: dict[str, dict[Any, Any]] = field(default_factory=dict)
    deferred: Any = None
    """A keyed state backend's frozen snapshot (`sluice.state.snapshots.DeferredKeyed`): written to its
    own files after the synchronous part, never pickled with the rest."""

    def is_empty(self) -> bool:
        return not (
            self.deferred is not None
            or self.keyed
            or any(self.lists.values())
            or any(self.unions.values())
            or any(self.broadcast.values())
        )

    def uses_union_state(self) -> bool:
        return bool(self.unions)


@dataclass
class OperatorAck:
    """What one operator subtask reports for a checkpoint: its snapshot, taken synchronously, before the
    subtask's checkpointer writes it (`sluice.checkpoint.subtask`)."""

    uid: str
    data: bytes | None
    """The pickled `OperatorSnapshot`, or None when the operator has no state."""
    finished: bool
    union: bool
    operator_state: bool
    key_groups: tuple[int, int] | None
    pending_commits: bool
    """A finished operator whose state holds transactions to commit once the checkpoint completes."""
    keyed: SnapshotWrite | None = None
    """The keyed state backend's snapshot, written after the synchronous part (then released)."""


@dataclass
class RestoredState:
    """The share of an operator's checkpointed state that one new subtask restores."""

    keyed: dict[int, dict[str, Any]] = field(default_factory=dict)
    lists: dict[str, list[Any]] = field(default_factory=dict)
    unions: dict[str, list[Any]] = field(default_factory=dict)
    broadcast: dict[str, dict[Any, Any]] = field(default_factory=dict)
    keyed_chains: list[Any] = field(default_factory=list)
    """A keyed state backend's files to read, `sluice.state.snapshots.ChainShare`s: read by the operator
    frame by frame into its backend, so that restoring never holds all state twice."""
    checkpoint_id: int = 0
    """The checkpoint (or savepoint) this state comes from."""

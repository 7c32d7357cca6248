"""Hands each new subtask its share of a checkpoint's state.

Keyed state moves by key group: a new subtask takes the key groups of its range from every old subtask
whose range overlaps. List state keeps subtask affinity when nothing changed (same parallelism, no
finished subtasks); otherwise all entries are dealt round-robin. Union list state goes whole to every
subtask; broadcast state is taken from the first subtask that has any (all running subtasks hold the
same). State of finished subtasks is not in the checkpoint, so redistribution covers them too.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

from sluice.checkpoint.metadata import CheckpointMetadata, OperatorEntry, SubtaskHandle
from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.checkpoint.storage import read_state_file
from sluice.state.keygroups import key_group_range
from sluice.state.snapshots import ChainShare


@dataclass
class FullyFinished:
    """Every subtask of the operator had finished: it is not run again.

    `pending_commits` is this subtask's share of the transactions the operator had pre-committed for
    that final checkpoint: a failure between completing the final checkpoint and committing them must
    not lose them, so the restored (finished) subtask commits them once more.
    """

    pending_commits: RestoredState | None = None


Share = RestoredState | FullyFinished | None


class RestoreError(ValueError):
    pass


def load_snapshot(location: str, path: str, digest: str | None) -> OperatorSnapshot:
    """Unpickles a state file once it matched its digest: None only in a savepoint the user trusted
    that was written before digests (`sluice.checkpoint.integrity`)."""
    snapshot = pickle.loads(read_state_file(location, path, digest))
    if not isinstance(snapshot, OperatorSnapshot):
        raise RestoreError(f"state file {path} in {location} holds no operator state")
    return snapshot


def restored_share(
    metadata: CheckpointMetadata, uid: str, subtask: int, parallelism: int, max_parallelism: int
) -> Share:
    entry = metadata.operator(uid)
    if entry is None:
        return None
    if entry.fully_finished:
        return _finished_share(metadata, entry, subtask, parallelism)
    keyed = any(h.key_groups is not None for h in entry.subtasks)
    if keyed and entry.max_parallelism != max_parallelism:
        raise RestoreError(
            f"operator {uid!r} was checkpointed with max parallelism {entry.max_parallelism} "
            "but the job now "
            f"uses {max_parallelism}; keyed state can only be restored with the same max parallelism"
        )
    unchanged = entry.parallelism == parallelism and not entry.finished_subtasks
    target = _NewSubtask(subtask, parallelism, max_parallelism, unchanged)
    return _running_share(metadata, entry, target)


def _finished_share(
    metadata: CheckpointMetadata, entry: OperatorEntry, subtask: int, parallelism: int
) -> FullyFinished:
    """The transactions pre-committed for the final checkpoint, each given to exactly one new subtask."""
    mine = [h for h in entry.pending_commits if h.index % parallelism == subtask]
    if not mine:
        return FullyFinished()
    commits = RestoredState(checkpoint_id=metadata.checkpoint_id)
    for commit in mine:
        for name, items in load_snapshot(metadata.location, commit.path, commit.sha256).lists.items():
            commits.lists.setdefault(name, []).extend(items)
    return FullyFinished(commits)


@dataclass(frozen=True)
class _NewSubtask:
    """The subtask a share is for, and which old subtasks' state it needs."""

    index: int
    parallelism: int
    max_parallelism: int
    unchanged: bool
    """Same parallelism as checkpointed and no finished subtasks: list state keeps subtask affinity."""

    @property
    def key_groups(self) -> range:
        return key_group_range(self.index, self.max_parallelism, self.parallelism)

    def overlaps(self, handle: SubtaskHandle) -> bool:
        """Whether the old subtask held keyed state in key groups this one owns."""
        groups, mine = handle.key_groups, self.key_groups
        return groups is not None and groups[0] < mine.stop and groups[1] >= mine.start

    def takes_operator_state(self, handle: SubtaskHandle) -> bool:
        """Union state comes from every old subtask; other operator state from its own old subtask
        when nothing changed, otherwise from all of them to be dealt."""
        return handle.operator_state and (not self.unchanged or handle.index == self.index or handle.union)


def _running_share(metadata: CheckpointMetadata, entry: OperatorEntry, target: _NewSubtask) -> RestoredState:
    share = RestoredState(checkpoint_id=metadata.checkpoint_id)
    dealt: dict[str, list[Any]] = {}
    # Each old subtask's snapshot file is read at most once: it holds its keyed and its operator state.
    for handle in sorted(entry.subtasks, key=lambda h: h.index):
        overlaps = target.overlaps(handle)
        if overlaps and handle.keyed_files:
            share.keyed_chains.append(_chain_share(metadata.location, handle, target))
        if handle.path is None or not (overlaps or target.takes_operator_state(handle)):
            continue
        snapshot = load_snapshot(metadata.location, handle.path, handle.sha256)
        mine = target.key_groups
        share.keyed.update((group, data) for group, data in snapshot.keyed.items() if group in mine)
        _take_operator_state(share, dealt, snapshot, handle, target)
    for name, items in dealt.items():
        share.lists[name] = items[target.index :: target.parallelism]
    return share


def _chain_share(location: str, handle: SubtaskHandle, target: _NewSubtask) -> ChainShare:
    """The old subtask's incremental keyed files, filtered to the new key groups unless within them."""
    groups, mine = handle.key_groups, target.key_groups
    assert groups is not None
    inside = mine.start <= groups[0] and groups[1] < mine.stop
    return ChainShare(location, list(handle.keyed_files), None if inside else mine, target.max_parallelism)


def _take_operator_state(
    share: RestoredState,
    dealt: dict[str, list[Any]],
    snapshot: OperatorSnapshot,
    handle: SubtaskHandle,
    target: _NewSubtask,
) -> None:
    """List state is kept (unchanged) or collected into `dealt`; union state is merged; broadcast state is
    taken from the first old subtask that has it (every running subtask held the same)."""
    for name, items in snapshot.lists.items():
        if not target.unchanged:
            dealt.setdefault(name, []).extend(items)
        elif handle.index == target.index:
            share.lists[name] = list(items)
    for name, items in snapshot.unions.items():
        share.unions.setdefault(name, []).extend(items)
    for name, entries in snapshot.broadcast.items():
        if name not in share.broadcast and entries:
            share.broadcast[name] = dict(entries)

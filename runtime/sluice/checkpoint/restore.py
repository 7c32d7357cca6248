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

from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.checkpoint.storage import read_bytes
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


def load_snapshot(location: str, path: str) -> OperatorSnapshot:
    snapshot = pickle.loads(read_bytes(location, path))
    assert isinstance(snapshot, OperatorSnapshot)
    return snapshot


def restored_share(
    metadata: CheckpointMetadata, uid: str, subtask: int, parallelism: int, max_parallelism: int
) -> Share:
    entry = metadata.operator(uid)
    if entry is None:
        return None
    location = metadata.location
    if entry.fully_finished:
        mine = [h for h in entry.pending_commits if h.index % parallelism == subtask]
        if not mine:
            return FullyFinished()
        commits = RestoredState(checkpoint_id=metadata.checkpoint_id)
        for commit in mine:
            for name, items in load_snapshot(location, commit.path).lists.items():
                commits.lists.setdefault(name, []).extend(items)
        return FullyFinished(commits)
    handles = sorted(entry.subtasks, key=lambda h: h.index)
    keyed_handles = [h for h in handles if h.key_groups is not None]
    if keyed_handles and entry.max_parallelism != max_parallelism:
        raise RestoreError(
            f"operator {uid!r} was checkpointed with max parallelism {entry.max_parallelism} "
            "but the job now "
            f"uses {max_parallelism}; keyed state can only be restored with the same max parallelism"
        )
    unchanged = entry.parallelism == parallelism and not entry.finished_subtasks
    share = RestoredState(checkpoint_id=metadata.checkpoint_id)
    my_groups = key_group_range(subtask, max_parallelism, parallelism)
    dealt: dict[str, list[Any]] = {}
    for handle in handles:
        groups = handle.key_groups
        overlaps = groups is not None and groups[0] < my_groups.stop and groups[1] >= my_groups.start
        needed = overlaps or (
            handle.operator_state and (not unchanged or handle.index == subtask or handle.union)
        )
        if not needed:
            continue
        if overlaps and handle.keyed_files:
            assert groups is not None
            inside = my_groups.start <= groups[0] and groups[1] < my_groups.stop
            share.keyed_chains.append(
                ChainShare(location, list(handle.keyed_files), None if inside else my_groups, max_parallelism)
            )
        if handle.path is None:
            continue
        snapshot = load_snapshot(location, handle.path)
        for group, data in snapshot.keyed.items():
            if group in my_groups:
                share.keyed[group] = data
        for name, items in snapshot.lists.items():
            if unchanged:
                if handle.index == subtask:
                    share.lists[name] = list(items)
            else:
                dealt.setdefault(name, []).extend(items)
        for name, items in snapshot.unions.items():
            share.unions.setdefault(name, []).extend(items)
        for name, entries in snapshot.broadcast.items():
            if name not in share.broadcast and entries:
                share.broadcast[name] = dict(entries)
    for name, items in dealt.items():
        share.lists[name] = items[subtask::parallelism]
    return share

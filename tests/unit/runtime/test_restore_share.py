"""Each new subtask's share of a checkpoint, read from real state files and `_metadata` in a temp dir."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sluice.checkpoint.metadata import CheckpointMetadata, PendingCommit
from sluice.checkpoint.restore import FullyFinished, RestoreError, restored_share
from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.checkpoint.storage import write_state_file
from sluice.state.keygroups import key_group_for, key_group_range

from ._support import write_checkpoint

MAX_P = 128


def keyed_snapshots(keys: list[Any], parallelism: int) -> dict[int, OperatorSnapshot | None]:
    """What a keyed operator at `parallelism` checkpoints when key k holds the value f"v{k}"."""
    snaps: dict[int, OperatorSnapshot | None] = {s: OperatorSnapshot() for s in range(parallelism)}
    for key in keys:
        group = key_group_for(key, MAX_P)
        owner = next(s for s in range(parallelism) if group in key_group_range(s, MAX_P, parallelism))
        snap = snaps[owner]
        assert snap is not None
        snap.keyed.setdefault(group, {}).setdefault("user", {}).setdefault("count", {})[key] = f"v{key}"
    return snaps


def shares(metadata: CheckpointMetadata, uid: str, parallelism: int) -> list[RestoredState]:
    out = []
    for subtask in range(parallelism):
        share = restored_share(metadata, uid, subtask, parallelism, MAX_P)
        assert isinstance(share, RestoredState)
        out.append(share)
    return out


def restored_keys(share: RestoredState) -> dict[Any, str]:
    return {k: v for group in share.keyed.values() for k, v in group["user"]["count"].items()}


KEYS = [f"user-{i}" for i in range(300)] + list(range(200))


def write_checkpoint_keyed(
    tmp_path: Path, parallelism: int, finished: tuple[int, ...] = ()
) -> CheckpointMetadata:
    snaps = keyed_snapshots(KEYS, parallelism)
    for index in finished:
        snaps.pop(index)
    return write_checkpoint(tmp_path, "counts", snaps, parallelism, MAX_P, keyed=True, finished=finished)


@pytest.mark.parametrize(("old", "new"), [(1, 4), (2, 3), (3, 2), (4, 1), (3, 3), (5, 7), (7, 5)])
def test_keyed_state_moves_by_key_group(tmp_path: Path, old: int, new: int) -> None:
    metadata = write_checkpoint_keyed(tmp_path, old)
    restored = shares(metadata, "counts", new)
    seen: dict[Any, str] = {}
    for subtask, share in enumerate(restored):
        mine = key_group_range(subtask, MAX_P, new)
        assert all(g in mine for g in share.keyed), "a subtask got a key group it does not own"
        keys = restored_keys(share)
        assert all(key_group_for(k, MAX_P) in mine for k in keys)
        assert not set(keys) & set(seen), "a key was restored into two subtasks"
        seen.update(keys)
    assert seen == {k: f"v{k}" for k in KEYS}


def test_keyed_state_of_a_partially_finished_operator_is_redistributed(tmp_path: Path) -> None:
    # Subtask 1 finished: its key groups have no state; the rest is spread over the new subtasks.
    metadata = write_checkpoint_keyed(tmp_path, 3, finished=(1,))
    finished_groups = key_group_range(1, MAX_P, 3)
    expected = {k: f"v{k}" for k in KEYS if key_group_for(k, MAX_P) not in finished_groups}
    restored: dict[Any, str] = {}
    for share in shares(metadata, "counts", 3):
        restored.update(restored_keys(share))
    assert restored == expected


def test_max_parallelism_mismatch_is_refused(tmp_path: Path) -> None:
    metadata = write_checkpoint_keyed(tmp_path, 2)
    with pytest.raises(RestoreError) as caught:
        restored_share(metadata, "counts", 0, 2, 256)
    message = str(caught.value)
    assert "'counts'" in message and "128" in message and "256" in message
    assert "same max parallelism" in message


def list_snapshots(items_per_subtask: list[list[str]]) -> dict[int, OperatorSnapshot | None]:
    return {s: OperatorSnapshot(lists={"offsets": items}) for s, items in enumerate(items_per_subtask)}


def test_list_state_keeps_subtask_affinity_when_nothing_changed(tmp_path: Path) -> None:
    items = [["a0", "a1"], ["b0"], ["c0", "c1", "c2"]]
    metadata = write_checkpoint(tmp_path, "src", list_snapshots(items), 3)
    assert [share.lists["offsets"] for share in shares(metadata, "src", 3)] == items


@pytest.mark.parametrize("new", [1, 2, 4, 9])
def test_list_state_is_dealt_round_robin_on_rescale(tmp_path: Path, new: int) -> None:
    items = [["a0", "a1", "a2"], ["b0"], ["c0", "c1", "c2", "c3"]]
    metadata = write_checkpoint(tmp_path, "src", list_snapshots(items), 3)
    dealt = [share.lists.get("offsets", []) for share in shares(metadata, "src", new)]
    everything = [i for part in dealt for i in part]
    assert sorted(everything) == sorted(i for part in items for i in part)  # nothing lost or doubled
    assert max(map(len, dealt)) - min(map(len, dealt)) <= 1  # balanced


def test_list_state_is_dealt_when_some_subtasks_finished(tmp_path: Path) -> None:
    snaps = list_snapshots([["a0"], ["b0", "b1"], ["c0", "c1", "c2"]])
    del snaps[0]
    metadata = write_checkpoint(tmp_path, "src", snaps, 3, finished=(0,))
    dealt = [share.lists.get("offsets", []) for share in shares(metadata, "src", 3)]
    assert sorted(i for part in dealt for i in part) == ["b0", "b1", "c0", "c1", "c2"]
    assert [len(part) for part in dealt] == [2, 2, 1]


def test_union_list_state_goes_whole_to_every_subtask(tmp_path: Path) -> None:
    snaps: dict[int, OperatorSnapshot | None] = {
        0: OperatorSnapshot(unions={"watermarks": [10, 11]}),
        1: OperatorSnapshot(unions={"watermarks": [20]}),
    }
    metadata = write_checkpoint(tmp_path, "u", snaps, 2)
    for new in (1, 2, 3):
        for share in shares(metadata, "u", new):
            assert sorted(share.unions["watermarks"]) == [10, 11, 20]


def test_broadcast_state_comes_from_a_running_subtask(tmp_path: Path) -> None:
    rules = {"limit": 5, "mode": "strict"}
    snaps: dict[int, OperatorSnapshot | None] = {
        1: OperatorSnapshot(broadcast={"rules": dict(rules)}),
        2: OperatorSnapshot(broadcast={"rules": dict(rules)}),
    }
    metadata = write_checkpoint(tmp_path, "b", snaps, 3, finished=(0,))
    for new in (1, 3, 5):
        assert all(share.broadcast == {"rules": rules} for share in shares(metadata, "b", new))


def test_fully_finished_operator_is_not_run_again(tmp_path: Path) -> None:
    metadata = write_checkpoint(tmp_path, "done", {}, 2, finished=(0, 1))
    for subtask, parallelism in ((0, 2), (3, 4)):
        share = restored_share(metadata, "done", subtask, parallelism, MAX_P)
        assert share == FullyFinished(pending_commits=None)


def test_fully_finished_sink_hands_its_final_commits_to_exactly_one_new_subtask(tmp_path: Path) -> None:
    # The final checkpoint of a two-phase-commit sink: finished, but with transactions still to commit.
    metadata = write_checkpoint(tmp_path, "sink", {}, 3, finished=(0, 1, 2))
    location = metadata.location
    pending = []
    for index in range(3):
        snap = OperatorSnapshot(lists={"pending": [(4, f"txn-{index}")]})
        size, digest = write_state_file(location, f"sink-{index}.state", pickle.dumps(snap))
        pending.append(PendingCommit(index, f"sink-{index}.state", size, digest))
    sink = replace(metadata.operators[0], pending_commits=tuple(pending))
    metadata = replace(metadata, checkpoint_id=4, operators=(sink,))
    for parallelism in (1, 2, 3, 5):
        committed: list[str] = []
        for subtask in range(parallelism):
            share = restored_share(metadata, "sink", subtask, parallelism, MAX_P)
            assert isinstance(share, FullyFinished)
            if share.pending_commits is not None:
                assert share.pending_commits.checkpoint_id == 4
                committed.extend(txn for _, txn in share.pending_commits.lists["pending"])
        assert sorted(committed) == ["txn-0", "txn-1", "txn-2"], parallelism


def test_operator_absent_from_the_checkpoint_has_no_share(tmp_path: Path) -> None:
    metadata = write_checkpoint_keyed(tmp_path, 2)
    assert restored_share(metadata, "added-later", 0, 2, MAX_P) is None


def test_operator_without_state_gets_an_empty_share(tmp_path: Path) -> None:
    metadata = write_checkpoint(tmp_path, "stateless", {0: None, 1: None}, 2)
    share = restored_share(metadata, "stateless", 1, 2, MAX_P)
    assert share == RestoredState(checkpoint_id=1)

"""Keyed state snapshots, on both backends: a frozen view that later writes do not reach, incremental
chains of files, restore by key group."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.state import snapshots
from sluice.state.backends import create_backend
from sluice.state.chain_files import KeyedFile, file_uri, read_frames
from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from sluice.state.disk import DiskKeyedStateBackend
from sluice.state.keyed import FrozenTable, KeyedStateBackend
from sluice.state.keygroups import key_group_for, key_group_range
from sluice.state.snapshots import ChainShare, ChangeLog

from ._chains import Subtask, new_backend, restored

__all__ = ["new_backend"]  # the fixture, used by name


def frozen(backend: KeyedStateBackend) -> dict[str, dict[Any, Any]]:
    """What a snapshot taken now would hold, read while it is frozen."""
    snap = backend.begin_snapshot()
    view = {t.name: dict(t.entries.items()) for t in snap.tables}
    snap.release()
    return view


def test_writes_after_a_snapshot_began_do_not_reach_it_and_are_kept_after_release(new_backend: Any) -> None:
    backend = new_backend()
    count = backend.value_state(ValueStateDescriptor("count", default=0))
    items = backend.list_state(ListStateDescriptor[int]("items"))
    seen = backend.map_state(MapStateDescriptor("seen"))
    for key in ("a", "b", "c"):
        backend.current_key = key
        count.update(1)
        items.add(1)
        seen.put("x", 1)
    snap = backend.begin_snapshot()
    backend.current_key = "a"
    count.update(2)
    items.add(2)
    seen.put("y", 2)
    backend.current_key = "b"
    count.clear()
    items.clear()
    seen.remove("x")
    backend.current_key = "d"
    count.update(9)
    # Reads see the writes at once...
    backend.current_key = "a"
    assert (count.value(), items.get(), seen.items()) == (2, [1, 2], [("x", 1), ("y", 2)])
    backend.current_key = "b"
    assert (count.value(), items.get(), seen.is_empty()) == (0, [], True)
    # ...while the snapshot holds the state as it was when it began.
    entries = {t.name: dict(t.entries.items()) for t in snap.tables}
    assert entries["count"] == {"a": 1, "b": 1, "c": 1}
    assert entries["items"] == {"a": [1], "b": [1], "c": [1]}
    assert entries["seen"] == {"a": {"x": 1}, "b": {"x": 1}, "c": {"x": 1}}
    snap.release()
    assert frozen(backend) == {
        "count": {"a": 2, "c": 1, "d": 9},
        "items": {"a": [1, 2], "c": [1]},
        "seen": {"a": {"x": 1, "y": 2}, "c": {"x": 1}},
    }


def test_a_mutable_value_changed_in_place_during_a_snapshot_is_a_copy(new_backend: Any) -> None:
    backend = new_backend()
    state = backend.value_state(ValueStateDescriptor[list[int]]("v"))
    backend.current_key = "k"
    state.update([1])
    snap = backend.begin_snapshot()
    value = state.value()
    assert value is not None
    value.append(2)  # a user function changing what it read, then storing it
    state.update(value)
    assert dict(snap.tables[0].entries.items()) == {"k": [1]}
    snap.release()
    assert state.value() == [1, 2]


def test_a_snapshot_taken_while_another_is_written_sees_both_generations(new_backend: Any) -> None:
    backend = new_backend()
    items = backend.list_state(ListStateDescriptor[int]("items"))
    backend.current_key = "c"
    items.add(7)
    backend.current_key = "a"
    items.add(1)
    first = backend.begin_snapshot()
    items.add(2)
    second = backend.begin_snapshot()  # a savepoint while the checkpoint is still written
    items.add(3)
    assert dict(first.tables[0].entries.items()) == {"a": [1], "c": [7]}
    assert dict(second.tables[0].entries.items()) == {"a": [1, 2], "c": [7]}
    first.release()  # the checkpoint is written; the savepoint is still being written
    backend.current_key = "c"
    items.add(8)  # nothing is frozen now: this changes the stored list in place
    assert dict(second.tables[0].entries.items()) == {"a": [1, 2], "c": [7]}
    second.release()
    assert items.get() == [7, 8]
    backend.current_key = "a"
    assert items.get() == [1, 2, 3]


def test_each_snapshot_hands_out_the_keys_changed_since_the_previous_one(new_backend: Any) -> None:
    backend = new_backend()
    count = backend.value_state(ValueStateDescriptor("count", default=0))
    for key in range(5):
        backend.current_key = key
        count.update(1)
    first = backend.begin_snapshot()
    assert {*first.tables[0].changed, *first.tables[0].removed} == {0, 1, 2, 3, 4}
    first.release()
    backend.current_key = 3
    count.clear()
    backend.current_key = 7
    count.update(1)
    backend.current_key = 8
    count.update(2)
    count.clear()
    second = backend.begin_snapshot()
    assert {*second.tables[0].changed, *second.tables[0].removed} == {3, 7, 8}
    # Both backends hand out the changed values as well (the disk backend encoded), so a delta looks
    # nothing up in the frozen view.
    table = second.tables[0]
    assert isinstance(table.changed, dict)
    decode = table.decode or (lambda value: value)
    assert ({key: decode(value) for key, value in table.changed.items()}, table.removed) == ({7: 1}, {3, 8})
    second.release()


# -- files --------------------------------------------------------------------------------------------


def test_a_checkpoint_after_a_completed_one_writes_only_what_changed(
    tmp_path: Path, new_backend: Any
) -> None:
    task = Subtask(tmp_path, new_backend())
    task.put(range(10_000), 1)
    location, first = task.checkpoint(1)
    assert [f.full for f in first.chain] == [True]
    task.put([5, 6], 2)
    task.remove([7])
    location, second = task.checkpoint(2)
    assert [f.full for f in second.chain] == [True, False]
    assert second.chain[0] == first.chain[0]  # the full snapshot is shared, not written again
    assert second.written < first.written / 50
    delta = list(read_frames(file_uri(location, second.chain[1]), second.chain[1].sha256))
    assert [(name, upserts, removed) for name, _, upserts, removed in delta] == [("count", {5: 2, 6: 2}, [7])]
    expected = dict.fromkeys(range(10_000), 1) | {5: 2, 6: 2}
    del expected[7]
    assert restored(location, second.chain) == expected
    assert all(f.shared for f in second.chain)
    assert (tmp_path / "shared" / second.chain[1].name).exists()


def test_changes_of_a_checkpoint_that_did_not_complete_go_into_the_next_one(
    tmp_path: Path, new_backend: Any
) -> None:
    task = Subtask(tmp_path, new_backend())
    task.put(range(100), 1)
    task.checkpoint(1)
    task.put([1], 2)
    task.checkpoint(2, complete=False)  # failed: its delta is not part of any later chain
    task.put([2], 3)
    location, third = task.checkpoint(3)
    assert len(third.chain) == 2, "the delta extends checkpoint 1's chain, not the failed one's"
    assert restored(location, third.chain) == dict.fromkeys(range(100), 1) | {1: 2, 2: 3}


def test_keys_put_and_removed_over_checkpoints_that_did_not_complete_end_as_last_written(
    tmp_path: Path, new_backend: Any
) -> None:
    """The next delta merges the changes of every checkpoint since the completed one, oldest first."""
    task = Subtask(tmp_path, new_backend())
    task.put(range(10), 1)
    task.checkpoint(1)
    task.put([1, 4], 2)
    task.remove([2, 5])
    task.checkpoint(2, complete=False)
    task.remove([1, 4])
    task.put([2, 3], 5)
    task.checkpoint(3, complete=False)
    task.put([1], 7)
    location, fourth = task.checkpoint(4)
    assert len(fourth.chain) == 2, "one delta on checkpoint 1's full snapshot"
    expected = dict.fromkeys(range(10), 1) | {1: 7, 2: 5, 3: 5}
    del expected[4], expected[5]
    assert restored(location, fourth.chain) == expected


def test_a_checkpoint_extends_the_newest_completed_chain_even_before_the_notice_of_it_arrives(
    tmp_path: Path, new_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notice of a completion comes on the subtask's own connection, and may come after the next
    checkpoint's barrier. Once checkpoint 3 completed, the coordinator keeps its files and deletes the
    older ones (one retained checkpoint): checkpoint 4 must not be a delta on checkpoint 2's chain."""
    monkeypatch.setattr(snapshots, "MAX_CHAIN", 1)  # checkpoint 3 cuts the chain with a full snapshot
    task = Subtask(tmp_path, new_backend())
    task.put(range(10), 1)
    task.checkpoint(1)
    task.put(range(10, 400), 2)
    task.checkpoint(2)
    task.put([0], 3)
    _, third = task.checkpoint(3, complete=False, completed_before=2)  # completes; its notice is late
    assert [f.full for f in third.chain] == [True]
    task.put([1], 4)
    location, fourth = task.checkpoint(4, complete=False, completed_before=3)
    assert fourth.chain[:-1] == third.chain
    kept = {f.name for f in third.chain} | {fourth.chain[-1].name}
    for file in (tmp_path / "shared").iterdir():  # what the coordinator collects once 3 completed
        if file.name not in kept:
            file.unlink()
    assert restored(location, fourth.chain) == dict.fromkeys(range(400), 1) | dict.fromkeys(
        range(10, 400), 2
    ) | {0: 3, 1: 4}


def test_a_savepoint_is_full_and_private_and_leaves_the_chain_alone(tmp_path: Path, new_backend: Any) -> None:
    task = Subtask(tmp_path, new_backend())
    task.put(range(100), 1)
    task.checkpoint(1)
    task.put([1], 2)
    location, savepoint = task.checkpoint(2, savepoint=True)
    assert [(f.full, f.shared) for f in savepoint.chain] == [(True, False)]
    assert restored(location, savepoint.chain) == dict.fromkeys(range(100), 1) | {1: 2}
    # The next checkpoint still holds key 1's change: the savepoint completed no checkpoint.
    location, third = task.checkpoint(3)
    assert len(third.chain) == 2
    assert restored(location, third.chain)[1] == 2


def test_restore_of_a_chain_at_another_parallelism_keeps_only_the_subtasks_key_groups(
    tmp_path: Path, new_backend: Any
) -> None:
    task = Subtask(tmp_path, new_backend())
    task.put(range(1000), 1)
    task.checkpoint(1)
    task.put(range(0, 1000, 3), 2)
    task.remove(list(range(1, 1000, 7)))
    location, second = task.checkpoint(2)
    expected = frozen(task.backend)["count"]
    merged: dict[Any, Any] = {}
    for subtask in range(3):
        groups = key_group_range(subtask, 128, 3)
        mine = restored(location, second.chain, groups)
        assert all(key_group_for(k, 128) in groups for k in mine)
        merged.update(mine)
    assert merged == expected


def test_a_backend_restored_from_a_chain_at_another_parallelism_holds_its_key_groups(
    tmp_path: Path, new_backend: Any
) -> None:
    task = Subtask(tmp_path, new_backend())
    task.put(range(500), 1)
    task.checkpoint(1)
    task.put(range(0, 500, 2), 2)
    task.remove([3, 5])
    location, second = task.checkpoint(2)
    everything: dict[Any, Any] = {}
    for subtask in range(3):
        groups = key_group_range(subtask, 128, 3)
        again = new_backend()
        again.value_state(ValueStateDescriptor("count", default=0))
        for frame in ChainShare(location, second.chain, groups, 128).frames():
            again.restore_frame(*frame)
        mine = frozen(again)["count"]
        assert mine and all(key_group_for(k, 128) in groups for k in mine)
        everything.update(mine)
    assert everything == frozen(task.backend)["count"]
    assert everything[0] == 2 and everything[1] == 1 and 3 not in everything


@pytest.mark.parametrize("name", ["../x.kv", "a/b.kv", ".hidden", "", 7])
def test_a_keyed_file_entry_with_a_path_in_its_name_is_refused(name: Any) -> None:
    with pytest.raises(ValueError, match="keyed state file name"):
        KeyedFile.from_json({"name": name, "size": 1, "full": True, "shared": True})


def test_a_snapshot_released_while_its_thread_writes_is_released_by_that_thread(tmp_path: Path) -> None:
    """A cancelled task lets go of its snapshot while the writing thread still reads the frozen view."""
    reading, go_on = threading.Event(), threading.Event()
    released: list[str] = []

    class SlowEntries:
        def get(self, key: Any, default: Any = None) -> Any:
            return default

        def items(self) -> Iterator[tuple[Any, Any]]:
            reading.set()
            go_on.wait(10)
            yield 1, 1

    class Snapshot:
        tables = [FrozenTable("count", "value", SlowEntries(), {1})]

        def open_view(self) -> None:
            pass

        def release(self) -> None:
            released.append(threading.current_thread().name)

    write = ChangeLog().plan(Snapshot(), 1, savepoint=True)
    writer = threading.Thread(target=write.write, args=(tmp_path.as_uri(), "count-0"), name="writer")
    writer.start()
    assert reading.wait(10)
    write.release()
    assert released == [], "not while the frozen view is read"
    go_on.set()
    writer.join(10)
    assert released == ["writer"]
    write.release()
    assert released == ["writer"], "once"


def test_the_disk_backend_removes_stores_of_taskmanagers_that_are_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path))
    dead_pid = subprocess.Popen(["true"])  # a process that has exited
    dead_pid.wait()
    orphan = tmp_path / f"sluice-state-{dead_pid.pid}-count-0-abc"
    orphan.mkdir()
    (orphan / "data.mdb").write_bytes(b"x")
    live = tmp_path / f"sluice-state-{os.getpid()}-count-1-def"
    live.mkdir()
    backend = create_backend("disk", 128, "count-2")
    backend.value_state(ValueStateDescriptor("count", default=0))  # opens the store
    assert not orphan.exists()
    assert live.exists()
    backend.close()


# -- the disk backend's view ------------------------------------------------------------------------


def _disk_counts(keys: range) -> tuple[DiskKeyedStateBackend, Any]:
    backend = DiskKeyedStateBackend(128, "test")
    count = backend.value_state(ValueStateDescriptor("count", default=0))
    for key in keys:
        backend.current_key = key
        count.update(key)
    return backend, count


def test_a_disk_delta_is_planned_without_a_commit_or_a_read_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path / "local-state"))
    backend, count = _disk_counts(range(100))
    log = ChangeLog()
    first = log.plan(backend.begin_snapshot(view=False), 1, False)  # no chain yet: full, reads the store
    first.written(first.write((tmp_path / "chk-1").as_uri(), "count-0"))
    first.release()
    log.confirm(1)
    backend.current_key = 5
    count.update(50)
    store = backend._store
    assert store is not None
    position = store.position()
    second = log.plan(backend.begin_snapshot(view=False), 2, False)
    assert second.incremental
    assert (store.position(), store.readers) == (position, 0), "no commit, no read transaction"
    count.update(51)  # the task goes on writing while the delta is written
    result = second.write((tmp_path / "chk-2").as_uri(), "count-0")
    second.release()
    assert restored((tmp_path / "chk-2").as_uri(), result.chain)[5] == 50
    backend.close()


def test_a_disk_snapshots_view_cannot_be_opened_after_the_backend_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path / "local-state"))
    backend, count = _disk_counts(range(10))
    snapshot = backend.begin_snapshot(view=False)
    with pytest.raises(RuntimeError, match="before the backend is written again"):
        count.update(1)
        snapshot.open_view()
    with pytest.raises(RuntimeError, match="only after its open_view"):
        dict(snapshot.tables[0].entries.items())
    snapshot.release()
    backend.close()

"""Window state snapshots: copy-on-write while a snapshot is written, only changed windows in an
incremental checkpoint, fired windows removed by the delta that follows, restore from chains; with the
windows on either state backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice.checkpoint.snapshot import RestoredState
from sluice.engine.events import MAX_WATERMARK
from sluice.engine.operators.window import WindowOperator
from sluice.functions import AggregateFunction
from sluice.state import snapshots
from sluice.state.chain_files import KeyedFile, read_frames
from sluice.state.keyed import BACKENDS
from sluice.state.keygroups import key_group_for, key_group_range
from sluice.state.snapshots import ChainShare, DeferredKeyed, KeyedWrite
from sluice.state.windows import window_end
from sluice.windows import TumblingEventTimeWindows
from sluice_contract.checkpoints import shared_location

from ._support import start

Record = tuple[str, int]
TUMBLING = TumblingEventTimeWindows.of_millis(1000)


def summing() -> WindowOperator:
    return WindowOperator("win", TUMBLING, lambda r: r[0], reduce=lambda a, b: (a[0], a[1] + b[1]))


class Collecting(AggregateFunction):
    """A mutable accumulator, changed in place."""

    def create_accumulator(self) -> list[int]:
        return []

    def add(self, value: Record, accumulator: list[int]) -> list[int]:
        accumulator.append(value[1])
        return accumulator

    def get_result(self, accumulator: list[int]) -> list[int]:
        return accumulator


class Checkpoints:
    """Drives an operator's checkpoints as a task does: plan, write, release, then complete (or not)."""

    def __init__(self, root: Path, op: WindowOperator) -> None:
        self.root, self.op = root, op
        self.chains: dict[int, list[KeyedFile]] = {}
        self.written: dict[int, KeyedWrite] = {}

    def location(self, cid: int) -> str:
        return (self.root / "job" / f"chk-{cid}").as_uri()

    def take(self, cid: int, complete: bool = True, completed_before: int = 0) -> KeyedWrite | None:
        """Checkpoint `cid`, triggered when `completed_before` was the newest completed one; `complete`:
        it completes and the operator hears of it at once."""
        snap = self.op.snapshot_state(cid)
        if snap is None:
            return None
        assert isinstance(snap.deferred, DeferredKeyed) and not snap.keyed, "windows go to keyed files only"
        write = snap.deferred.plan(cid, False, completed_before)
        result = write.write(self.location(cid), "win-0")
        write.written(result)
        write.release()
        self.chains[cid], self.written[cid] = result.chain, result
        if complete:
            self.op.notify_checkpoint_complete(cid)
        return result

    def restored(self, cid: int, groups: range | None = None) -> RestoredState:
        share = RestoredState(checkpoint_id=cid)
        share.keyed_chains.append(ChainShare(self.location(cid), self.chains[cid], groups, 128))
        return share

    def tables_in(self, cid: int) -> set[str]:
        newest = self.chains[cid][-1]
        uri = f"{shared_location(self.location(cid))}/{newest.name}"
        return {name for name, _, upserts, removed in read_frames(uri, newest.sha256) if upserts or removed}


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The state backend the operators under test keep their windows in."""
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path / "local-state"))
    kind: str = request.param
    return kind


def results_after_restore(
    share: RestoredState, backend: str, subtask: int = 0, parallelism: int = 1
) -> list[Any]:
    op = summing()
    out, _ = start(op, restored=share, subtask=subtask, parallelism=parallelism, state_backend=backend)
    op.process_watermark(MAX_WATERMARK)
    return sorted(out.timestamped)


def test_records_after_a_snapshot_began_do_not_reach_it(backend: str) -> None:
    op = summing()
    out, _ = start(op, state_backend=backend)
    op.process_batch([("a", 1), ("b", 2)], [10, 20])
    snap = op.snapshot_state(1)
    assert snap is not None and snap.deferred is not None
    snap.deferred.snapshot.open_view()  # as planning a full snapshot does, before the next record
    op.process_batch([("a", 100), ("c", 5)], [30, 40])  # same window, while the snapshot is "written"
    (table,) = snap.deferred.snapshot.tables
    assert dict(table.entries.items()) == {"a": ("a", 1), "b": ("b", 2)}
    snap.deferred.snapshot.release()
    op.process_batch([("a", 1000)], [50])
    op.process_watermark(MAX_WATERMARK)
    assert sorted(out.records) == [("a", 1101), ("b", 2), ("c", 5)]


def test_an_accumulator_changed_in_place_after_a_snapshot_began_is_a_copy(backend: str) -> None:
    op = WindowOperator("win", TUMBLING, lambda r: r[0], aggregate=Collecting())
    out, _ = start(op, state_backend=backend)
    op.process_batch([("a", 1)], [10])
    snap = op.snapshot_state(1)
    assert snap is not None and snap.deferred is not None
    snap.deferred.snapshot.open_view()
    op.process_batch([("a", 2)], [20])
    op.process_watermark(MAX_WATERMARK)  # fires the window while the snapshot still holds it
    (table,) = snap.deferred.snapshot.tables
    assert dict(table.entries.items()) == {"a": [1]}
    assert out.timestamped == [([1, 2], 999)]


def test_an_incremental_checkpoint_writes_only_the_windows_that_changed(tmp_path: Path, backend: str) -> None:
    op = summing()
    start(op, state_backend=backend)
    cps = Checkpoints(tmp_path, op)
    op.process_batch([(f"k{i}", 1) for i in range(300)], [10] * 300)
    op.process_batch([(f"k{i}", 1) for i in range(300)], [1010] * 300)
    first = cps.take(1)
    assert first is not None and cps.tables_in(1) == {"window:1000", "window:2000"}
    op.process_batch([("k1", 5)], [1500])  # only the window ending at 2000 changes
    second = cps.take(2)
    assert second is not None
    assert len(cps.chains[2]) == 2 and not cps.chains[2][1].full
    assert cps.tables_in(2) == {"window:2000"}
    assert second.written < first.written * 0.6  # one window of two, the header besides
    assert results_after_restore(cps.restored(2), backend) == sorted(
        [((f"k{i}", 1), 999) for i in range(300)]
        + [((f"k{i}", 6 if i == 1 else 1), 1999) for i in range(300)]
    )


def test_a_window_fired_after_a_checkpoint_is_removed_by_the_next_one(tmp_path: Path, backend: str) -> None:
    op = summing()
    out, _ = start(op, state_backend=backend)
    cps = Checkpoints(tmp_path, op)
    op.process_batch([("a", 1), ("b", 2)], [10, 1500])
    cps.take(1)
    op.process_watermark(999)  # fires the window ending at 1000
    assert out.timestamped == [(("a", 1), 999)]
    cps.take(2)
    # Restoring the delta must not fire the window ending at 1000 again: its output is already out.
    assert results_after_restore(cps.restored(2), backend) == [(("b", 2), 1999)]


def test_a_fired_window_is_removed_even_if_the_checkpoint_that_recorded_it_did_not_complete(
    tmp_path: Path, backend: str
) -> None:
    op = summing()
    out, _ = start(op, state_backend=backend)
    cps = Checkpoints(tmp_path, op)
    op.process_batch([("a", 1)], [10])
    cps.take(1)
    op.process_watermark(999)
    assert out.timestamped == [(("a", 1), 999)]
    cps.take(2, complete=False)  # wrote the removal, but never completed
    op.process_batch([("b", 7)], [1200])
    cps.take(3)  # the window is no table of this snapshot: only checkpoint 2's changes name it
    assert [f.full for f in cps.chains[3]] == [True, False], "a delta on checkpoint 1's full snapshot"
    assert results_after_restore(cps.restored(3), backend) == [(("b", 7), 1999)]


def test_restore_of_a_chain_at_another_parallelism_keeps_each_subtasks_keys(
    tmp_path: Path, backend: str
) -> None:
    op = summing()
    start(op, state_backend=backend)
    cps = Checkpoints(tmp_path, op)
    keys = [f"k{i}" for i in range(60)]
    op.process_batch([(k, 1) for k in keys], [100] * len(keys))
    cps.take(1)
    op.process_batch([(k, 2) for k in keys[:20]], [1100] * 20)
    op.process_watermark(999)
    cps.take(2)
    combined: list[Any] = []
    for subtask in range(3):
        groups = key_group_range(subtask, 128, 3)
        results = results_after_restore(cps.restored(2, groups), backend, subtask, 3)
        assert all(key_group_for(r[0][0], 128) in groups for r in results)
        combined.extend(results)
    assert sorted(combined) == sorted(((k, 2), 1999) for k in keys[:20])


@pytest.mark.parametrize("name", ["user", "window:", "window:later", "timers"])
def test_a_table_that_is_not_a_window_is_refused_on_restore(name: str) -> None:
    with pytest.raises(ValueError, match="window"):
        window_end(name)


def test_a_snapshot_triggered_after_a_completion_it_has_not_heard_of_yet_extends_that_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """The notice of a completion reaches a subtask on its own connection, and may come after the next
    checkpoint's barrier. Once checkpoint 3 completed, the coordinator keeps its files and deletes the
    others (one retained checkpoint): checkpoint 4 must not be a delta on the chain of checkpoint 2."""
    monkeypatch.setattr(snapshots, "MAX_CHAIN", 1)  # checkpoint 3 cuts the chain with a full snapshot
    op = summing()
    start(op, state_backend=backend)
    cps = Checkpoints(tmp_path, op)
    op.process_batch([("a", 1)], [10])
    cps.take(1)
    op.process_batch([(f"k{i}", 1) for i in range(200)], [1500] * 200)
    cps.take(2)
    op.process_batch([("a", 1)], [20])
    cps.take(3, complete=False, completed_before=2)  # completes; its notice is on the way
    assert [f.full for f in cps.chains[3]] == [True]
    op.process_batch([("b", 1)], [30])
    cps.take(4, complete=False, completed_before=3)
    assert cps.chains[4][:-1] == cps.chains[3]
    shared = Path(tmp_path / "job" / "shared")
    for file in shared.iterdir():  # what the coordinator collects once checkpoint 3 completed
        if file.name not in {f.name for f in cps.chains[3]} and "-4-" not in file.name:
            file.unlink()
    assert results_after_restore(cps.restored(4), backend) == sorted(
        [(("a", 2), 999), (("b", 1), 999)] + [((f"k{i}", 1), 1999) for i in range(200)]
    )


def test_after_a_checkpoint_without_windows_the_next_one_is_full(tmp_path: Path, backend: str) -> None:
    """A checkpoint with nothing open writes no files: its chain ends, and the coordinator may delete
    the files of earlier checkpoints once it completes."""
    op = summing()
    start(op, state_backend=backend)
    cps = Checkpoints(tmp_path, op)
    op.process_batch([("a", 1)], [10])
    cps.take(1)
    op.process_watermark(999)
    cps.take(2)  # the removal of the fired window
    assert cps.take(3) is None
    op.process_batch([("b", 1)], [1500])
    cps.take(4, completed_before=3)
    assert [f.full for f in cps.chains[4]] == [True]

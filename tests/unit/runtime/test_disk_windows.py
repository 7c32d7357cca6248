"""Window contents on the disk state backend: they leave the Python heap, deltas keep the values as of
their snapshot while the task goes on changing them, and the store goes when the operator closes."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sluice.checkpoint.snapshot import RestoredState
from sluice.engine.events import MAX_WATERMARK
from sluice.engine.operators.base import StreamOperator
from sluice.engine.operators.keyed_window import KeyedWindowOperator
from sluice.engine.operators.window import WindowOperator
from sluice.functions import AggregateFunction, ProcessWindowFunction
from sluice.state import disk
from sluice.state.disk_tables import DiskTables
from sluice.state.keyed import BACKENDS
from sluice.state.snapshots import ChainShare, DeferredKeyed, SnapshotWrite
from sluice.windows import EventTimeSessionWindows, TimeWindow, TumblingEventTimeWindows

from ._support import start

Record = tuple[str, Any]


class Collecting(AggregateFunction):
    """Keeps every element, appended in place."""

    def create_accumulator(self) -> list[Any]:
        return []

    def add(self, value: Record, accumulator: list[Any]) -> list[Any]:
        accumulator.append(value[1])
        return accumulator

    def get_result(self, accumulator: list[Any]) -> list[Any]:
        return accumulator

    def merge(self, first: list[Any], second: list[Any]) -> list[Any]:
        return [*first, *second]


class Elements(ProcessWindowFunction):
    def process(self, key: Any, window: TimeWindow, elements: list[Any]) -> list[Any]:
        return [(key, sorted(v for _, v in elements))]


def tumbling() -> StreamOperator:
    """The per-end layout: an accumulator per (window end, key)."""
    return WindowOperator(
        "win", TumblingEventTimeWindows.of_millis(1000), lambda r: r[0], aggregate=Collecting()
    )


def sessions() -> StreamOperator:
    """The per-key layout: each key's session windows and their elements."""
    return KeyedWindowOperator(
        "sessions", EventTimeSessionWindows.with_gap_millis(10_000), lambda r: r[0], process=Elements()
    )


LAYOUTS: dict[str, Callable[[], StreamOperator]] = {"per-end": tumbling, "per-key": sessions}


def process(op: StreamOperator, values: list[Record], timestamps: list[int]) -> None:
    op.process_batch(values, timestamps)


def checkpoint(
    op: StreamOperator, root: Path, cid: int, until_written: Callable[[], None] = lambda: None
) -> ChainShare:
    """Checkpoint `cid` as a task takes it; `until_written` runs between the snapshot and its write (the
    task goes on processing while another thread writes). It completes; its chain is returned."""
    snap = op.snapshot_state(cid)
    assert snap is not None and isinstance(snap.deferred, DeferredKeyed)
    write: SnapshotWrite = snap.deferred.plan(cid, False)
    until_written()
    result = write.write((root / "job" / f"chk-{cid}").as_uri(), "win-0")
    write.written(result)
    write.release()
    op.notify_checkpoint_complete(cid)
    return ChainShare((root / "job" / f"chk-{cid}").as_uri(), result.chain, None, 128)


def fired(op: StreamOperator, backend: str, chain: ChainShare) -> list[Any]:
    """What a fresh operator restored from `chain` emits once every window fires."""
    share = RestoredState(checkpoint_id=1)
    share.keyed_chains.append(chain)
    out, _ = start(op, restored=share, state_backend=backend)
    op.process_watermark(MAX_WATERMARK)
    return sorted(out.records)


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "local-state"
    monkeypatch.setenv("SLUICE_STATE_DIR", str(directory))
    return directory


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_window_contents_live_on_the_heap_only_with_the_heap_backend(
    layout: str, backend: str, state_dir: Path, tmp_path: Path
) -> None:
    op = LAYOUTS[layout]()
    start(op, state_backend=backend)
    keys, per_key, size = 400, 10, 1000

    def feed(rounds: range) -> None:
        for round_ in rounds:
            # Made here and dropped after the batch: only what the windows keep stays allocated.
            batch = [(f"k{k}", f"{k}-{round_}-".ljust(size, "x")) for k in range(keys)]
            process(op, batch, [round_ * 10] * keys)
            del batch

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        feed(range(per_key // 2))  # as a job without checkpoints does
        gc.collect()
        unchecked = tracemalloc.get_traced_memory()[0] - before
        checkpoint(op, tmp_path, 1)
        feed(range(per_key // 2, per_key))
        checkpoint(op, tmp_path, 2)  # what changed since checkpoint 1 is let go once 2 is written
        gc.collect()
        checked = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    contents = keys * per_key * size
    if backend == "heap":
        assert unchecked > contents / 2 and checked > contents, "the heap layout holds every element"
    else:
        for grown in (unchecked, checked):
            assert grown < contents / 10, f"{grown} bytes of {contents} of window contents stayed on the heap"
    results = fired(LAYOUTS[layout](), backend, checkpoint(op, tmp_path, 3))
    assert len(results) == keys
    assert all(len(elements) == per_key for elements in (r[1] if layout == "per-key" else r for r in results))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_delta_holds_the_contents_as_of_its_snapshot_while_the_task_changes_them(
    layout: str, backend: str, state_dir: Path, tmp_path: Path
) -> None:
    op = LAYOUTS[layout]()
    start(op, state_backend=backend)
    process(op, [("a", 1), ("b", 1)], [10, 20])
    first = checkpoint(op, tmp_path, 1)
    assert first.chain[-1].full
    process(op, [("a", 2)], [30])

    def meanwhile() -> None:
        # The same accumulators, changed in place, and a new key, while checkpoint 2 is written.
        process(op, [("a", 3), ("b", 3), ("c", 3)], [40, 50, 60])

    second = checkpoint(op, tmp_path, 2, meanwhile)
    assert not second.chain[-1].full, "a delta: the values it holds are those handed out at the snapshot"
    got = fired(LAYOUTS[layout](), backend, second)
    if layout == "per-key":
        assert got == [("a", [1, 2]), ("b", [1])]
    else:
        assert got == [[1], [1, 2]]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_closing_the_operator_removes_its_store(layout: str, state_dir: Path) -> None:
    op = LAYOUTS[layout]()
    start(op, state_backend="disk")
    process(op, [("a", 1)], [10])
    assert [p.name for p in state_dir.iterdir() if "-windows-" in p.name], "the windows are in a store"
    op.close()
    assert list(state_dir.iterdir()) == []


def test_a_key_too_long_for_the_store_gets_a_clear_error(state_dir: Path) -> None:
    tables = DiskTables("too-long")
    try:
        with pytest.raises(
            ValueError, match=r"too long for window state on the disk backend.*--state-backend heap"
        ):
            tables.put("window:1000000000000", "k" * 480, 1)
    finally:
        tables.close()


def test_a_dropped_table_that_a_snapshot_held_is_written_as_removed(state_dir: Path) -> None:
    tables = DiskTables("drops")
    try:
        tables.put("window:1000", "a", 1)
        tables.put("window:2000", "b", 2)
        tables.begin_snapshot().release()
        tables.put("window:3000", "c", 3)
        assert tables.drop("window:1000") == {"a": 1}
        assert tables.drop("window:3000") == {"c": 3}  # no snapshot held it: nothing to remove
        snapshot = tables.begin_snapshot()
        by_name = {t.name: (dict(t.changed), set(t.removed)) for t in snapshot.tables}
        snapshot.release()
        assert by_name == {"window:1000": ({}, {"a"}), "window:2000": ({}, set())}
        assert tables.is_empty("window:1000") and not tables.is_empty("window:2000")
    finally:
        tables.close()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_store_committing_every_few_writes_loses_nothing(
    layout: str, state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store commits its write transaction every so many writes (and begins a new one): flushing a
    batch, firing a window and restoring a checkpoint each write past several commits here."""
    monkeypatch.setattr(disk, "_COMMIT_EVERY", 3)
    records = [(f"k{i % 40}", i) for i in range(400)]
    stamps = [i * 10 for i in range(400)]  # 4 tumbling windows; one session per key

    def run(backend: str, root: Path) -> list[Any]:
        op = LAYOUTS[layout]()
        out, _ = start(op, state_backend=backend)
        process(op, records[:300], stamps[:300])
        op.process_watermark(1999)  # fires windows, writing more than a commit's worth
        chain = checkpoint(op, root, 1)
        restored = LAYOUTS[layout]()
        share = RestoredState(checkpoint_id=1)
        share.keyed_chains.append(chain)
        after, _ = start(restored, restored=share, state_backend=backend)
        process(restored, records[300:], stamps[300:])
        restored.process_watermark(MAX_WATERMARK)
        return sorted(map(repr, [*out.records, *after.records]))

    assert run("disk", tmp_path / "disk") == run("heap", tmp_path / "heap")

"""Keyed rolling reduce and the keyed process function: state per key, timers, snapshot and restore."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.engine.events import MAX_WATERMARK
from sluice.engine.operators.keyed import KeyedProcessOperator, KeyedReduceOperator
from sluice.functions import KeyedContext, KeyedProcessFunction, RuntimeContext
from sluice.state.chain_files import KeyedFile
from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from sluice.state.keyed import BACKENDS
from sluice.state.keygroups import key_group_for, key_group_range
from sluice.state.snapshots import ChainShare

from ._support import start


def share_for(snapshot: OperatorSnapshot, subtask: int, parallelism: int) -> RestoredState:
    """The key groups of `snapshot` that a subtask owns at `parallelism` (what restore hands it).

    A keyed state backend's part is written to files as a savepoint would, and read back filtered.
    """
    mine = key_group_range(subtask, 128, parallelism)
    share = RestoredState(keyed={g: data for g, data in snapshot.keyed.items() if g in mine})
    if snapshot.deferred is not None:
        directory = tempfile.mkdtemp(prefix="sluice-keyed-")
        _directories.append(directory)
        location = Path(directory).as_uri()
        write = snapshot.deferred.plan(1, savepoint=True)
        _written[id(snapshot)] = (location, write.write(location, "op-0").chain)
        write.release()
        snapshot.deferred = None
    if id(snapshot) in _written:
        location, chain = _written[id(snapshot)]
        share.keyed_chains.append(ChainShare(location, chain, mine, 128))
    return share


_written: dict[int, tuple[str, list[KeyedFile]]] = {}
_directories: list[str] = []


@pytest.fixture(autouse=True, scope="module")
def _remove_written_state() -> Iterator[None]:
    """The files `share_for` wrote go with this module's tests: every run left two directories in $TMPDIR."""
    yield
    _written.clear()
    for directory in _directories:
        shutil.rmtree(directory, ignore_errors=True)
    _directories.clear()


# -- rolling reduce -----------------------------------------------------------------------------------


def rolling_sum() -> KeyedReduceOperator:
    return KeyedReduceOperator("sum", lambda r: r[0], lambda a, b: (a[0], a[1] + b[1]))


def test_rolling_reduce_emits_the_running_value_per_record() -> None:
    op = rolling_sum()
    out, _ = start(op)
    op.process_batch([("a", 1), ("b", 10), ("a", 2)], [5, 6, 7])
    op.process_batch([("a", 3), ("b", 20)], None)
    assert out.events == [
        ("records", [("a", 1), ("b", 10), ("a", 3)], [5, 6, 7]),
        ("records", [("a", 6), ("b", 30)], None),
    ]


def test_rolling_reduce_continues_after_restore_at_another_parallelism() -> None:
    keys = [f"k{i}" for i in range(40)]
    first = rolling_sum()
    start(first)
    first.process_batch([(k, i + 1) for i, k in enumerate(keys)], None)
    snapshot = first.snapshot_state(1)
    assert snapshot is not None
    totals: dict[str, int] = {}
    for subtask in range(3):
        op = rolling_sum()
        out, _ = start(op, restored=share_for(snapshot, subtask, 3), subtask=subtask, parallelism=3)
        assert len(op.values) < len(keys)  # only its own key groups
        op.process_batch([(k, 100) for k in op.values], None)
        totals.update(dict(out.records))
    assert totals == {k: i + 1 + 100 for i, k in enumerate(keys)}


def test_rolling_reduce_without_state_snapshots_nothing() -> None:
    op = rolling_sum()
    start(op)
    assert op.snapshot_state(1) is None


# -- keyed process function ---------------------------------------------------------------------------


class Tracker(KeyedProcessFunction):
    """Counts records per key (value state), remembers items (list and map state), sets timers."""

    def open(self, ctx: RuntimeContext) -> None:
        self.count = ctx.get_state(ValueStateDescriptor("count", 0))
        self.items = ctx.get_list_state(ListStateDescriptor("items"))
        self.first_seen = ctx.get_map_state(MapStateDescriptor("first-seen"))

    def process_element(self, value: Any, ctx: KeyedContext) -> Iterable[Any]:
        key, item, timer = value
        count: int = (self.count.value() or 0) + 1
        timestamp = ctx.timestamp or 0
        self.count.update(count)
        self.items.add(item)
        if not self.first_seen.contains(item):
            self.first_seen.put(item, ctx.timestamp)
        if timer == "event":
            ctx.timer_service.register_event_time_timer(timestamp + 100)
        elif timer == "processing":
            ctx.timer_service.register_processing_time_timer(1_000 + count)
        elif timer == "cancel":
            # Deletes the event timer a record of this key one millisecond earlier registered.
            ctx.timer_service.delete_event_time_timer(timestamp - 1 + 100)
        return [(key, count)]

    def on_timer(self, timestamp: int, ctx: KeyedContext) -> Iterable[Any]:
        return [
            (
                ctx.key,
                timestamp,
                ctx.time_domain,
                self.count.value(),
                self.items.get(),
                self.first_seen.items(),
            )
        ]


def tracker() -> KeyedProcessOperator:
    return KeyedProcessOperator("track", lambda r: r[0], Tracker())


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_list_and_map_state_are_per_key(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path))
    op = tracker()
    out, _ = start(op, state_backend=backend)
    op.process_batch([("a", "x", None), ("b", "y", None), ("a", "z", None), ("a", "x", None)], [1, 2, 3, 4])
    assert out.timestamped == [(("a", 1), 1), (("b", 1), 2), (("a", 2), 3), (("a", 3), 4)]
    op.process_batch([("a", "w", "event"), ("b", "v", "event")], [10, 20])
    out.clear()
    op.process_watermark(MAX_WATERMARK)
    assert out.timestamped == [
        (("a", 110, "event", 4, ["x", "z", "x", "w"], [("x", 1), ("z", 3), ("w", 10)]), 110),
        (("b", 120, "event", 2, ["y", "v"], [("y", 2), ("v", 20)]), 120),
    ]


def test_event_time_timers_fire_in_timestamp_order_on_watermark() -> None:
    op = tracker()
    out, _ = start(op)
    op.process_batch(
        [("c", "1", "event"), ("a", "2", "event"), ("b", "3", "event"), ("a", "4", "event")],
        [300, 50, 200, 100],
    )
    out.clear()
    op.process_watermark(149)  # a timer fires once the watermark reaches its timestamp, not before
    assert out.events == [("watermark", 149, None)]
    out.clear()
    op.process_watermark(150)
    assert [(r[0], r[1]) for r in out.records] == [("a", 150)]
    assert out.events[-1] == ("watermark", 150, None)
    out.clear()
    op.process_watermark(400)
    assert [(r[0], r[1]) for r in out.records] == [("a", 200), ("b", 300), ("c", 400)]
    assert [ts for _, ts in out.timestamped] == [200, 300, 400]
    out.clear()
    op.process_watermark(MAX_WATERMARK)
    assert out.records == []


def test_same_timer_registered_twice_fires_once_and_deleted_timer_never() -> None:
    op = tracker()
    out, _ = start(op)
    op.process_batch([("a", "1", "event"), ("a", "2", "event")], [10, 10])
    op.process_batch([("b", "3", "event"), ("b", "4", "cancel")], [20, 21])  # deletes b's 120
    out.clear()
    op.process_watermark(MAX_WATERMARK)
    assert [(r[0], r[1]) for r in out.records] == [("a", 110)]


def test_timer_registered_by_a_timer_fires_in_the_same_watermark_when_due() -> None:
    class Chain(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: KeyedContext) -> None:
            ctx.timer_service.register_event_time_timer(10)

        def on_timer(self, timestamp: int, ctx: KeyedContext) -> Iterable[Any]:
            if timestamp < 40:
                ctx.timer_service.register_event_time_timer(timestamp + 10)
            return [timestamp]

    op = KeyedProcessOperator("chain", lambda r: r, Chain())
    out, _ = start(op)
    op.process_batch(["k"], [0])
    op.process_watermark(35)
    assert out.records == [10, 20, 30]
    op.process_watermark(100)
    assert out.records == [10, 20, 30, 40]


def test_processing_time_timers_fire_when_due_and_stop_after_finishing() -> None:
    op = tracker()
    out, _ = start(op)
    op.process_batch([("a", "1", "processing"), ("b", "2", "processing"), ("a", "3", "processing")], None)
    # a registered 1001 and 1002; b registered 1001.
    assert op.next_processing_timer() == 1001
    out.clear()
    op.on_processing_time(1001)
    assert sorted((r[0], r[1], r[2]) for r in out.records) == [
        ("a", 1001, "processing"),
        ("b", 1001, "processing"),
    ]
    assert op.next_processing_timer() == 1002
    op.stop_processing_timers()
    assert op.next_processing_timer() is None
    op.process_batch([("c", "4", "processing")], None)
    assert op.next_processing_timer() is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_state_and_timers_survive_snapshot_and_restore_at_another_parallelism(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path))
    keys = [f"k{i}" for i in range(30)]
    first = tracker()
    start(first, state_backend=backend)
    first.process_batch([(k, f"{k}-item", "event") for k in keys], list(range(30)))
    snapshot = first.snapshot_state(1)
    assert snapshot is not None
    fired: dict[str, tuple[Any, ...]] = {}
    for subtask in range(2):
        op = tracker()
        out, _ = start(
            op,
            restored=share_for(snapshot, subtask, 2),
            subtask=subtask,
            parallelism=2,
            state_backend=backend,
        )
        mine = [k for k in keys if key_group_for(k, 128) in key_group_range(subtask, 128, 2)]
        assert 0 < len(mine) < len(keys)
        op.process_batch([(k, "again", None) for k in mine], [1000] * len(mine))
        assert [r[1] for r in out.records] == [2] * len(mine)  # the count went on from 1
        out.clear()
        op.process_watermark(MAX_WATERMARK)
        for record in out.records:
            fired[record[0]] = record
    assert set(fired) == set(keys)  # every timer fired exactly in one subtask
    for i, key in enumerate(keys):
        assert fired[key] == (
            key,
            i + 100,
            "event",
            2,
            [f"{key}-item", "again"],
            [(f"{key}-item", i), ("again", 1000)],
        )


def test_keyed_process_needs_a_keyed_process_function() -> None:
    with pytest.raises(
        TypeError, match=r"'p': process\(\) on a keyed stream needs a sluice\.KeyedProcessFunction"
    ):
        KeyedProcessOperator("p", lambda r: r, lambda r: r)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
def test_keyed_state_of_a_checkpoint_written_before_incremental_snapshots_is_restored(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Version 1 `_metadata`: the backend's entries by key group under "user", in the subtask's file."""
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path))
    keys = [f"k{i}" for i in range(20)]
    old: dict[int, dict[str, Any]] = {}
    for i, key in enumerate(keys):
        group = old.setdefault(key_group_for(key, 128), {"user": {"count": {}, "items": {}}})
        group["user"]["count"][key] = i + 1
        group["user"]["items"][key] = [f"{key}-old"]
    op = tracker()
    out, _ = start(op, restored=RestoredState(keyed=old), state_backend=backend)
    op.process_batch([(k, "new", None) for k in keys], [5] * len(keys))
    assert out.records == [(k, i + 2) for i, k in enumerate(keys)]
    out.clear()
    op.process_batch([(keys[0], "newer", "event")], [6])
    op.process_watermark(MAX_WATERMARK)
    assert out.records[-1][4] == ["k0-old", "new", "newer"]
    op.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subtask_restored_from_one_whole_chain_extends_it_and_one_that_took_a_part_starts_anew(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path / "local"))
    first = tracker()
    start(first, state_backend=backend)
    first.process_batch([(f"k{i}", "x", None) for i in range(50)], [0] * 50)
    snapshot = first.snapshot_state(1)
    assert snapshot is not None and snapshot.deferred is not None
    location = (tmp_path / "job" / "chk-1").as_uri()
    write = snapshot.deferred.plan(1, savepoint=False)
    chain = write.write(location, "track-0").chain
    write.release()
    first.close()
    for groups, parallelism, extended in ((None, 1, True), (key_group_range(0, 128, 2), 2, False)):
        op = tracker()
        share = RestoredState(keyed_chains=[ChainShare(location, chain, groups, 128)], checkpoint_id=1)
        start(op, restored=share, parallelism=parallelism, state_backend=backend)
        op.process_batch([("k1", "y", None)], [0])
        again = op.snapshot_state(2)
        assert again is not None and again.deferred is not None
        planned = again.deferred.plan(2, savepoint=False)
        assert planned.incremental is extended
        written = planned.write((tmp_path / "job" / "chk-2").as_uri(), "track-0")
        planned.release()
        assert (written.chain[:-1] == chain) is extended
        op.close()

"""The keyed event-time window operator, driven directly, against results computed in plain Python."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from sluice.checkpoint.restore import restored_share
from sluice.checkpoint.snapshot import RestoredState
from sluice.engine.events import MAX_WATERMARK
from sluice.engine.operators.window import WindowOperator
from sluice.functions import AggregateFunction
from sluice.state.keygroups import key_group_for, subtask_for_key_group
from sluice.windows import FixedWindowAssigner as WindowAssigner
from sluice.windows import SlidingEventTimeWindows, TumblingEventTimeWindows

from ._support import start, write_checkpoint

Record = tuple[str, int]  # (key, amount)


def add(a: Record, b: Record) -> Record:
    return (a[0], a[1] + b[1])


class Average(AggregateFunction):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: Record, accumulator: list[int]) -> list[int]:
        return [accumulator[0] + value[1], accumulator[1] + 1]

    def get_result(self, accumulator: list[int]) -> float:
        return accumulator[0] / accumulator[1]


def reference(
    assigner: WindowAssigner, records: list[tuple[Record, int]], aggregate: bool
) -> dict[tuple[Any, int], int]:
    """(result, timestamp end-1) -> how often, by enumerating every window start near each record."""
    size, slide, offset = assigner.size_ms, assigner.slide_ms, assigner.offset_ms
    windows: dict[tuple[int, str], list[int]] = defaultdict(list)
    for (key, amount), ts in records:
        k = (ts - offset) // slide
        while offset + k * slide + size > ts:
            if offset + k * slide <= ts:
                windows[(offset + k * slide + size, key)].append(amount)
            k -= 1
    results: dict[tuple[Any, int], int] = defaultdict(int)
    for (end, key), amounts in windows.items():
        value: Any = sum(amounts) / len(amounts) if aggregate else (key, sum(amounts))
        results[(value, end - 1)] += 1
    return dict(results)


def counted(pairs: list[tuple[Any, int | None]]) -> dict[tuple[Any, int | None], int]:
    out: dict[tuple[Any, int | None], int] = defaultdict(int)
    for pair in pairs:
        out[pair] += 1
    return dict(out)


def window_op(assigner: WindowAssigner, aggregate: bool = False) -> WindowOperator:
    if aggregate:
        return WindowOperator("win", assigner, lambda r: r[0], aggregate=Average())
    return WindowOperator("win", assigner, lambda r: r[0], reduce=add)


def make_records(count: int, seed: int, spread_ms: int = 10_000) -> list[tuple[Record, int]]:
    rng = random.Random(seed)
    return [((rng.choice("abcdefg"), rng.randint(1, 9)), rng.randint(0, spread_ms)) for _ in range(count)]


def feed(op: WindowOperator, records: list[tuple[Record, int]], batch: int = 37) -> None:
    for i in range(0, len(records), batch):
        chunk = records[i : i + batch]
        op.process_batch([r for r, _ in chunk], [ts for _, ts in chunk])


ASSIGNERS: dict[str, WindowAssigner] = {
    "tumbling": TumblingEventTimeWindows.of_millis(1000),
    "tumbling-offset": TumblingEventTimeWindows.of_millis(1000, offset_ms=300),
    "sliding": SlidingEventTimeWindows.of_millis(3000, 1000),
    "sliding-offset": SlidingEventTimeWindows.of_millis(2500, 1000, offset_ms=400),
}


def test_every_assigner_reduce_and_aggregate_match_the_reference() -> None:
    records = make_records(500, seed=1)
    for name, assigner in ASSIGNERS.items():
        for aggregate in (False, True):
            op = window_op(assigner, aggregate)
            out, ctx = start(op)
            feed(op, records)
            assert out.events == [], "nothing fires before a watermark"
            op.process_watermark(MAX_WATERMARK)
            assert counted(out.timestamped) == reference(assigner, records, aggregate), (name, aggregate)
            assert out.watermarks == [MAX_WATERMARK]
            assert ctx.metrics.late_records_dropped == 0


def test_watermark_fires_exactly_the_windows_it_passed() -> None:
    assigner = TumblingEventTimeWindows.of_millis(1000)
    op = window_op(assigner)
    out, _ = start(op)
    op.process_batch([("a", 1), ("a", 2), ("b", 5), ("a", 4)], [10, 999, 500, 1000])
    op.process_watermark(998)
    assert out.events == [("watermark", 998, None)]
    out.clear()
    op.process_watermark(999)  # window [0, 1000) fires when the watermark reaches its last millisecond
    assert sorted(out.timestamped) == [(("a", 3), 999), (("b", 5), 999)]
    assert out.events[-1] == ("watermark", 999, None)
    out.clear()
    op.process_watermark(999)  # not an advance: nothing, not even the watermark
    assert out.events == []
    op.process_watermark(5000)
    assert out.timestamped == [(("a", 4), 1999)]


def test_records_of_fired_windows_are_dropped_and_counted() -> None:
    op = window_op(TumblingEventTimeWindows.of_millis(1000))
    out, ctx = start(op)
    op.process_batch([("a", 1)], [1500])
    op.process_watermark(1999)
    out.clear()
    op.process_batch([("a", 10), ("a", 20), ("a", 30), ("a", 40)], [0, 1999, 2000, -5])
    assert ctx.metrics.late_records_dropped == 3
    op.process_watermark(MAX_WATERMARK)
    assert out.timestamped == [(("a", 30), 2999)]


def test_sliding_record_late_for_some_windows_only_is_kept_for_the_others() -> None:
    op = window_op(SlidingEventTimeWindows.of_millis(2000, 1000), aggregate=True)
    out, ctx = start(op)
    op.process_watermark(1999)  # windows ending at 2000 and before have fired
    op.process_batch([("a", 6)], [1500])  # in [0, 2000) (fired) and [1000, 3000) (open)
    assert ctx.metrics.late_records_dropped == 0
    op.process_batch([("a", 8)], [500])  # only in fired windows
    assert ctx.metrics.late_records_dropped == 1
    op.process_watermark(MAX_WATERMARK)
    assert out.timestamped == [(6.0, 2999)]


def test_negative_timestamps_in_tumbling_windows() -> None:
    assigner = TumblingEventTimeWindows.of_millis(1000)
    records = [(("a", 1), -1), (("a", 2), -1000), (("b", 3), -1001), (("a", 4), 0)]
    op = window_op(assigner)
    out, _ = start(op)
    feed(op, records)
    op.process_watermark(MAX_WATERMARK)
    assert counted(out.timestamped) == reference(assigner, records, aggregate=False)


def test_negative_timestamps_in_sliding_windows() -> None:
    assigner = SlidingEventTimeWindows.of_millis(1500, 500)
    records = make_records(200, seed=4, spread_ms=6000)
    records = [(r, ts - 3000) for r, ts in records]
    op = window_op(assigner)
    out, _ = start(op)
    feed(op, records)
    op.process_watermark(MAX_WATERMARK)
    assert counted(out.timestamped) == reference(assigner, records, aggregate=False)


@pytest.mark.parametrize("name", ["tumbling", "tumbling-offset"])
def test_batches_in_event_time_order_across_windows_gaps_and_late_ones_match_the_reference(
    name: str,
) -> None:
    # Batches whose timestamps never decrease are folded a window's slice at a time: every slice
    # boundary, an empty window skipped by a gap, and a slice of a window already fired must come out
    # as the record-by-record reference says.
    assigner = ASSIGNERS[name]
    size, offset = assigner.size_ms, assigner.offset_ms
    rng = random.Random(11)
    records: list[tuple[Record, int]] = []
    ts = -2500
    for _ in range(800):
        ts += rng.choice([0, 0, 1, 7, 40, 350, 999, 2600])
        records.append(((rng.choice("abcd"), rng.randint(1, 9)), ts))
    first, rest = records[:400], records[400:]
    watermark = rest[150][1]  # fires the windows of rest's first records before they arrive
    op = window_op(assigner)
    out, ctx = start(op)
    feed(op, first, batch=64)
    op.process_watermark(watermark)
    feed(op, rest, batch=64)
    op.process_watermark(MAX_WATERMARK)

    def window_end(t: int) -> int:
        return t - (t - offset) % size + size

    on_time = [r for r in rest if window_end(r[1]) > watermark + 1]
    assert 0 < len(on_time) < len(rest)
    assert counted(out.timestamped) == reference(assigner, first + on_time, aggregate=False)
    assert ctx.metrics.late_records_dropped == len(rest) - len(on_time)


def test_records_without_timestamps_are_refused() -> None:
    op = window_op(TumblingEventTimeWindows.of_millis(1000))
    start(op)
    with pytest.raises(RuntimeError, match=r"call assign_timestamps\(...\) before key_by"):
        op.process_batch([("a", 1)], None)


def run_through(op: WindowOperator, records: list[tuple[Record, int]]) -> None:
    feed(op, records)
    for watermark in (2999, 6999, MAX_WATERMARK):
        op.process_watermark(watermark)


def test_snapshot_and_restore_at_another_parallelism_gives_the_same_results(tmp_path: Path) -> None:
    for name, assigner in ASSIGNERS.items():
        for aggregate in (False, True):
            records = make_records(400, seed=7)
            # Only records that stay on time after the watermark emitted mid-way.
            first, rest = records[:200], [r for r in records[200:] if r[1] > 3000]
            whole = window_op(assigner, aggregate)
            whole_out, _ = start(whole)
            feed(whole, first)
            whole.process_watermark(2999)
            run_through(whole, rest)

            before = window_op(assigner, aggregate)
            before_out, _ = start(before)
            feed(before, first)
            before.process_watermark(2999)
            snapshot = before.snapshot_state(checkpoint_id=1)
            assert snapshot is not None
            directory = tmp_path / f"{name}-{aggregate}"
            metadata = write_checkpoint(directory, "win", {0: snapshot}, 1, keyed=True)

            combined = list(before_out.timestamped)
            for subtask in range(2):
                share = restored_share(metadata, "win", subtask, 2, 128)
                assert isinstance(share, RestoredState)
                after = window_op(assigner, aggregate)
                after_out, _ = start(after, restored=share, subtask=subtask, parallelism=2)
                mine = [
                    r for r in rest if subtask_for_key_group(key_group_for(r[0][0], 128), 128, 2) == subtask
                ]
                run_through(after, mine)
                combined.extend(after_out.timestamped)
            assert counted(combined) == counted(whole_out.timestamped), (name, aggregate)

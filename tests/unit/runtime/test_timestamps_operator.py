"""Timestamp assignment and bounded-out-of-orderness watermarks."""

from __future__ import annotations

import pytest

from sluice.engine.events import MAX_WATERMARK
from sluice.engine.operators.timestamps import TimestampsOperator

from ._support import start


def test_records_get_their_timestamps_and_the_watermark_trails_by_the_delay() -> None:
    op = TimestampsOperator("ts", lambda e: e["t"], max_out_of_orderness_ms=50)
    out, _ = start(op)
    op.process_batch([{"t": 100}, {"t": 300}, {"t": 200}], None)
    assert out.events == [
        ("records", [{"t": 100}, {"t": 300}, {"t": 200}], [100, 300, 200]),
        ("watermark", 300 - 50 - 1, None),
    ]


def test_watermark_only_advances() -> None:
    op = TimestampsOperator("ts", lambda e: e, max_out_of_orderness_ms=0)
    out, _ = start(op)
    op.process_batch([10], None)
    op.process_batch([5, 7], None)  # out of order: no watermark
    op.process_batch([10], None)  # same maximum: no new watermark
    op.process_batch([11], None)
    assert out.watermarks == [9, 10]


def test_zero_delay_watermark_is_max_timestamp_minus_one() -> None:
    # A record at the watermark's timestamp would be late; the max timestamp itself must stay on time.
    op = TimestampsOperator("ts", lambda e: e, max_out_of_orderness_ms=0)
    out, _ = start(op)
    op.process_batch([1000], None)
    assert out.watermarks == [999]


def test_negative_timestamps() -> None:
    op = TimestampsOperator("ts", lambda e: e, max_out_of_orderness_ms=10)
    out, _ = start(op)
    op.process_batch([-500], None)
    op.process_batch([-100], None)
    assert out.watermarks == [-511, -111]


def test_upstream_watermarks_are_replaced_but_max_watermark_passes_once() -> None:
    op = TimestampsOperator("ts", lambda e: e, max_out_of_orderness_ms=0)
    out, _ = start(op)
    op.process_watermark(5_000)
    assert out.events == []
    op.process_watermark(MAX_WATERMARK)
    op.process_watermark(MAX_WATERMARK)
    assert out.watermarks == [MAX_WATERMARK]


def test_empty_batch_emits_nothing() -> None:
    op = TimestampsOperator("ts", lambda e: e, max_out_of_orderness_ms=0)
    out, _ = start(op)
    op.process_batch([], None)
    assert out.events == []


def test_negative_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="'ts': max_out_of_orderness_ms must be >= 0"):
        TimestampsOperator("ts", lambda e: e, max_out_of_orderness_ms=-1)


def test_input_without_records_for_the_idleness_timeout_is_marked_idle_then_active_again() -> None:
    op = TimestampsOperator("ts", lambda e: e, max_out_of_orderness_ms=0, idleness_ms=500)
    out, _ = start(op)
    op.process_batch([1000], None)
    deadline = op.next_processing_timer()
    assert deadline is not None
    op.on_processing_time(deadline - 1)
    assert ("idle", True, None) not in out.events, "not idle before the timeout"
    op.on_processing_time(deadline)
    assert out.events[-1] == ("idle", True, None)
    assert op.next_processing_timer() is None, "an idle input has nothing to time out"
    op.process_batch([2000], None)
    assert out.events[-3:] == [("idle", False, None), ("records", [2000], [2000]), ("watermark", 1999, None)]


def test_no_idleness_without_a_timeout_and_none_after_finishing() -> None:
    assert TimestampsOperator("ts", lambda e: e, 0).next_processing_timer() is None
    op = TimestampsOperator("ts", lambda e: e, 0, idleness_ms=100)
    start(op)
    op.stop_processing_timers()
    assert op.next_processing_timer() is None
    with pytest.raises(ValueError, match="idleness_ms"):
        TimestampsOperator("ts", lambda e: e, 0, idleness_ms=0)

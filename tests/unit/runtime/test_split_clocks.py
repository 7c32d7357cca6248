"""Per-split event time of a source subtask (engine/operators/_split_clocks.py)."""

from sluice.engine.events import MIN_WATERMARK
from sluice.engine.operators._split_clocks import SplitClocks


def _two_splits(idleness_ms: int | None = 300) -> SplitClocks:
    clocks = SplitClocks(max_out_of_orderness_ms=0, idleness_ms=idleness_ms)
    clocks.open(0, now_ms=0)
    clocks.open(1, now_ms=0)
    return clocks


def test_a_split_without_records_holds_the_watermark_back() -> None:
    clocks = _two_splits()
    clocks.on_records(0, highest=5_000, now_ms=10)
    assert clocks.advance() == (None, None)
    assert clocks.emitted == MIN_WATERMARK


def test_the_watermark_is_the_minimum_over_active_splits_and_never_moves_back() -> None:
    clocks = _two_splits()
    clocks.on_records(0, highest=5_000, now_ms=10)
    clocks.on_records(1, highest=3_000, now_ms=10)
    assert clocks.advance() == (2_999, None)
    clocks.on_records(1, highest=2_000, now_ms=20)  # late records of split 1 do not move it back
    assert clocks.advance() == (None, None)


def test_a_split_that_goes_idle_stops_holding_back_the_busy_one() -> None:
    clocks = _two_splits()
    clocks.on_records(0, highest=5_000, now_ms=100)
    assert clocks.next_idle_check() == 300  # split 1, open since 0
    assert clocks.expire(now_ms=300) == (4_999, None)


def test_a_late_timer_still_emits_the_watermark_due_before_every_split_went_idle() -> None:
    # The timer fires at 2 s, past the timeouts of both splits (300 ms and 400 ms). Split 1 went idle
    # first, while split 0 was active: its watermark was due then and must not be lost because split 0
    # is idle too by the time anyone looks.
    clocks = _two_splits()
    clocks.on_records(0, highest=5_000, now_ms=100)
    assert clocks.expire(now_ms=2_000) == (4_999, True)


def test_a_record_makes_an_idle_subtask_active_again() -> None:
    clocks = _two_splits()
    assert clocks.expire(now_ms=300) == (None, True)
    clocks.on_records(1, highest=7_000, now_ms=400)
    assert clocks.advance() == (6_999, False)


def test_without_idleness_no_split_ever_turns_idle() -> None:
    clocks = _two_splits(idleness_ms=None)
    assert clocks.next_idle_check() is None
    clocks.on_records(0, highest=5_000, now_ms=100)
    assert clocks.expire(now_ms=10**9) == (None, None)


def test_a_closed_split_no_longer_holds_event_time_back() -> None:
    clocks = _two_splits(idleness_ms=None)
    clocks.on_records(0, highest=5_000, now_ms=100)
    clocks.close(1)
    assert clocks.advance() == (4_999, None)

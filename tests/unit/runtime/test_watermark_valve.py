"""A subtask's watermark: the minimum over active input channels; idle and closed ones do not hold it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sluice.engine._watermarks import WatermarkValve
from sluice.engine.events import MAX_WATERMARK, MIN_WATERMARK


def test_minimum_over_channels() -> None:
    valve = WatermarkValve(3)
    assert valve.on_watermark(0, 100) is None
    assert valve.on_watermark(1, 50) is None
    assert valve.on_watermark(2, 70) == 50
    assert valve.on_watermark(1, 200) == 70
    assert valve.on_watermark(2, 300) == 100
    assert valve.current == 100


def test_a_channel_watermark_never_goes_back() -> None:
    valve = WatermarkValve(2)
    valve.on_watermark(0, 100)
    assert valve.on_watermark(1, 100) == 100
    assert valve.on_watermark(0, 10) is None  # an older watermark on channel 0 is ignored
    assert valve.on_watermark(1, 150) is None  # channel 0 is still at 100, not 10
    assert valve.current == 100


def test_idle_channel_does_not_hold_back() -> None:
    valve = WatermarkValve(2)
    valve.on_watermark(0, 500)
    assert valve.on_status(1, idle=True) == 500
    assert valve.on_watermark(0, 600) == 600
    # Back from idle behind the others: it holds back further progress but time does not go back.
    assert valve.on_watermark(1, 200) is None
    assert valve.current == 600
    assert valve.on_watermark(0, 700) is None
    assert valve.on_watermark(1, 650) == 650
    assert valve.on_watermark(1, 800) == 700


def test_all_idle_reports_idle_and_keeps_the_watermark() -> None:
    valve = WatermarkValve(2)
    valve.on_watermark(0, 10)
    valve.on_watermark(1, 20)
    assert valve.on_status(0, idle=True) == 20
    assert not _all_idle(valve)
    assert valve.on_status(1, idle=True) is None
    assert _all_idle(valve)
    assert valve.current == 20


def test_closed_channel_does_not_hold_back() -> None:
    valve = WatermarkValve(3)
    valve.on_watermark(0, 1000)
    valve.on_watermark(1, 2000)
    assert valve.on_closed(2) == 1000
    assert valve.on_closed(0) == 2000
    assert not valve.all_idle
    assert valve.on_closed(1) is None  # nothing left to take a minimum over
    assert valve.current == 2000
    assert not valve.all_idle  # closed is not idle


def test_max_watermark_passes_when_every_channel_reaches_it() -> None:
    valve = WatermarkValve(2)
    assert valve.on_watermark(0, MAX_WATERMARK) is None
    assert valve.on_watermark(1, MAX_WATERMARK) == MAX_WATERMARK


_step = st.one_of(
    st.tuples(st.just("watermark"), st.integers(0, 3), st.integers(-1000, 1000)),
    st.tuples(st.just("idle"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("close"), st.integers(0, 3), st.none()),
)


@given(st.lists(_step, max_size=60))
def test_combined_watermark_is_monotonic_and_the_min_of_active_channels(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    valve = WatermarkValve(4)
    channel_max = [MIN_WATERMARK] * 4
    idle = [False] * 4
    closed = [False] * 4
    previous = MIN_WATERMARK
    for kind, channel, arg in steps:
        if kind == "watermark":
            advanced = valve.on_watermark(channel, arg)
            channel_max[channel] = max(channel_max[channel], arg)
            idle[channel] = False
        elif kind == "idle":
            advanced = valve.on_status(channel, arg)
            idle[channel] = arg
        else:
            advanced = valve.on_closed(channel)
            closed[channel] = True
        active = [w for w, i, c in zip(channel_max, idle, closed, strict=True) if not (i or c)]
        expected = max(previous, min(active)) if active else previous
        assert valve.current == expected
        assert advanced == (expected if expected > previous else None)
        previous = expected


def test_idleness_of_the_whole_subtask_is_reported_once_per_change() -> None:
    valve = WatermarkValve(2)
    valve.on_watermark(0, 10)
    valve.on_status(0, True)
    assert valve.idleness_changed() is None, "one input still active"
    valve.on_status(1, True)
    assert valve.idleness_changed() is True
    assert valve.idleness_changed() is None, "reported once"
    valve.on_watermark(1, 20)
    assert valve.idleness_changed() is False


def _all_idle(valve: WatermarkValve) -> bool:
    # Read through a function: mypy would otherwise keep the property narrowed between the asserts.
    return valve.all_idle

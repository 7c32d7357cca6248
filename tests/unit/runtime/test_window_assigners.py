"""Which windows a timestamp belongs to, checked against a brute-force enumeration of window starts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.windows import SlidingEventTimeWindows, TumblingEventTimeWindows, window_ends


def brute_force_ends(size: int, slide: int, offset: int, timestamp: int) -> list[int]:
    """Every window [start, start + size) with start = offset + k * slide that contains `timestamp`."""
    first_k = (timestamp - size - offset) // slide - 1
    last_k = (timestamp - offset) // slide + 1
    starts = [offset + k * slide for k in range(first_k, last_k + 1)]
    return sorted(s + size for s in starts if s <= timestamp < s + size)


def test_tumbling_examples() -> None:
    second = TumblingEventTimeWindows.of_millis(1000)
    assert window_ends(second, 0) == [1000]
    assert window_ends(second, 999) == [1000]
    assert window_ends(second, 1000) == [2000]
    assert window_ends(second, -1) == [0]
    assert window_ends(second, -1000) == [0]
    assert window_ends(second, -1001) == [-1000]
    shifted = TumblingEventTimeWindows.of_millis(1000, offset_ms=250)
    assert window_ends(shifted, 249) == [250]
    assert window_ends(shifted, 250) == [1250]


def test_sliding_examples() -> None:
    # 10 s windows every 5 s: each timestamp is in two windows.
    sliding = SlidingEventTimeWindows.of_seconds(10, 5)
    assert sorted(window_ends(sliding, 7_000)) == [10_000, 15_000]
    assert sorted(window_ends(sliding, 5_000)) == [10_000, 15_000]
    assert sorted(window_ends(sliding, 4_999)) == [5_000, 10_000]
    assert sorted(window_ends(sliding, -1)) == [0, 5_000]


@given(
    size=st.integers(min_value=1, max_value=5_000),
    offset_fraction=st.floats(min_value=0, max_value=0.999),
    timestamp=st.integers(min_value=-(10**12), max_value=10**12),
)
def test_tumbling_matches_brute_force(size: int, offset_fraction: float, timestamp: int) -> None:
    offset = int(size * offset_fraction)
    assigner = TumblingEventTimeWindows.of_millis(size, offset)
    assert sorted(window_ends(assigner, timestamp)) == brute_force_ends(size, size, offset, timestamp)


@given(
    slide=st.integers(min_value=1, max_value=500),
    windows_per_record=st.integers(min_value=1, max_value=8),
    remainder=st.integers(min_value=0, max_value=499),
    offset_fraction=st.floats(min_value=0, max_value=0.999),
    timestamp=st.integers(min_value=-(10**12), max_value=10**12),
)
def test_sliding_matches_brute_force(
    slide: int, windows_per_record: int, remainder: int, offset_fraction: float, timestamp: int
) -> None:
    # Sizes that are and are not multiples of the slide.
    size = slide * windows_per_record + remainder % slide
    offset = int(slide * offset_fraction)
    assigner = SlidingEventTimeWindows.of_millis(size, slide, offset)
    ends = window_ends(assigner, timestamp)
    assert sorted(ends) == brute_force_ends(size, slide, offset, timestamp)
    assert len(ends) == len(set(ends))


def test_sliding_window_smaller_than_its_slide_leaves_gaps() -> None:
    gappy = SlidingEventTimeWindows.of_millis(100, 1000)
    assert window_ends(gappy, 50) == [100]
    assert window_ends(gappy, 500) == []


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: TumblingEventTimeWindows.of_millis(0), "positive size"),
        (lambda: TumblingEventTimeWindows.of_millis(1000, 1000), r"offset must be in \[0, size\)"),
        (lambda: SlidingEventTimeWindows.of_millis(1000, 0), "positive size and slide"),
        (lambda: SlidingEventTimeWindows.of_millis(1000, 100, -1), r"offset must be in \[0, slide\)"),
    ],
)
def test_bad_window_parameters_are_refused(build: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()  # type: ignore[operator]

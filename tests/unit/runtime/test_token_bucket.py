"""A rate-limited source's token bucket, on a clock the test moves."""

from __future__ import annotations

import pytest

from sluice.engine._rate import TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def records_in(seconds: float, rate: float, batch: int = 1024) -> int:
    """What a source emits when it polls again as soon as the bucket says it is full, as an idle task
    does (`StreamTask._idle_wait`)."""
    clock = Clock()
    bucket = TokenBucket(rate, clock)
    end, emitted = clock.now + seconds, 0
    while clock.now < end:
        allowed = bucket.allowance(batch)
        bucket.spend(allowed)
        emitted += allowed
        clock.now += max(bucket.refill_seconds(), 0.001)
    return emitted


@pytest.mark.parametrize("rate", [2.0, 5.0, 100.0, 200.0, 500.0, 2000.0, 15_000.0])
def test_a_source_polled_when_its_bucket_is_full_keeps_its_rate(rate: float) -> None:
    # Within one burst: the bucket starts empty.
    assert abs(records_in(10.0, rate) - rate * 10) <= max(rate / 10, 1.0)


def test_a_held_back_source_does_not_make_up_for_lost_time_at_once() -> None:
    clock = Clock()
    bucket = TokenBucket(100.0, clock)
    clock.now += 60
    assert bucket.allowance(1024) == 10  # a tenth of a second's worth, not a minute's
    bucket.spend(10)
    assert bucket.refill_seconds() == pytest.approx(0.1)


def test_a_rate_below_ten_a_second_still_lets_one_record_through() -> None:
    clock = Clock()
    bucket = TokenBucket(2.0, clock)
    clock.now += 0.5
    assert bucket.allowance(1024) == 1


def test_a_rate_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="rate must be positive"):
        TokenBucket(0.0)

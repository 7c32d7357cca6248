"""Restart strategies count failures in a row; a stable period starts the count afresh."""

from __future__ import annotations

import random

import pytest

from sluice._states import RestartKind
from sluice.coordinator.restart import RestartStrategy


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_fixed_delay_gives_up_after_max_restarts_in_a_row() -> None:
    clock = _Clock()
    backoff = RestartStrategy(RestartKind.FIXED_DELAY, max_restarts=2, delay_s=1.5).backoff(clock)
    delays = []
    for _ in range(3):
        delays.append(backoff.on_failure())
        clock.now += 10
    assert delays == [1.5, 1.5, None]


def test_failures_spread_over_months_never_end_the_job() -> None:
    clock = _Clock()
    backoff = RestartStrategy(RestartKind.FIXED_DELAY, max_restarts=2, reset_after_s=3600).backoff(clock)
    for _ in range(12):  # an eviction a week for three months
        assert backoff.on_failure() == 1.0
        clock.now += 7 * 24 * 3600


def test_exponential_backs_off_to_its_cap_and_resets_after_a_stable_period() -> None:
    clock = _Clock()
    strategy = RestartStrategy(
        RestartKind.EXPONENTIAL,
        max_restarts=10,
        delay_s=1,
        max_delay_s=8,
        multiplier=2,
        jitter=0,
        reset_after_s=600,
    )
    backoff = strategy.backoff(clock)
    delays = []
    for _ in range(6):
        delay = backoff.on_failure()
        assert delay is not None
        delays.append(delay)
        clock.now += delay + 1  # fails again soon after each restart
    assert delays == [1, 2, 4, 8, 8, 8]
    clock.now += 600
    assert backoff.on_failure() == 1


def test_exponential_jitter_stays_within_its_fraction() -> None:
    strategy = RestartStrategy(
        RestartKind.EXPONENTIAL, max_restarts=100, delay_s=10, max_delay_s=10, jitter=0.1
    )
    backoff = strategy.backoff(_Clock(), random.Random(3))
    delays = [backoff.on_failure() for _ in range(50)]
    assert all(d is not None and 9 <= d <= 11 for d in delays)
    assert len(set(delays)) > 1


def test_none_never_restarts() -> None:
    assert RestartStrategy(RestartKind.NONE).backoff(_Clock()).on_failure() is None


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"kind": "sometimes"}, "unknown restart strategy"),
        ({"max_restarts": -1}, "must not be negative"),
        ({"reset_after_s": 0}, "reset period"),
        ({"jitter": 1.0}, "jitter"),
    ],
)
def test_bad_strategies_say_what_is_wrong(arguments: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        RestartStrategy(**arguments)  # type: ignore[arg-type]

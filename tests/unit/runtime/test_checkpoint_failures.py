"""Counted checkpoint failures in a row, and the tolerance that fails a job over."""

from __future__ import annotations

from sluice.checkpoint.failures import FailureCounter


def test_none_tolerated_fails_over_at_the_first_counted_failure() -> None:
    assert FailureCounter(0).counted_failure() is True


def test_a_completed_checkpoint_resets_the_count() -> None:
    counter = FailureCounter(2)
    assert [counter.counted_failure(), counter.counted_failure()] == [False, False]
    counter.completed()
    assert [counter.counted_failure(), counter.counted_failure(), counter.counted_failure()] == [
        False,
        False,
        True,
    ]
    assert counter.describe() == "3 checkpoint(s) failed in a row, 2 tolerated"


def test_unlimited_never_fails_over() -> None:
    counter = FailureCounter(None)
    assert not any(counter.counted_failure() for _ in range(1000))

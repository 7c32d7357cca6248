"""When a periodic checkpoint is due (sluice.checkpoint.decider), on a clock the test sets. What the
final checkpoint and a stop-with-savepoint trigger is tested with their state machine (test_finishing)."""

from __future__ import annotations

from sluice.checkpoint.coordinator import CheckpointConfig
from sluice.checkpoint.decider import PeriodicSchedule, Progress


def _at(
    *,
    pending: bool = False,
    last_completion: float = 0.0,
    all_reached_end: bool = False,
    all_finished: bool = False,
) -> Progress:
    return Progress(pending, last_completion, all_reached_end, all_finished)


RUNNING = _at()


def test_periodic_checkpoints_are_due_an_interval_after_the_start_then_after_each_trigger() -> None:
    schedule = PeriodicSchedule(CheckpointConfig(interval_s=10.0), now=100.0)
    assert not schedule.due(109.9, RUNNING)
    assert schedule.due(110.0, RUNNING)
    assert not schedule.due(110.1, RUNNING)  # the next interval started at 110
    assert not schedule.due(119.9, RUNNING)
    assert schedule.due(125.0, RUNNING)  # late: due since 120
    assert not schedule.due(134.9, RUNNING)  # counted from the trigger, not from 120


def test_without_an_interval_there_is_no_periodic_checkpoint() -> None:
    schedule = PeriodicSchedule(CheckpointConfig(interval_s=None), now=0.0)
    assert not any(schedule.due(t, RUNNING) for t in (0.0, 10.0, 1e9))


def test_one_checkpoint_at_a_time_and_a_held_back_one_does_not_move_the_interval() -> None:
    schedule = PeriodicSchedule(CheckpointConfig(interval_s=1.0), now=0.0)
    assert not schedule.due(50.0, _at(pending=True))
    assert not schedule.due(50.0, _at(pending=True, all_reached_end=True))
    assert schedule.next_due == 1.0
    assert schedule.due(50.0, RUNNING), "due since 1.0"


def test_min_pause_holds_a_due_periodic_checkpoint_back_after_a_completion() -> None:
    schedule = PeriodicSchedule(CheckpointConfig(interval_s=1.0, min_pause_s=5.0), now=0.0)
    completed_at_48 = _at(last_completion=48.0)
    assert not schedule.due(52.9, completed_at_48)
    assert schedule.due(53.0, completed_at_48)


def test_nothing_is_due_once_every_task_finished_or_finishes_on_restore() -> None:
    # A job resumed from a finished job's checkpoint: its tasks only commit again and close.
    schedule = PeriodicSchedule(CheckpointConfig(interval_s=0.001), now=0.0)
    finished = _at(all_reached_end=True, all_finished=True)
    assert not any(schedule.due(t, finished) for t in (0.0, 1.0, 1e9))
    assert schedule.due(1e9, RUNNING), "the interval was due all along"

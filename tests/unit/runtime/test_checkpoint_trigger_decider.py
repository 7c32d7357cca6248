"""What the job master triggers at a tick: the stop's savepoint, the final checkpoint, a periodic one, or
nothing (sluice.checkpoint.decider), on a clock the test sets."""

from __future__ import annotations

import pytest

from sluice.checkpoint.coordinator import CheckpointConfig
from sluice.checkpoint.decider import Decision, Progress, StopPhase, TriggerDecider, decide


def _at(
    *,
    pending: bool = False,
    last_completion: float = 0.0,
    all_reached_end: bool = False,
    all_finished: bool = False,
    stop: StopPhase = StopPhase.NONE,
) -> Progress:
    return Progress(pending, last_completion, all_reached_end, all_finished, stop)


RUNNING = _at()
ENDING = _at(all_reached_end=True)
"""Every task has reached end of data; some wait for a checkpoint to finish."""


def test_periodic_checkpoints_are_due_an_interval_after_the_start_then_after_each_trigger() -> None:
    decider = TriggerDecider(CheckpointConfig(interval_s=10.0), now=100.0)
    assert decider.decide(109.9, RUNNING) is Decision.NOTHING
    assert decider.decide(110.0, RUNNING) is Decision.PERIODIC
    assert decider.decide(110.1, RUNNING) is Decision.NOTHING  # the next interval started at 110
    assert decider.decide(119.9, RUNNING) is Decision.NOTHING
    assert decider.decide(125.0, RUNNING) is Decision.PERIODIC  # late: due since 120
    assert decider.decide(134.9, RUNNING) is Decision.NOTHING  # counted from the trigger, not from 120


def test_without_an_interval_there_is_no_periodic_checkpoint() -> None:
    decider = TriggerDecider(CheckpointConfig(interval_s=None), now=0.0)
    assert {decider.decide(t, RUNNING) for t in (0.0, 10.0, 1e9)} == {Decision.NOTHING}


def test_one_checkpoint_at_a_time() -> None:
    config = CheckpointConfig(interval_s=1.0)
    pending = _at(pending=True)
    assert decide(config, 50.0, 1.0, False, pending) is Decision.NOTHING
    pending_ending = _at(pending=True, all_reached_end=True)
    assert decide(config, 50.0, 1.0, False, pending_ending) is Decision.NOTHING


def test_min_pause_holds_a_due_periodic_checkpoint_back_after_a_completion() -> None:
    config = CheckpointConfig(interval_s=1.0, min_pause_s=5.0)
    completed_at_48 = _at(last_completion=48.0)
    assert decide(config, 52.9, 10.0, False, completed_at_48) is Decision.NOTHING
    assert decide(config, 53.0, 10.0, False, completed_at_48) is Decision.PERIODIC


def test_the_final_checkpoint_is_triggered_at_once_when_every_task_reached_end_of_data() -> None:
    decider = TriggerDecider(CheckpointConfig(interval_s=60.0, min_pause_s=30.0), now=0.0)
    # Not waiting for the interval, nor for the pause after the last completion.
    just_completed = _at(last_completion=1.0, all_reached_end=True)
    assert decider.decide(1.0, just_completed) is Decision.FINAL
    # Until it completes (the caller tells), the next tick asks again if none is pending.
    assert decider.decide(1.1, ENDING) is Decision.FINAL
    decider.final_completed()
    assert decider.decide(1.2, ENDING) is Decision.NOTHING
    assert decider.decide(60.0, ENDING) is Decision.PERIODIC  # periodic ones go on until tasks close


def test_no_final_checkpoint_before_every_task_reached_end_of_data_nor_after_all_finished() -> None:
    config = CheckpointConfig(interval_s=None)
    finished = _at(all_reached_end=True, all_finished=True)
    assert decide(config, 5.0, 0.0, False, finished) is Decision.NOTHING
    assert decide(config, 5.0, 0.0, False, RUNNING) is Decision.NOTHING


@pytest.mark.parametrize(("commits", "all_reached_end"), [(True, True), (True, False), (False, True)])
def test_only_a_committing_checkpoint_triggered_after_end_of_data_is_final(
    commits: bool, all_reached_end: bool
) -> None:
    assert TriggerDecider.is_final(commits, all_reached_end) is (commits and all_reached_end)


def test_a_stop_takes_its_savepoint_once_every_task_reached_end_of_data_and_none_is_pending() -> None:
    config = CheckpointConfig(interval_s=1.0)
    stopping = _at(stop=StopPhase.REQUESTED)
    # Neither periodic (due since 1.0) nor final checkpoints while the sources stop.
    assert decide(config, 50.0, 1.0, False, stopping) is Decision.NOTHING
    ended = _at(all_reached_end=True, stop=StopPhase.REQUESTED)
    assert decide(config, 50.0, 1.0, False, ended) is Decision.STOP_SAVEPOINT
    ended_pending = _at(pending=True, all_reached_end=True, stop=StopPhase.REQUESTED)
    assert decide(config, 50.0, 1.0, False, ended_pending) is Decision.NOTHING


def test_a_stop_takes_no_savepoint_once_every_task_closed_the_job_finishes_instead() -> None:
    # The input ran out as the stop was asked for, and the final checkpoint let every task close: no
    # task is left to take a savepoint (it would be declined, and the stop fail the attempt over).
    config = CheckpointConfig(interval_s=1.0)
    all_finished = _at(all_reached_end=True, all_finished=True, stop=StopPhase.REQUESTED)
    assert decide(config, 50.0, 1.0, True, all_finished) is Decision.NOTHING
    assert decide(config, 50.0, 1.0, False, all_finished) is Decision.NOTHING


def test_nothing_else_is_triggered_once_the_stops_savepoint_is() -> None:
    config = CheckpointConfig(interval_s=1.0)
    triggered = _at(all_reached_end=True, stop=StopPhase.SAVEPOINT_TRIGGERED)
    assert decide(config, 50.0, 1.0, False, triggered) is Decision.NOTHING


def test_a_periodic_answer_under_a_stop_does_not_move_the_interval() -> None:
    decider = TriggerDecider(CheckpointConfig(interval_s=10.0), now=0.0)
    stopping = _at(stop=StopPhase.REQUESTED)
    assert decider.decide(20.0, stopping) is Decision.NOTHING
    assert decider.next_periodic == 10.0
    assert decider.decide(20.0, RUNNING) is Decision.PERIODIC  # the stop failed: due since 10


def test_nothing_is_triggered_once_every_task_finished_or_finishes_on_restore() -> None:
    # A job resumed from a finished job's checkpoint: its tasks only commit again and close.
    decider = TriggerDecider(CheckpointConfig(interval_s=0.001), now=0.0)
    finished = _at(all_reached_end=True, all_finished=True)
    assert {decider.decide(t, finished) for t in (0.0, 1.0, 1e9)} == {Decision.NOTHING}
    assert decider.decide(1e9, RUNNING) is Decision.PERIODIC, "the interval was due all along"

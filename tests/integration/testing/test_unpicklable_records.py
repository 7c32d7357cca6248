"""A record that cannot be pickled fails its job where it crosses a boundary, with an error naming the
operator that emitted it, the record's type and what to do, instead of a pickler's traceback from the
transport or a snapshot blamed on whichever task took the checkpoint."""

from __future__ import annotations

import threading

import sluice
from sluice.connectors import SequenceSource
from sluice.testing import CollectingSink, run_job

NO_RESTARTS = ("--max-restarts", "0")


def _with_lock(i: int) -> tuple[int, threading.Lock]:
    return (i, threading.Lock())


def test_a_record_that_cannot_cross_to_another_taskmanager_names_its_operator_and_type() -> None:
    def build(env: sluice.StreamEnvironment) -> None:
        (
            env.from_source(SequenceSource(0, 1000, splits=2), uid="numbers")
            .map(_with_lock, uid="attach_lock")
            .rebalance()  # to both subtasks of the sink, one of them on the other TaskManager
            .sink_to(CollectingSink(), uid="sink")
        )

    outcome = run_job(build, "--parallelism", "2", "--taskmanagers", "2", *NO_RESTARTS)
    assert outcome.state == "FAILED", outcome
    error = outcome.error or ""
    assert "UnpicklableRecord: a record of type tuple cannot be pickled to go to another TaskManager" in error
    assert "cannot pickle '_thread.lock' object" in error, error
    assert "must be picklable: turn it into plain data" in error, error
    assert error.endswith("(in operator 'attach_lock', subtask 0: a record it emitted)") or error.endswith(
        "(in operator 'attach_lock', subtask 1: a record it emitted)"
    ), error


def test_state_that_cannot_be_pickled_names_its_operator_when_the_checkpoint_is_taken() -> None:
    def build(env: sluice.StreamEnvironment) -> None:
        (
            env.from_source(SequenceSource(0, 1000), uid="numbers")
            .map(_with_lock, uid="attach_lock")
            .key_by(lambda pair: pair[0] % 3)
            .reduce(lambda a, b: b, uid="latest")
            .map(lambda pair: pair[0], uid="number")
            .sink_to(CollectingSink(), uid="sink")
        )

    outcome = run_job(build, "--checkpoint-interval", "50ms", *NO_RESTARTS)
    assert outcome.state == "FAILED", outcome
    error = outcome.error or ""
    assert "UnpicklableState: the state of operator 'latest' cannot be pickled into a checkpoint" in error
    assert "must be picklable" in error, error

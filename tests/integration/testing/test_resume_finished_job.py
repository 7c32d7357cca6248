"""A job resumed from a checkpoint in which every operator had finished has nothing to checkpoint.

Each of its tasks finishes on restore (FLIP-147: it only commits the transactions of that checkpoint
again and closes), so the job ends as they close, as Flink's tasks deployed as finished do. A
checkpoint triggered meanwhile had nothing to record and, before the tasks said they had finished,
waited for them; before drained tasks counted as finished it failed "finished before acknowledging",
a failure in the log and the checkpoint history of a job that did nothing wrong.

The window is forced, not waited for: the resumed job's sink commits only once the test lets it, so
every task stays in its restore while the job master ticks with a 1 ms checkpoint interval.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import sluice
from sluice.connectors import SequenceSource
from sluice.coordinator.jobmaster import TICK_S
from sluice.testing import CollectingSink, run_job, start_job

COUNT = 500
# How many job master ticks a restoring task is held for, unless a checkpoint is triggered before.
HELD_TICKS = 20

_gates: dict[str, threading.Event] = {}


class GatedSink(CollectingSink):
    """A `CollectingSink` whose commits wait until the test opens its gate (the copies each subtask
    unpickles find the gate by the sink's id)."""

    def __init__(self, open_gate: bool) -> None:
        super().__init__()
        _gates[self.sink_id] = threading.Event()
        if open_gate:
            self.open_gate()

    def open_gate(self) -> None:
        _gates[self.sink_id].set()

    def commit(self, committable: Any) -> None:
        _gates[self.sink_id].wait()
        super().commit(committable)


def _job(sink: CollectingSink) -> Any:
    def build(env: sluice.StreamEnvironment) -> None:
        numbers = env.from_source(SequenceSource(0, COUNT), uid="numbers")
        numbers.map(lambda n: n * 2, uid="double").sink_to(sink, uid="sink")

    return build


def _checkpointed_nothing(job: Any) -> bool:
    return not job.checkpoints.history and not job.checkpoints.pending


def test_a_job_resumed_from_a_fully_finished_checkpoint_triggers_no_checkpoint(tmp_path: Path) -> None:
    options = ("--parallelism", "2", "--checkpoint-dir", f"file://{tmp_path / 'chk'}")
    first_sink = GatedSink(open_gate=True)
    # No periodic checkpoint: the final one holds every record, as transactions its restore commits.
    first = run_job(_job(first_sink), *options, "--checkpoint-interval", "1h")
    assert (first.state, first.error) == ("FINISHED", None)
    assert first.last_checkpoint is not None
    assert sorted(first_sink.records()) == [n * 2 for n in range(COUNT)]

    resumed_sink = GatedSink(open_gate=False)
    with start_job(
        _job(resumed_sink),
        *options,
        "--checkpoint-interval",
        "1ms",
        "--from-savepoint",
        first.last_checkpoint,
    ) as job:
        master = job.background.job
        held_until = time.monotonic() + HELD_TICKS * TICK_S
        while _checkpointed_nothing(master) and time.monotonic() < held_until:
            time.sleep(TICK_S / 5)
        resumed_sink.open_gate()
        outcome = job.wait()
    assert (outcome.state, outcome.error) == ("FINISHED", None)
    history = [(r.checkpoint_id, r.status, r.error) for r in master.checkpoints.history]
    assert history == [], "nothing was left to checkpoint"
    assert master.checkpoints.counts == {"completed": 0, "failed": 0}
    # The restore committed the final checkpoint's transactions again (idempotent), and nothing ran.
    assert sorted(resumed_sink.records()) == [n * 2 for n in range(COUNT)]

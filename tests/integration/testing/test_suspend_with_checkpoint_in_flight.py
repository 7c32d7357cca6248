"""A SUSPEND stop-with-savepoint asked for while a periodic checkpoint is in flight (FLIP-34 meets FLIP-147).

A task that ended its input closes once the first checkpoint it takes after that end has completed.
Were the periodic checkpoint, still pending when every task ended without drain, that first checkpoint
for some task, the task would close on it before the stop's savepoint was triggered: the stop would fail
("the job finished before the savepoint completed") and the job end without its savepoint. It cannot:
the coordinator sends the trigger before the stop on the same connection, each source takes the
checkpoint before it ends, and each channel carries the barrier ahead of the end of data. The stop's
savepoint is the only checkpoint triggered after the stop (`sluice.checkpoint.decider`), so it is every
task's final checkpoint.

Forced step by step, not timed: the periodic checkpoint's state writes are held (nothing else holds a
write on cue) until every task has reached the end of its input; then the checkpoint completes, the
stop's savepoint is taken, and a resumed job goes on from it with every record once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

import sluice
from sluice._states import StopMode, SubtaskState
from sluice.checkpoint import subtask as subtask_module
from sluice.checkpoint.state_key import load_state_key
from sluice.checkpoint.storage import read_metadata, write_state_file
from sluice.connectors import GeneratorSource
from sluice.testing import CollectingSink, run_job, start_job

N = 4_000
GATE_S = 60.0
"""How long the test waits for a step: only a hung job ever takes that long."""
HELD = 3
"""The periodic checkpoint whose state writes are held: the two before it commit some records."""


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GATE_S
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.005)


def test_a_suspend_asked_for_while_a_periodic_checkpoint_is_in_flight_ends_with_its_savepoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = threading.Event()
    release = threading.Event()

    def held_write(location: str, name: str, data: bytes) -> tuple[int, str]:
        if location.rstrip("/").endswith(f"/chk-{HELD}"):
            held.set()
            release.wait(GATE_S)
        return write_state_file(location, name, data)

    monkeypatch.setattr(subtask_module, "write_state_file", held_write)
    sink = CollectingSink()

    def build(env: sluice.StreamEnvironment) -> None:
        numbers = env.from_source(GeneratorSource(lambda i: i, splits=2, rate=1_000, count=N), uid="numbers")
        numbers.rebalance().map(lambda n: n, uid="pass").sink_to(sink, uid="sink")

    options = ("--parallelism", "2", "--checkpoint-interval", "100ms", "--checkpoint-timeout", "5m")
    stopped: list[str] = []
    stop_errors: list[BaseException] = []
    try:
        with start_job(build, *options) as job:
            master = job.background.job

            def stop() -> None:
                try:
                    stopped.append(job.stop(drain=False, target_dir=f"file://{tmp_path / 'savepoints'}"))
                except BaseException as err:
                    stop_errors.append(err)

            assert held.wait(GATE_S), "the periodic checkpoint's state was never written"
            stopper = threading.Thread(target=stop, name="stop-with-savepoint")
            stopper.start()
            _until(lambda: master.finishing.stopping, "the stop was asked for")
            _until(
                lambda: set(master.subtasks.values()) == {SubtaskState.END_OF_DATA},
                "every task reached the end of its input",
            )
            # Every task has ended without drain, and the periodic checkpoint is still in flight.
            assert [pending.checkpoint_id for pending in master.checkpoints.pending.values()] == [HELD]
            release.set()
            stopper.join(GATE_S)
            outcome = job.wait()
            restarts = master.restarts
            history = master.checkpoints.counts
    finally:
        release.set()

    assert not stop_errors, stop_errors
    assert (outcome.state, outcome.error, restarts) == ("FINISHED", None, 0)
    assert stopped == [outcome.stop_savepoint]
    # Nothing failed: the periodic checkpoints, then the savepoint.
    assert (history["completed"], history["failed"]) == (HELD + 1, 0), history
    savepoint = read_metadata(stopped[0], load_state_key())
    assert (savepoint.checkpoint_id, savepoint.stop_mode) == (HELD + 1, StopMode.SUSPEND)
    # Suspended, not finished: every operator runs again when the job resumes.
    assert [op.uid for op in savepoint.operators if op.fully_finished] == []

    suspended = Counter(sink.records())
    assert suspended and max(suspended.values()) == 1
    resumed = run_job(build, *options, "--from-savepoint", stopped[0])
    assert (resumed.state, resumed.error) == ("FINISHED", None)
    # Across the stop and the resume, every record committed once.
    assert Counter(sink.records()) == Counter(range(N))

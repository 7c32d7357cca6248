"""A stop-with-savepoint asked for while a bounded input reaches its end (FLIP-34 meets FLIP-147).

The race, forced step by step instead of timed: the source has run out and the job's final checkpoint
is being taken when the user asks to stop with a savepoint. The final checkpoint completes, so the
tasks close; the stop's savepoint, triggered as that checkpoint completes, finds them closing. Nothing
failed: the job must end FINISHED, without a restart, with every record committed exactly once.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sluice
from sluice.checkpoint.finishing import Phase
from sluice.checkpoint.state_key import load_state_key
from sluice.checkpoint.storage import read_metadata
from sluice.connectors import SequenceSource
from sluice.functions import MapFunction
from sluice.testing import CollectingSink, start_job

N = 500
GATE_S = 60.0
"""How long a gate waits for the test before giving up: only a hung test ever waits that long."""


@dataclass
class _Gates:
    """Where the job's thread waits for the test, so each step of the race happens in order."""

    in_final_checkpoint: threading.Event = field(default_factory=threading.Event)
    stop_requested: threading.Event = field(default_factory=threading.Event)
    savepoint_triggered: threading.Event = field(default_factory=threading.Event)


# gate id -> gates; the job's copies of the functions (pickled) find the test's gates here.
_GATES: dict[str, _Gates] = {}


class _HeldPreCommit(CollectingSink):
    """Pre-commits only once the test has asked for the stop: the final checkpoint is in flight then."""

    def __init__(self, gate_id: str) -> None:
        super().__init__()
        self.gate_id = gate_id

    def pre_commit(self, txn: Any, checkpoint_id: int) -> Any:
        gates = _GATES[self.gate_id]
        gates.in_final_checkpoint.set()
        gates.stop_requested.wait(GATE_S)
        return super().pre_commit(txn, checkpoint_id)


class _HeldClose(MapFunction):
    """Closes only once the stop's savepoint was triggered: the task closes while it waits for it."""

    def __init__(self, gate_id: str) -> None:
        self.gate_id = gate_id

    def map(self, value: Any) -> Any:
        return value

    def close(self) -> None:
        _GATES[self.gate_id].savepoint_triggered.wait(GATE_S)


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GATE_S
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.005)


def test_a_stop_asked_for_as_the_input_ends_finishes_the_job_without_a_restart(tmp_path: Path) -> None:
    gate_id = uuid.uuid4().hex
    gates = _GATES[gate_id] = _Gates()
    sink = _HeldPreCommit(gate_id)

    def build(env: sluice.StreamEnvironment) -> None:
        env.from_source(SequenceSource(0, N), uid="numbers").map(_HeldClose(gate_id), uid="held").sink_to(
            sink, uid="sink"
        )

    stopped: list[str] = []
    stop_errors: list[BaseException] = []
    try:
        # No periodic checkpoint: the first checkpoint is the final one, taken as the input ends.
        with start_job(build, "--parallelism", "1", "--checkpoint-interval", "1h") as job:
            master = job.background.job

            def stop() -> None:
                try:
                    stopped.append(job.stop(drain=True, target_dir=f"file://{tmp_path / 'savepoints'}"))
                except BaseException as err:
                    stop_errors.append(err)

            assert gates.in_final_checkpoint.wait(GATE_S), "the final checkpoint was never taken"
            stopper = threading.Thread(target=stop, name="stop-with-savepoint")
            stopper.start()
            _until(lambda: master.finishing.stopping, "the stop was asked for")
            gates.stop_requested.set()  # the final checkpoint completes: the task closes...
            _until(
                lambda: master.finishing.phase is not Phase.DRAINING,
                "the stop's savepoint was triggered",
            )
            gates.savepoint_triggered.set()  # ...only once the stop's savepoint waits for it
            stopper.join(GATE_S)
            outcome = job.wait()
            restarts = master.restarts
    finally:
        for event in (gates.in_final_checkpoint, gates.stop_requested, gates.savepoint_triggered):
            event.set()
        _GATES.pop(gate_id, None)

    assert not stop_errors, stop_errors
    assert (outcome.state, outcome.error, restarts) == ("FINISHED", None, 0)
    assert stopped == [outcome.stop_savepoint]
    # The tasks had finished: the savepoint records every operator as finished, nothing to run again.
    metadata = read_metadata(stopped[0], load_state_key())
    assert [op.uid for op in metadata.operators if not op.fully_finished] == []
    # The final checkpoint committed every record once; nothing was lost, nothing repeated.
    assert sorted(sink.records()) == list(range(N))

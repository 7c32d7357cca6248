"""The finishing state machine (sluice.checkpoint.finishing): every phase x every event, the illegal
ones included, what each tick triggers in each phase, and how the checkpoint futures it waits for
report to it. No job: the trigger, the broadcast and the attempt's failure are recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from sluice._states import CheckpointKind, StopMode
from sluice.checkpoint.coordinator import CheckpointConfig, CheckpointDeclined
from sluice.checkpoint.decider import Progress
from sluice.checkpoint.finishing import Finishing, IllegalTransition, Phase
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.transport.messages import Stop

P = Phase
TARGET = "file:///savepoints"
RUNNING = Progress(pending=False, last_completion=0.0, all_reached_end=False, all_finished=False)
ENDED = Progress(pending=False, last_completion=0.0, all_reached_end=True, all_finished=False)
"""Every task has reached end of data; some wait for a checkpoint to close."""
ENDED_PENDING = Progress(pending=True, last_completion=0.0, all_reached_end=True, all_finished=False)
ALL_FINISHED = Progress(pending=False, last_completion=0.0, all_reached_end=True, all_finished=True)


class _Job:
    """What the machine is given by the job master, recorded."""

    def __init__(self, interval_s: float | None = 10.0) -> None:
        self.declined = False
        self.triggered: list[tuple[CheckpointKind, str | None, StopMode | None]] = []
        self.futures: list[asyncio.Future[CheckpointMetadata]] = []
        self.broadcast: list[Stop] = []
        self.failed: list[str] = []
        self.machine = Finishing(
            CheckpointConfig(interval_s=interval_s, min_pause_s=5.0),
            trigger=self._trigger,
            broadcast=self.broadcast.append,
            fail_attempt=self.failed.append,
        )

    def _trigger(
        self, kind: CheckpointKind, target: str | None, stop_mode: StopMode | None
    ) -> asyncio.Future[CheckpointMetadata]:
        if self.declined:
            raise CheckpointDeclined("no task is running")
        self.triggered.append((kind, target, stop_mode))
        self.futures.append(asyncio.get_running_loop().create_future())
        return self.futures[-1]


def _metadata(checkpoint_id: int) -> CheckpointMetadata:
    kind = CheckpointKind.SAVEPOINT
    return CheckpointMetadata(
        checkpoint_id, "job", kind, 0, None, (), location=f"{TARGET}/sp-{checkpoint_id}"
    )


def _stop(m: Finishing, mode: StopMode) -> None:
    """Asks `m` to stop, as `Savepoints.stop` does, which awaits the outcome: a failed stop's error is
    retrieved, so its future is not reported as never retrieved whenever the collector happens to free
    it while the loop still runs (that made the table below fail about once in a few hundred runs)."""
    done = m.request_stop(mode, TARGET)
    done.add_done_callback(lambda future: future.cancelled() or future.exception())


def _in(phase: Phase) -> _Job:
    """A machine brought to `phase` by legal events only. Needs a running event loop."""
    job = _Job()
    m = job.machine
    if phase is P.IDLE:
        return job
    m.attempt_started(0.0)
    if phase is P.FINAL_CHECKPOINT_DUE:
        job.declined = True
        m.tick(1.0, ENDED)
        job.declined = False
    elif phase in (P.FINAL_CHECKPOINT_PENDING, P.CLOSING):
        m.tick(1.0, ENDED)
        if phase is P.CLOSING:
            m.final_checkpoint_completed()
    elif phase is P.SUSPENDING:
        _stop(m, StopMode.SUSPEND)
    elif phase in (P.DRAINING, P.STOP_SAVEPOINT_PENDING, P.STOP_FAILED):
        _stop(m, StopMode.TERMINATE)
        if phase is not P.DRAINING:
            m.tick(1.0, ENDED)
        if phase is P.STOP_FAILED:
            m.stop_savepoint_failed("boom")
    elif phase is P.FINISHED:
        m.attempt_ended(True, "every task finished")
    assert m.phase is phase
    job.triggered.clear()
    job.failed.clear()
    return job


def _phase(job: _Job) -> Phase:
    """The phase now (an assertion on the attribute would narrow its type for the rest of a test)."""
    return job.machine.phase


def _run(body: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Runs `body`; an exception raised in a done callback (an event in the wrong phase) fails the test,
    where the event loop would only log it."""
    raised: list[object] = []

    async def watched() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: raised.append(context))
        await body()

    asyncio.run(watched())
    assert raised == []


EVENTS: dict[str, Callable[[Finishing], object]] = {
    "attempt_started": lambda m: m.attempt_started(5.0),
    "request_stop": lambda m: _stop(m, StopMode.TERMINATE),
    "final_checkpoint_completed": lambda m: m.final_checkpoint_completed(),
    "final_checkpoint_failed": lambda m: m.final_checkpoint_failed(),
    "stop_savepoint_completed": lambda m: m.stop_savepoint_completed(_metadata(7)),
    "stop_savepoint_failed": lambda m: m.stop_savepoint_failed("boom"),
    "attempt_ended finished": lambda m: m.attempt_ended(True, "every task finished"),
    "attempt_ended otherwise": lambda m: m.attempt_ended(False, "a task failed"),
}
X = None  # illegal: IllegalTransition, and the phase stays
# One row per phase, one column per event in the order of EVENTS.
TABLE: dict[Phase, tuple[Phase | None, ...]] = {
    P.IDLE:                     (P.RUNNING, X, X, X, X, X, P.FINISHED, P.IDLE),
    P.RUNNING:                  (X, P.DRAINING, X, X, X, X, P.FINISHED, P.IDLE),
    P.FINAL_CHECKPOINT_DUE:     (X, P.DRAINING, X, X, X, X, P.FINISHED, P.IDLE),
    P.FINAL_CHECKPOINT_PENDING: (X, P.DRAINING, P.CLOSING, P.FINAL_CHECKPOINT_DUE, X, X, P.FINISHED, P.IDLE),
    P.CLOSING:                  (X, P.DRAINING, X, X, X, X, P.FINISHED, P.IDLE),
    P.DRAINING:                 (X, X, X, X, X, P.STOP_FAILED, P.FINISHED, P.IDLE),
    P.SUSPENDING:               (X, X, X, X, X, P.STOP_FAILED, P.FINISHED, P.IDLE),
    P.STOP_SAVEPOINT_PENDING:   (X, X, X, X, P.CLOSING, P.STOP_FAILED, P.FINISHED, P.IDLE),
    P.STOP_FAILED:              (X, X, X, X, X, X, P.FINISHED, P.IDLE),
    P.FINISHED:                 (X, X, X, X, X, X, X, X),
}  # fmt: skip


def test_the_table_covers_every_phase() -> None:
    assert set(TABLE) == set(Phase)


@pytest.mark.parametrize("phase", list(Phase))
@pytest.mark.parametrize("event", list(EVENTS))
def test_each_event_in_each_phase(phase: Phase, event: str) -> None:
    expected = TABLE[phase][list(EVENTS).index(event)]

    async def body() -> None:
        machine = _in(phase).machine
        if expected is None:
            name = event.split(maxsplit=1)[0]
            with pytest.raises(IllegalTransition, match=f"{name} cannot happen in phase {phase}"):
                EVENTS[event](machine)
            assert machine.phase is phase
        else:
            EVENTS[event](machine)
            assert machine.phase is expected

    _run(body)


# -- ticks ------------------------------------------------------------------------------------------

CKPT = (CheckpointKind.CHECKPOINT, None, None)
# phase, progress, now (the interval of 10 s is due from 10.0) -> what is triggered, the phase after
TICKS: list[tuple[Phase, Progress, float, list[object], Phase]] = [
    (P.IDLE, ENDED, 99.0, [], P.IDLE),
    (P.RUNNING, RUNNING, 9.0, [], P.RUNNING),
    (P.RUNNING, RUNNING, 10.0, [CKPT], P.RUNNING),
    (P.RUNNING, ALL_FINISHED, 99.0, [], P.RUNNING),  # finished on restore: nothing to take
    # FLIP-147: at once, neither waiting for the interval nor for the pause after a completion.
    (P.RUNNING, ENDED, 1.0, [CKPT], P.FINAL_CHECKPOINT_PENDING),
    (P.RUNNING, ENDED_PENDING, 1.0, [], P.FINAL_CHECKPOINT_DUE),
    (P.FINAL_CHECKPOINT_DUE, ENDED, 1.0, [CKPT], P.FINAL_CHECKPOINT_PENDING),
    (P.FINAL_CHECKPOINT_DUE, ALL_FINISHED, 1.0, [], P.FINAL_CHECKPOINT_DUE),
    (P.FINAL_CHECKPOINT_PENDING, ENDED, 99.0, [], P.FINAL_CHECKPOINT_PENDING),
    (P.CLOSING, ENDED, 9.0, [], P.CLOSING),
    (P.CLOSING, ENDED, 10.0, [CKPT], P.CLOSING),  # periodic ones go on until the tasks have closed
    # FLIP-34: the stop owns the triggers; its savepoint once every task reached end of data.
    (P.DRAINING, RUNNING, 99.0, [], P.DRAINING),
    (P.DRAINING, ENDED_PENDING, 99.0, [], P.DRAINING),
    (P.DRAINING, ALL_FINISHED, 99.0, [], P.DRAINING),
    (
        P.DRAINING,
        ENDED,
        1.0,
        [(CheckpointKind.SAVEPOINT, TARGET, StopMode.TERMINATE)],
        P.STOP_SAVEPOINT_PENDING,
    ),
    (
        P.SUSPENDING,
        ENDED,
        1.0,
        [(CheckpointKind.SAVEPOINT, TARGET, StopMode.SUSPEND)],
        P.STOP_SAVEPOINT_PENDING,
    ),
    (P.STOP_SAVEPOINT_PENDING, ENDED, 99.0, [], P.STOP_SAVEPOINT_PENDING),
    (P.STOP_FAILED, ENDED, 99.0, [], P.STOP_FAILED),
    (P.FINISHED, ENDED, 99.0, [], P.FINISHED),
]


@pytest.mark.parametrize(("phase", "progress", "now", "triggered", "after"), TICKS)
def test_what_a_tick_triggers(
    phase: Phase, progress: Progress, now: float, triggered: list[object], after: Phase
) -> None:
    async def body() -> None:
        job = _in(phase)
        job.machine.tick(now, progress)
        assert (job.triggered, job.machine.phase) == (triggered, after)

    _run(body)


def test_ticks_cover_every_phase() -> None:
    assert {row[0] for row in TICKS} == set(Phase)


def test_a_declined_final_checkpoint_is_triggered_again_at_the_next_tick() -> None:
    async def body() -> None:
        job = _in(P.RUNNING)
        job.declined = True
        job.machine.tick(1.0, ENDED)
        assert (job.triggered, job.machine.phase, job.failed) == ([], P.FINAL_CHECKPOINT_DUE, [])
        job.declined = False
        job.machine.tick(1.1, ENDED)
        assert (job.triggered, job.machine.phase) == ([CKPT], P.FINAL_CHECKPOINT_PENDING)

    _run(body)


def test_a_declined_stop_savepoint_fails_the_stop_and_the_attempt() -> None:
    async def body() -> None:
        job = _in(P.RUNNING)
        done = job.machine.request_stop(StopMode.TERMINATE, TARGET)
        job.declined = True
        job.machine.tick(1.0, ENDED)
        assert job.machine.phase is P.STOP_FAILED
        with pytest.raises(RuntimeError, match=r"^stop-with-savepoint failed: declined$"):
            await done
        # The sources stopped: the job master restarts from the latest checkpoint.
        assert job.failed == ["stop-with-savepoint failed (declined); resuming"]

    _run(body)


# -- the futures it waits for -------------------------------------------------------------------------


async def _settled() -> None:
    for _ in range(3):  # a done callback runs one loop iteration after the future is set
        await asyncio.sleep(0)


def test_the_final_checkpoint_reports_its_completion_and_its_failure() -> None:
    async def body() -> None:
        job = _in(P.RUNNING)
        job.machine.tick(1.0, ENDED)
        job.futures[0].set_exception(CheckpointDeclined("timed out"))
        await _settled()
        assert job.machine.phase == P.FINAL_CHECKPOINT_DUE
        job.machine.tick(2.0, ENDED)
        job.futures[1].set_result(_metadata(2))
        await _settled()
        assert _phase(job) is P.CLOSING

    _run(body)


def test_a_stop_requested_while_the_final_checkpoint_is_pending_takes_over_from_it() -> None:
    # FLIP-34 meets FLIP-147: the stop's savepoint, not the final checkpoint in flight, ends the stop.
    async def body() -> None:
        job = _in(P.RUNNING)
        job.machine.tick(1.0, ENDED)
        done = job.machine.request_stop(StopMode.TERMINATE, TARGET)
        assert job.broadcast == [Stop(StopMode.TERMINATE)]
        job.futures[0].set_result(_metadata(1))
        await _settled()
        assert job.machine.phase is P.DRAINING, "the final checkpoint's completion is no event any more"
        job.machine.tick(1.1, ENDED)
        job.futures[1].set_result(_metadata(2))
        assert await done == _metadata(2)
        assert (job.machine.phase, job.failed) == (P.CLOSING, [])

    _run(body)


def test_a_failed_stop_savepoint_fails_the_stop_with_its_reason_and_the_attempt() -> None:
    async def body() -> None:
        job = _in(P.RUNNING)
        done = job.machine.request_stop(StopMode.SUSPEND, TARGET)
        job.machine.tick(1.0, ENDED)
        job.futures[0].set_exception(CheckpointDeclined("task map[0] finished before acknowledging"))
        with pytest.raises(RuntimeError, match=r"^stop-with-savepoint failed: task map\[0\] finished before"):
            await done
        assert job.machine.phase is P.STOP_FAILED
        assert job.failed == [
            "stop-with-savepoint failed (task map[0] finished before acknowledging); resuming"
        ]

    _run(body)


@pytest.mark.parametrize("finished", [True, False])
def test_an_attempt_ending_under_a_stop_fails_it_with_the_reason_and_fails_nothing_over(
    finished: bool,
) -> None:
    async def body() -> None:
        job = _in(P.RUNNING)
        done = job.machine.request_stop(StopMode.TERMINATE, TARGET)
        job.machine.tick(1.0, ENDED)
        job.machine.attempt_ended(finished, "the job was canceled before the savepoint completed: by request")
        with pytest.raises(RuntimeError, match=r"^stop-with-savepoint failed: the job was canceled before"):
            await done
        # The savepoint of the ended attempt fails later (abort_all): no event any more.
        job.futures[0].set_exception(CheckpointDeclined("the job attempt ended"))
        await _settled()
        assert (job.machine.phase, job.failed) == (P.FINISHED if finished else P.IDLE, [])

    _run(body)


def test_a_checkpoint_of_an_earlier_attempt_is_no_event_for_the_next() -> None:
    async def body() -> None:
        job = _in(P.RUNNING)
        job.machine.tick(1.0, ENDED)
        job.machine.attempt_ended(False, "a task failed")
        job.machine.attempt_started(2.0)
        job.futures[0].set_result(_metadata(1))  # its _metadata was being written as the attempt ended
        await _settled()
        assert job.machine.phase is P.RUNNING
        job.machine.tick(2.1, ENDED)
        assert _phase(job) is P.FINAL_CHECKPOINT_PENDING, "the new attempt takes its own"

    _run(body)

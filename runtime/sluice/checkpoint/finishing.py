"""How a job finishes, on the coordinator's side: FLIP-147's final checkpoint and FLIP-34's
stop-with-savepoint as one state machine.

The job master feeds it its ticks and an attempt's start and end; `Savepoints` asks it for a stop. It
triggers every checkpoint that is not an intermediate savepoint, so it alone knows which one is final.
The rules it enforces, in the order a job meets them:

1. One checkpoint at a time: nothing is triggered while one is pending, nor once every task has
   finished or finishes on restore (`decider.Progress.quiet`).
2. While tasks run, a checkpoint is triggered every interval (`decider.PeriodicSchedule`).
3. Final checkpoint (FLIP-147): once every task has reached end of data and some have not closed, a
   checkpoint is triggered at once instead of at the next interval. Its completion is what lets the
   waiting tasks close (their sinks commit their last data); if it fails, another is triggered. Once
   it has completed there is no other final one, and periodic checkpoints go on until the tasks have
   closed.
4. Stop-with-savepoint (FLIP-34) is taken while the job runs and no other stop is under way; its
   target was checked before (`sluice.coordinator.savepoints`). The sources are told to stop: with
   drain (TERMINATE) every task flushes, fires its timers and finishes; without (SUSPEND) it ends where
   it is.
5. From the request on, the stop owns the triggers: no periodic or final checkpoint, which would hold
   its savepoint back. Once every task has reached end of data and nothing is pending, the stop's
   savepoint is triggered. It commits side effects (`pending.commits_side_effects`), so it is the final
   checkpoint too: its completion ends the stop and lets the tasks close; the job then ends FINISHED.
6. If the stop's savepoint is declined or fails, the stop fails and so does the attempt: the sources
   have stopped, so the job restarts from its latest checkpoint and keeps running.
7. If every task closed before the stop's savepoint could be triggered (a bounded input ran out as the
   stop was asked for), there is nothing left to take: the job finishes, its final checkpoint having
   committed the output, and the stop fails saying so. Nothing restarts.
8. An attempt that ends any other way (a task failed, cancel, suspend) fails a stop under way with
   the reason. The next attempt starts running afresh and takes its own final checkpoint.

Phases and the events that move between them (`LEGAL` lists the phases each event may happen in; in
any other it raises IllegalTransition):

    IDLE --attempt_started--> RUNNING --every task reached end (tick)--> FINAL_CHECKPOINT_DUE
    FINAL_CHECKPOINT_DUE --tick triggers it--> FINAL_CHECKPOINT_PENDING
    FINAL_CHECKPOINT_PENDING --final_checkpoint_completed--> CLOSING
                             --final_checkpoint_failed--> FINAL_CHECKPOINT_DUE
    RUNNING | FINAL_CHECKPOINT_* | CLOSING --request_stop--> DRAINING (TERMINATE) | SUSPENDING (SUSPEND)
    DRAINING | SUSPENDING --every task reached end (tick)--> STOP_SAVEPOINT_PENDING
                          --stop_savepoint_failed (declined at its trigger)--> STOP_FAILED
    STOP_SAVEPOINT_PENDING --stop_savepoint_completed--> CLOSING
                           --stop_savepoint_failed--> STOP_FAILED
    any but FINISHED --attempt_ended--> FINISHED (every task finished) | IDLE (otherwise)

The checkpoint futures this machine watches report to it only while they are the ones it waits for:
one of an attempt that ended, or a final checkpoint overtaken by a stop, is no event any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from sluice._states import CheckpointKind, StopMode
from sluice.checkpoint.coordinator import CheckpointConfig, CheckpointDeclined
from sluice.checkpoint.decider import PeriodicSchedule, Progress
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.transport.messages import Stop

log = logging.getLogger(__name__)

TriggerCheckpoint = Callable[
    [CheckpointKind, str | None, StopMode | None], asyncio.Future[CheckpointMetadata]
]
"""Triggers a checkpoint or savepoint (kind, savepoint target, stop mode): raises CheckpointDeclined,
else the future of its `_metadata` once completed (CheckpointDeclined when it failed)."""


class Phase(StrEnum):
    IDLE = "idle"
    """No attempt's tasks run: before the first attempt, or after one ended without finishing."""
    RUNNING = "running"
    """Tasks run; periodic checkpoints."""
    FINAL_CHECKPOINT_DUE = "final-checkpoint-due"
    """Every task has reached end of data: the final checkpoint is triggered once nothing is pending."""
    FINAL_CHECKPOINT_PENDING = "final-checkpoint-pending"
    """The final checkpoint is triggered; its completion lets the waiting tasks close."""
    CLOSING = "closing"
    """The final checkpoint or the stop's savepoint completed: the tasks close; periodic checkpoints."""
    DRAINING = "draining"
    """A TERMINATE stop: the sources were told to stop with drain; its savepoint waits for every task."""
    SUSPENDING = "suspending"
    """A SUSPEND stop: the sources were told to stop without drain; its savepoint waits for every task."""
    STOP_SAVEPOINT_PENDING = "stop-savepoint-pending"
    """Every task has reached end of data after the stop: its savepoint is triggered."""
    STOP_FAILED = "stop-failed"
    """The stop's savepoint failed: the attempt is failing; the next restores the latest checkpoint."""
    FINISHED = "finished"
    """Every task finished: the job ends FINISHED."""


STOPPING = frozenset({Phase.DRAINING, Phase.SUSPENDING, Phase.STOP_SAVEPOINT_PENDING, Phase.STOP_FAILED})
_MAY_STOP = frozenset(
    {Phase.RUNNING, Phase.FINAL_CHECKPOINT_DUE, Phase.FINAL_CHECKPOINT_PENDING, Phase.CLOSING}
)
_PERIODIC = frozenset({Phase.RUNNING, Phase.CLOSING})
_HELD_BY_PENDING = frozenset({Phase.FINAL_CHECKPOINT_DUE, Phase.DRAINING, Phase.SUSPENDING})

LEGAL: dict[str, frozenset[Phase]] = {
    "attempt_started": frozenset({Phase.IDLE}),
    "request_stop": _MAY_STOP,
    "final_checkpoint_completed": frozenset({Phase.FINAL_CHECKPOINT_PENDING}),
    "final_checkpoint_failed": frozenset({Phase.FINAL_CHECKPOINT_PENDING}),
    "stop_savepoint_completed": frozenset({Phase.STOP_SAVEPOINT_PENDING}),
    "stop_savepoint_failed": frozenset({Phase.DRAINING, Phase.SUSPENDING, Phase.STOP_SAVEPOINT_PENDING}),
    "attempt_ended": frozenset(Phase) - {Phase.FINISHED},
}
"""The phases each event may happen in (a tick may happen in any)."""


class IllegalTransition(RuntimeError):
    """An event that cannot happen in the machine's phase: a bug in its caller, never a user's error."""

    def __init__(self, event: str, phase: Phase) -> None:
        super().__init__(f"finishing: {event} cannot happen in phase {phase}")
        self.event = event
        self.phase = phase


@dataclass
class StopRequest:
    mode: StopMode
    target_dir: str
    done: asyncio.Future[CheckpointMetadata]
    """The stop's savepoint once completed; RuntimeError saying why when the stop failed."""


class Finishing:
    """The coordinator's side of finishing over the whole job, one attempt after another."""

    def __init__(
        self,
        config: CheckpointConfig,
        *,
        trigger: TriggerCheckpoint,
        broadcast: Callable[[Stop], None],
        fail_attempt: Callable[[str], None],
    ) -> None:
        self._config = config
        self._trigger = trigger
        self._broadcast = broadcast
        self._fail_attempt = fail_attempt
        self.phase = Phase.IDLE
        self._stop: StopRequest | None = None
        """The stop under way, or this attempt's last one (its outcome is in `done`)."""
        self._periodic = PeriodicSchedule(config, 0.0)
        self._awaited: asyncio.Future[CheckpointMetadata] | None = None
        """The final checkpoint or the stop's savepoint this machine waits for."""

    @property
    def stopping(self) -> bool:
        """A stop-with-savepoint is under way (or its failure is ending the attempt)."""
        return self.phase in STOPPING

    @property
    def held_by_pending(self) -> bool:
        """The next step (the final checkpoint, or the stop's savepoint once every task has ended)
        waits only for the pending checkpoint to settle."""
        return self.phase in _HELD_BY_PENDING

    def _enter(self, event: str, to: Phase) -> None:
        if self.phase not in LEGAL[event]:
            raise IllegalTransition(event, self.phase)
        log.debug("finishing: %s -> %s on %s", self.phase, to, event)
        self.phase = to

    # -- the attempt --------------------------------------------------------------------------------

    def attempt_started(self, now: float) -> None:
        """The attempt's tasks are deployed (at `now`, on the `time.monotonic()` clock)."""
        self._enter("attempt_started", Phase.RUNNING)
        self._periodic = PeriodicSchedule(self._config, now)
        self._awaited = None
        self._stop = None

    def attempt_ended(self, finished: bool, why: str) -> None:
        """The attempt ended; `finished`: every task finished. A stop still waiting fails with `why`."""
        waiting = self.phase in (Phase.DRAINING, Phase.SUSPENDING, Phase.STOP_SAVEPOINT_PENDING)
        self._enter("attempt_ended", Phase.FINISHED if finished else Phase.IDLE)
        self._awaited = None
        if waiting and self._stop is not None:
            self._settle_stop(error=why)

    # -- ticks ----------------------------------------------------------------------------------------

    def tick(self, now: float, progress: Progress) -> None:
        """Triggers what the rules say is due now (at most one checkpoint)."""
        ended = progress.all_reached_end and not progress.all_finished
        if self.phase is Phase.RUNNING and ended:
            self.phase = Phase.FINAL_CHECKPOINT_DUE
        if self.phase is Phase.FINAL_CHECKPOINT_DUE and not progress.quiet:
            self._trigger_final()
        elif self.phase in (Phase.DRAINING, Phase.SUSPENDING) and ended and not progress.pending:
            self._trigger_stop_savepoint()
        elif self.phase in _PERIODIC and self._periodic.due(now, progress):
            # Declined: recorded in the checkpoint history; the next one is due an interval later.
            with contextlib.suppress(CheckpointDeclined):
                self._trigger(CheckpointKind.CHECKPOINT, None, None)

    def _trigger_final(self) -> None:
        try:
            done = self._trigger(CheckpointKind.CHECKPOINT, None, None)
        except CheckpointDeclined:
            return  # recorded in the checkpoint history; the next tick triggers it again
        self.phase = Phase.FINAL_CHECKPOINT_PENDING
        self._await(done, self._final_settled)

    def _trigger_stop_savepoint(self) -> None:
        assert self._stop is not None
        try:
            done = self._trigger(CheckpointKind.SAVEPOINT, self._stop.target_dir, self._stop.mode)
        except CheckpointDeclined:
            self.stop_savepoint_failed("declined")
            return
        self.phase = Phase.STOP_SAVEPOINT_PENDING
        self._await(done, self._stop_savepoint_settled)

    def _await(
        self,
        done: asyncio.Future[CheckpointMetadata],
        settled: Callable[[asyncio.Future[CheckpointMetadata]], None],
    ) -> None:
        self._awaited = done

        def report(future: asyncio.Future[CheckpointMetadata]) -> None:
            if future is self._awaited:
                self._awaited = None
                settled(future)

        done.add_done_callback(report)

    # -- the final checkpoint -------------------------------------------------------------------------

    def _final_settled(self, future: asyncio.Future[CheckpointMetadata]) -> None:
        if future.cancelled() or future.exception() is not None:
            self.final_checkpoint_failed()
        else:
            self.final_checkpoint_completed()

    def final_checkpoint_completed(self) -> None:
        self._enter("final_checkpoint_completed", Phase.CLOSING)

    def final_checkpoint_failed(self) -> None:
        self._enter("final_checkpoint_failed", Phase.FINAL_CHECKPOINT_DUE)

    # -- stop-with-savepoint --------------------------------------------------------------------------

    def request_stop(self, mode: StopMode, target_dir: str) -> asyncio.Future[CheckpointMetadata]:
        """Tells the sources to stop; the future gives the stop's savepoint (see the module docstring)."""
        self._enter("request_stop", Phase.DRAINING if mode is StopMode.TERMINATE else Phase.SUSPENDING)
        self._awaited = None  # a final checkpoint in flight no longer decides: the stop's savepoint will
        self._stop = StopRequest(mode, target_dir, asyncio.get_running_loop().create_future())
        self._broadcast(Stop(mode))
        return self._stop.done

    def _stop_savepoint_settled(self, future: asyncio.Future[CheckpointMetadata]) -> None:
        if future.cancelled():
            self.stop_savepoint_failed("declined")
        elif (err := future.exception()) is not None:
            self.stop_savepoint_failed(str(err))
        else:
            self.stop_savepoint_completed(future.result())

    def stop_savepoint_completed(self, metadata: CheckpointMetadata) -> None:
        self._enter("stop_savepoint_completed", Phase.CLOSING)
        self._settle_stop(savepoint=metadata)

    def stop_savepoint_failed(self, reason: str) -> None:
        self._enter("stop_savepoint_failed", Phase.STOP_FAILED)
        self._settle_stop(error=reason)
        # The sources have stopped already: go back to running from the latest checkpoint.
        self._fail_attempt(f"stop-with-savepoint failed ({reason}); resuming")

    def _settle_stop(self, savepoint: CheckpointMetadata | None = None, error: str | None = None) -> None:
        assert self._stop is not None
        done = self._stop.done
        if done.done():
            return
        if savepoint is not None:
            done.set_result(savepoint)
        else:
            done.set_exception(RuntimeError(f"stop-with-savepoint failed: {error}"))

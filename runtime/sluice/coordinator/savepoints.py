"""Savepoints and stop-with-savepoint (FLIP-34): an object the job master owns and the REST API calls.

A request is checked first (`check`: a target directory, a RUNNING job, no stop under way), then the
target directory is probed for writing (so a bad target fails before anything stops), then checked again
(the job may have moved on during the probe). A savepoint is then triggered while the job runs. A stop
instead tells every source to stop: with drain (TERMINATE) tasks flush and finish, without (SUSPEND) they
just end. Once every task has reached end of data the job master's trigger decider says so, and the job
master calls `take_stop_savepoint`; when it completes, tasks close and the job ends FINISHED. If it fails,
the attempt fails, so the job master restarts the job from its latest checkpoint (the sources had
stopped), and the stop reports the error. A bounded input running out during the stop is no failure:
tasks that close on their own count as finished in the savepoint (checkpoint.coordinator), and if every
task closed first the attempt ends FINISHED and the stop fails saying so (`attempt_ended`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from sluice._states import CheckpointKind, JobState, StopMode
from sluice.checkpoint.coordinator import CheckpointDeclined
from sluice.checkpoint.decider import StopPhase
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.checkpoint.storage import CheckpointStorage
from sluice.coordinator._attempt_events import AttemptEvent, AttemptFailed, TasksFinished
from sluice.transport.messages import Stop

TriggerSavepoint = Callable[[CheckpointKind, str, StopMode | None], asyncio.Future[CheckpointMetadata]]
"""The job master's trigger: raises CheckpointDeclined, else the future of the completed `_metadata`."""


@dataclass(frozen=True)
class Savepoint:
    """A completed savepoint."""

    checkpoint_id: int
    path: str


class Refusal(StrEnum):
    NO_DIRECTORY = "no-directory"
    """A usage error: the request names no target and the job has no default savepoint directory."""
    NOT_RUNNING = "not-running"
    STOPPING = "stopping"


class SavepointRefused(Exception):
    """A savepoint cannot be taken now, or not without a target: nothing was triggered."""

    def __init__(self, refusal: Refusal, message: str) -> None:
        super().__init__(message)
        self.refusal = refusal


@dataclass
class StopRequest:
    mode: StopMode
    target_dir: str
    done: asyncio.Future[Savepoint]
    savepoint_triggered: bool = False
    request_id: str | None = None
    """The caller's id of the request (POST /v1/savepoints `requestId`), stored with the job's result."""


class Savepoints:
    def __init__(
        self,
        *,
        storage: CheckpointStorage,
        trigger: TriggerSavepoint,
        broadcast: Callable[[Stop], None],
        job_state: Callable[[], JobState],
        fail_attempt: Callable[[str], None],
        default_dir: str | None,
    ) -> None:
        self._storage = storage
        self._trigger = trigger
        self._broadcast = broadcast
        self._job_state = job_state
        self._fail_attempt = fail_attempt
        self._default_dir = default_dir
        self.last: str | None = None
        """The newest savepoint taken (a stored job result gives it too)."""
        self.stopped_with: str | None = None
        """The savepoint the job stopped with, if it ended that way (`last` may be older)."""
        self.stop_request_id: str | None = None
        """The request id of the stop that `stopped_with` completed, if its caller gave one."""
        self.stop_request: StopRequest | None = None

    @property
    def stop_phase(self) -> StopPhase:
        request = self.stop_request
        if request is None:
            return StopPhase.NONE
        return StopPhase.SAVEPOINT_TRIGGERED if request.savepoint_triggered else StopPhase.REQUESTED

    def check(self, target_dir: str | None) -> str:
        """The directory to write the savepoint under; SavepointRefused when none can be taken now."""
        target = target_dir or self._default_dir
        if not target:
            raise SavepointRefused(
                Refusal.NO_DIRECTORY,
                "no savepoint directory: pass targetDirectory / --savepoint-dir, "
                "or start the job with --savepoint-dir",
            )
        state = self._job_state()
        if state != JobState.RUNNING:
            raise SavepointRefused(Refusal.NOT_RUNNING, f"the job is {state}; savepoints need a RUNNING job")
        if self.stop_request is not None:
            raise SavepointRefused(
                Refusal.STOPPING, "the job is RUNNING and a stop-with-savepoint is in progress"
            )
        return target

    async def _checked_target(self, target_dir: str | None) -> str:
        target = self.check(target_dir)
        await asyncio.to_thread(self._storage.probe_writable, target)
        return self.check(target)

    async def take(self, target_dir: str | None) -> Savepoint:
        """Takes a savepoint while the job keeps running."""
        target = await self._checked_target(target_dir)
        try:
            done = self._trigger(CheckpointKind.SAVEPOINT, target, None)
        except CheckpointDeclined as err:
            raise RuntimeError(f"the savepoint was declined: {err}") from None
        metadata = await done
        self.last = metadata.location
        return Savepoint(metadata.checkpoint_id, metadata.location)

    async def stop(
        self, mode: StopMode, target_dir: str | None, *, request_id: str | None = None
    ) -> Savepoint:
        """Stops the sources, lets every task finish (TERMINATE) or just end (SUSPEND), takes the savepoint.

        The job then ends FINISHED. When the savepoint fails, the job is restarted from its latest
        checkpoint and keeps running; the error is raised. `request_id` is kept as `stop_request_id`
        once the savepoint completed.
        """
        target = await self._checked_target(target_dir)
        future = asyncio.get_running_loop().create_future()
        request = StopRequest(mode, target, future, request_id=request_id)
        self.stop_request = request
        self._broadcast(Stop(mode))
        try:
            return await request.done
        finally:
            self.stop_request = None

    def take_stop_savepoint(self) -> None:
        """Every task has reached end of data after the stop, and no checkpoint is pending (see
        checkpoint.decider): the stop's savepoint now."""
        request = self.stop_request
        assert request is not None and not request.savepoint_triggered
        request.savepoint_triggered = True
        try:
            done = self._trigger(CheckpointKind.SAVEPOINT, request.target_dir, request.mode)
        except CheckpointDeclined:
            self._stop_failed(request, "declined")
            return

        def settle(future: asyncio.Future[CheckpointMetadata]) -> None:
            if request.done.done():
                return
            if future.cancelled() or future.exception() is not None:
                self._stop_failed(request, "declined" if future.cancelled() else str(future.exception()))
                return
            metadata = future.result()
            self.last = self.stopped_with = metadata.location
            self.stop_request_id = request.request_id
            request.done.set_result(Savepoint(metadata.checkpoint_id, metadata.location))

        done.add_done_callback(settle)

    def _stop_failed(self, request: StopRequest, reason: str) -> None:
        if request.done.done():
            return
        request.done.set_exception(RuntimeError(f"stop-with-savepoint failed: {reason}"))
        # The sources have stopped already: go back to running from the latest checkpoint.
        self._fail_attempt(f"stop-with-savepoint failed ({reason}); resuming")

    def attempt_ended(self, event: AttemptEvent) -> None:
        """The attempt ended: a stop whose savepoint has not completed fails, saying why."""
        request = self.stop_request
        if request is None or request.done.done():
            return
        if isinstance(event, TasksFinished):
            # The input ran out as the stop was asked for: the job is FINISHED, its final checkpoint
            # committed every output, and there is nothing left to stop (FLIP-147).
            reason = (
                "the job finished before the savepoint completed: every task reached the end of its "
                "input, and the final checkpoint committed the output"
            )
        elif isinstance(event, AttemptFailed):
            reason = f"the job attempt failed before the savepoint completed: {event.reason}"
        else:
            reason = f"the job was {event.state.lower()} before the savepoint completed: {event.reason}"
        request.done.set_exception(RuntimeError(f"stop-with-savepoint failed: {reason}"))

"""Savepoints and stop-with-savepoint (FLIP-34): the requests the REST API hands the job master.

A request is checked first (`check`: a target directory, a RUNNING job, no stop under way), then the
target directory is probed for writing (so a bad target fails before anything stops), then checked again
(the job may have moved on during the probe). A savepoint is then triggered while the job runs. A stop
is handed to the finishing state machine (`sluice.checkpoint.finishing`), which tells the sources to
stop, takes the stop's savepoint once every task has reached end of data, and says how the stop ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from sluice._states import CheckpointKind, JobState, StopMode
from sluice.checkpoint.coordinator import CheckpointDeclined
from sluice.checkpoint.finishing import Finishing, TriggerCheckpoint
from sluice.checkpoint.storage import CheckpointStorage


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


class Savepoints:
    def __init__(
        self,
        *,
        storage: CheckpointStorage,
        trigger: TriggerCheckpoint,
        finishing: Finishing,
        job_state: Callable[[], JobState],
        default_dir: str | None,
    ) -> None:
        self._storage = storage
        self._trigger = trigger
        self._finishing = finishing
        self._job_state = job_state
        self._default_dir = default_dir
        self.last: str | None = None
        """The newest savepoint taken (a stored job result gives it too)."""
        self.stopped_with: str | None = None
        """The savepoint the job stopped with, if it ended that way (`last` may be older)."""
        self.stop_request_id: str | None = None
        """The request id of the stop that `stopped_with` completed, if its caller gave one."""

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
        if self._finishing.stopping:
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
        metadata = await self._finishing.request_stop(mode, target)
        self.last = self.stopped_with = metadata.location
        self.stop_request_id = request_id
        return Savepoint(metadata.checkpoint_id, metadata.location)

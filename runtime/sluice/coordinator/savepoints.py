"""Savepoints and stop-with-savepoint (FLIP-34), as operations of the job master.

A stop first checks that the target directory can be written (so a bad target fails before anything
stops), then tells every source to stop: with drain (TERMINATE) tasks flush and finish, without (SUSPEND)
they just end. Once every task has reached end of data, the savepoint is triggered; when it completes,
tasks close and the job ends FINISHED. If it fails, the job master restarts the job from its latest
checkpoint (the sources had stopped) and the stop reports the error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from sluice._states import CheckpointKind, JobState, StopMode
from sluice.checkpoint.coordinator import CheckpointCoordinator
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.checkpoint.storage import CheckpointStorage
from sluice.coordinator.control import ControlServer
from sluice.transport.messages import Stop


@dataclass
class StopRequest:
    mode: StopMode
    target_dir: str
    done: asyncio.Future[str]
    savepoint_triggered: bool = False


class SavepointOperations:
    """Mixed into the job master; uses only the members declared here."""

    state: JobState
    storage: CheckpointStorage
    checkpoints: CheckpointCoordinator
    last_savepoint: str | None
    stop_savepoint: str | None
    stop_request: StopRequest | None
    _control: ControlServer
    _events: asyncio.Queue[tuple[str, str | None]]
    _default_savepoint_dir: str | None
    _trigger: Callable[..., asyncio.Future[CheckpointMetadata] | None]

    async def trigger_savepoint(self, target_dir: str | None) -> str:
        """Takes a savepoint while the job keeps running; returns its path."""
        target = self._savepoint_target(target_dir)
        await asyncio.to_thread(self.storage.probe_writable, target)
        if self.state != JobState.RUNNING:
            raise RuntimeError(f"the job is {self.state}, a savepoint needs it RUNNING")
        done = self._trigger(CheckpointKind.SAVEPOINT, target)
        if done is None:
            why = self.checkpoints.history[-1].error or ""
            raise RuntimeError(f"the savepoint was declined: {why}")
        metadata = await done
        self.last_savepoint = metadata.location
        return metadata.location

    def _savepoint_target(self, target_dir: str | None) -> str:
        target = target_dir or self._default_savepoint_dir
        if not target:
            raise ValueError(
                "no savepoint directory: pass targetDirectory / --savepoint-dir, "
                "or start the job with --savepoint-dir"
            )
        return target

    async def stop_with_savepoint(self, mode: StopMode, target_dir: str | None) -> str:
        """Stops the sources, lets every task finish (TERMINATE) or just end (SUSPEND), takes the savepoint.

        The job then ends FINISHED. When the savepoint fails, the job is restarted from its latest
        checkpoint and keeps running; the error is raised.
        """
        target = self._savepoint_target(target_dir)
        await asyncio.to_thread(self.storage.probe_writable, target)
        if self.state != JobState.RUNNING or self.stop_request is not None:
            raise RuntimeError(
                f"the job is {self.state}{' and already stopping' if self.stop_request else ''}"
            )
        request = StopRequest(mode, target, asyncio.get_running_loop().create_future())
        self.stop_request = request
        self._control.broadcast(Stop(mode))
        try:
            return await request.done
        finally:
            self.stop_request = None

    def _take_stop_savepoint(self) -> None:
        request = self.stop_request
        assert request is not None
        request.savepoint_triggered = True
        done = self._trigger(CheckpointKind.SAVEPOINT, request.target_dir, request.mode)

        def settle(future: asyncio.Future[CheckpointMetadata] | None) -> None:
            if request.done.done():
                return
            if future is None or future.cancelled() or future.exception() is not None:
                reason = "declined" if future is None or future.cancelled() else str(future.exception())
                request.done.set_exception(RuntimeError(f"stop-with-savepoint failed: {reason}"))
                # The sources have stopped already: go back to running from the latest checkpoint.
                self._events.put_nowait(("failed", f"stop-with-savepoint failed ({reason}); resuming"))
                return
            location = future.result().location
            self.last_savepoint = self.stop_savepoint = location
            request.done.set_result(location)

        if done is None:
            settle(None)
        else:
            done.add_done_callback(settle)

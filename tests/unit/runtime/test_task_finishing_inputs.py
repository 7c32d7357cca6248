"""A finished task keeps reading its inputs until each has delivered EndOfPartition.

The upstream of a task may still send events after the task's own final checkpoint completed: the
barrier of a later checkpoint (the upstream's own final one), then its EndOfPartition. A sender that
finds the input queue full waits for room, so a task that stopped reading once its final checkpoint
completed left its upstream waiting for ever (seen as a job hanging with its source in END_OF_DATA and
one checkpoint in progress for ever). The chain is a stand-in: what is under test is the task's loop.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from sluice._states import SubtaskState
from sluice.engine.channels import InputChannel, InputGate
from sluice.engine.context import Metrics
from sluice.engine.events import CheckpointBarrier, EndOfData, EndOfPartition
from sluice.engine.task import StreamTask
from sluice.transport.messages import Complete, Message, TaskReport


class _Head:
    two_inputs = False

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        pass

    def process_watermark(self, timestamp: int) -> None:
        pass

    def process_idle(self, idle: bool) -> None:
        pass

    def end_input(self, edge: int) -> None:
        pass


class _Chain:
    """The operator chain of a sink with nothing to snapshot."""

    def __init__(self) -> None:
        self.vertex = SimpleNamespace(name="sink", id=1)
        self.head = _Head()
        self.writers: list[Any] = []
        self.finished_on_restore = False
        self.snapshots: list[int] = []

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def broadcast(self, event: Any) -> None:
        pass

    def snapshot(self, checkpoint_id: int, is_savepoint: bool, completed: int) -> list[Any]:
        self.snapshots.append(checkpoint_id)
        return []

    def notify_complete(self, checkpoint_id: int) -> None:
        pass

    def notify_aborted(self, checkpoint_id: int) -> None:
        pass

    def end_of_input(self, drain: bool, watermark_done: bool) -> None:
        pass

    def next_processing_timer(self) -> int | None:
        return None


def _states(reports: list[Message]) -> list[SubtaskState]:
    return [r.state for r in reports if isinstance(r, TaskReport)]


async def _deliver(channels: list[InputChannel], event: Any) -> None:
    # A bound on the wait, so that the old behaviour fails this test instead of hanging it.
    await asyncio.wait_for(asyncio.gather(*(c.put(event) for c in channels)), timeout=30)


def test_a_task_whose_final_checkpoint_completed_still_takes_the_events_its_upstream_sends() -> None:
    async def scenario() -> None:
        # Queues of one event: the smallest capacity the rate-based sizing gives a slow task.
        channels = [InputChannel(0, 0, capacity=1), InputChannel(1, 0, capacity=1)]
        chain = _Chain()
        reports: list[Message] = []
        task = StreamTask(chain, 0, InputGate(channels), [0, 0], reports.append, Metrics())  # type: ignore[arg-type]
        running = asyncio.create_task(task.run())

        await _deliver(channels, EndOfData(drain=True))
        await _deliver(channels, CheckpointBarrier(1, 0, "unused"))
        while chain.snapshots != [1]:
            await asyncio.sleep(0.01)
        task.post(Complete(1))  # the task's final checkpoint
        for _ in range(50):
            await asyncio.sleep(0.01)
        assert SubtaskState.FINISHED not in _states(reports), "finished before its inputs closed"

        # The upstream's own final checkpoint, then its end: both need the task to keep reading.
        await _deliver(channels, CheckpointBarrier(2, 0, "unused"))
        await _deliver(channels, EndOfPartition())
        await asyncio.wait_for(running, timeout=30)

        assert chain.snapshots == [1, 2]  # it took part in the upstream's final checkpoint too
        assert _states(reports)[-1] is SubtaskState.FINISHED

    asyncio.run(scenario())

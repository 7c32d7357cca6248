"""A subtask that closes while a checkpoint waits for its acknowledgement (sluice.checkpoint.coordinator).

Drained, it closed after a checkpoint that committed its output: the waiting checkpoint records it as
finished and completes (this is how the stop's savepoint completes when the input ran out as the stop
was asked for). Ended without drain (a SUSPEND stop), its state would be lost: the checkpoint fails.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from sluice._states import CheckpointKind, CheckpointStatus, StopMode
from sluice.checkpoint.coordinator import CheckpointConfig, CheckpointCoordinator, CheckpointDeclined
from sluice.checkpoint.storage import read_metadata, write_state_file
from sluice.transport.messages import Abort, ToTaskManager

from ._support import SOURCE_STATE, TEST_KEY, source_ack, source_coordinator


def _acknowledge(coord: CheckpointCoordinator, checkpoint: int, subtask: int) -> None:
    write_state_file(coord.storage.checkpoint_location(checkpoint), f"src-{subtask}.state", SOURCE_STATE)
    coord.on_ack(source_ack(checkpoint, subtask))


def test_a_drained_subtask_closing_is_recorded_finished_and_the_checkpoint_completes(tmp_path: Path) -> None:
    async def scenario() -> None:
        sent: list[ToTaskManager] = []
        coord = source_coordinator(tmp_path, sent)
        pending = coord.trigger()
        _acknowledge(coord, pending.checkpoint_id, 0)
        coord.on_task_finished((0, 1), drained=True)
        await coord.settle()

        assert coord.latest is not None and coord.latest.checkpoint_id == pending.checkpoint_id
        assert not any(isinstance(m, Abort) for m in sent)
        (source,) = read_metadata(coord.latest.path or "", TEST_KEY).operators
        assert (source.fully_finished, source.finished_subtasks) == (False, (1,))
        assert [handle.index for handle in source.subtasks] == [0]

    asyncio.run(scenario())


def test_the_stops_savepoint_completes_when_every_subtask_it_waits_for_closed_drained(tmp_path: Path) -> None:
    async def scenario() -> None:
        coord = source_coordinator(tmp_path, [])
        pending = coord.trigger(CheckpointKind.SAVEPOINT, f"file://{tmp_path / 'sp'}", StopMode.TERMINATE)
        coord.on_task_finished((0, 0), drained=True)
        coord.on_task_finished((0, 1), drained=True)
        await coord.settle()

        assert pending.done is not None and pending.done.done() and pending.done.exception() is None
        (source,) = pending.done.result().operators
        assert source.fully_finished  # nothing to run again from it

    asyncio.run(scenario())


def test_a_subtask_closing_without_drain_fails_the_checkpoint_fast(tmp_path: Path) -> None:
    async def scenario() -> None:
        sent: list[ToTaskManager] = []
        coord = source_coordinator(tmp_path, sent)
        pending = coord.trigger(CheckpointKind.SAVEPOINT, f"file://{tmp_path / 'sp'}", StopMode.SUSPEND)
        coord.on_task_finished((0, 1), drained=False)
        await coord.settle()

        assert coord.pending == {}
        assert pending.done is not None and isinstance(pending.done.exception(), CheckpointDeclined)
        assert coord.history[-1].status == CheckpointStatus.FAILED
        assert "src[1] finished before acknowledging" in (coord.history[-1].error or "")
        assert any(isinstance(m, Abort) for m in sent)

    asyncio.run(scenario())


def test_without_checkpoints_after_tasks_finish_a_closing_subtask_fails_the_checkpoint(
    tmp_path: Path,
) -> None:
    # Off, a task closes at its end without waiting for a checkpoint: its output may not be committed.
    async def scenario() -> None:
        coord = source_coordinator(tmp_path, [])
        coord.config = CheckpointConfig(interval_s=None, after_tasks_finish=False)
        coord.trigger()
        coord.on_task_finished((0, 0), drained=True)
        await coord.settle()

        assert coord.latest is None
        assert "finished before acknowledging" in (coord.history[-1].error or "")

    asyncio.run(scenario())

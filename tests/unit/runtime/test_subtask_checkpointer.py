"""The subtask's side of a checkpoint (`SubtaskCheckpointer`): the order of its steps, what it reports to
the coordinator, and when a task whose input ended may close (FLIP-147's final checkpoint).

The chain is a stand-in that records what it is asked; the state files are written for real.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from sluice.checkpoint.acknowledgement import Acknowledgement
from sluice.checkpoint.barrier import BarrierTiming, CancelCheckpoint, CheckpointBarrier
from sluice.checkpoint.snapshot import OperatorAck
from sluice.checkpoint.subtask import SubtaskCheckpointer
from sluice.transport.messages import STATE_WRITE, Decline

STATE = b"the operator's pickled state"


class _Chain:
    """Records every call, in order, as the checkpointer makes them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def broadcast(self, event: CheckpointBarrier | CancelCheckpoint, /) -> None:
        self.calls.append(("broadcast", event))

    def snapshot(self, checkpoint_id: int, savepoint: bool, completed: int, /) -> list[OperatorAck]:
        self.calls.append(("snapshot", checkpoint_id))
        return [OperatorAck("op", STATE, False, False, True, None, False)]

    def notify_complete(self, checkpoint_id: int, /) -> None:
        self.calls.append(("complete", checkpoint_id))

    def notify_aborted(self, checkpoint_id: int, /) -> None:
        self.calls.append(("aborted", checkpoint_id))


class _Subtask:
    def __init__(self, wait_for_final_checkpoint: bool = True) -> None:
        self.chain = _Chain()
        self.reports: list[Acknowledgement | Decline] = []
        self.checkpointer = SubtaskCheckpointer(
            self.chain, 4, 1, "map[1]", self.reports.append, self._flush, wait_for_final_checkpoint
        )

    async def _flush(self) -> None:
        self.chain.calls.append(("flush", None))

    async def checkpoint(self, checkpoint_id: int, location: str) -> None:
        barrier = CheckpointBarrier(checkpoint_id, 0, location)
        await self.checkpointer.checkpoint(barrier, BarrierTiming(1.0, 2.0))
        await self.checkpointer.wait_for_writes()


# Calls, not the attributes: mypy would keep an attribute narrowed across the calls that change it.


def _may_close(checkpointer: SubtaskCheckpointer) -> bool:
    return checkpointer.may_close


def _final(checkpointer: SubtaskCheckpointer) -> int | None:
    return checkpointer.final_checkpoint


def _location(tmp_path: Path, checkpoint_id: int) -> str:
    return f"file://{tmp_path / f'chk-{checkpoint_id}'}"


def test_the_barrier_goes_out_before_the_snapshot_and_the_ack_names_the_written_file(tmp_path: Path) -> None:
    subtask = _Subtask()
    asyncio.run(subtask.checkpoint(3, _location(tmp_path, 3)))

    barrier = CheckpointBarrier(3, 0, _location(tmp_path, 3))
    assert subtask.chain.calls == [("broadcast", barrier), ("snapshot", 3), ("flush", None)]
    [ack] = subtask.reports
    assert isinstance(ack, Acknowledgement)
    assert (ack.checkpoint, ack.vertex, ack.subtask, ack.end_of_data) == (3, 4, 1, False)
    assert (ack.start_delay_ms, ack.alignment_ms) == (1.0, 2.0)
    [operator] = ack.operators
    assert (operator.uid, operator.path, operator.size) == ("op", "op-1.state", len(STATE))
    assert operator.sha256 == hashlib.sha256(STATE).hexdigest()
    assert (tmp_path / "chk-3" / "op-1.state").read_bytes() == STATE


def test_a_state_write_that_fails_declines_the_checkpoint_as_a_counted_failure(tmp_path: Path) -> None:
    (tmp_path / "chk-2").write_text("a file where the checkpoint's directory should be")
    subtask = _Subtask()
    asyncio.run(subtask.checkpoint(2, _location(tmp_path, 2)))

    [decline] = subtask.reports
    assert isinstance(decline, Decline)
    assert (decline.checkpoint, decline.vertex, decline.subtask, decline.cause) == (2, 4, 1, STATE_WRITE)
    assert decline.reason.startswith("writing state of map[1] failed: ")


def test_giving_up_an_alignment_cancels_it_downstream_and_declines_it() -> None:
    subtask = _Subtask()
    subtask.checkpointer.decline_on_barrier(5, "a newer checkpoint's barrier arrived")

    assert subtask.chain.calls == [("broadcast", CancelCheckpoint(5))]
    assert subtask.reports == [Decline(5, 4, 1, "a newer checkpoint's barrier arrived")]


def test_the_first_checkpoint_after_the_end_of_input_is_final_and_its_completion_lets_the_task_close(
    tmp_path: Path,
) -> None:
    subtask = _Subtask()
    checkpointer = subtask.checkpointer
    asyncio.run(subtask.checkpoint(1, _location(tmp_path, 1)))
    checkpointer.on_end_of_input()
    asyncio.run(subtask.checkpoint(2, _location(tmp_path, 2)))
    assert _final(checkpointer) == 2

    # Checkpoint 1 was taken before the end: its completion commits, but does not cover the last data.
    checkpointer.notify_complete(1)
    assert not _may_close(checkpointer)
    checkpointer.notify_complete(2)
    assert _may_close(checkpointer)
    completed = [call for call in subtask.chain.calls if call[0] == "complete"]
    assert completed == [("complete", 1), ("complete", 2)]
    last = subtask.reports[-1]
    assert isinstance(last, Acknowledgement) and last.end_of_data


def test_an_aborted_final_checkpoint_does_not_count_and_the_next_one_is_final(tmp_path: Path) -> None:
    subtask = _Subtask()
    checkpointer = subtask.checkpointer
    checkpointer.on_end_of_input()
    asyncio.run(subtask.checkpoint(2, _location(tmp_path, 2)))
    checkpointer.notify_aborted(2)
    assert ("aborted", 2) in subtask.chain.calls
    assert _final(checkpointer) is None and not _may_close(checkpointer)

    asyncio.run(subtask.checkpoint(3, _location(tmp_path, 3)))
    assert _final(checkpointer) == 3
    checkpointer.notify_complete(3)
    assert _may_close(checkpointer)


def test_a_later_checkpoint_completing_covers_the_final_one(tmp_path: Path) -> None:
    subtask = _Subtask()
    checkpointer = subtask.checkpointer
    checkpointer.on_end_of_input()
    asyncio.run(subtask.checkpoint(2, _location(tmp_path, 2)))
    asyncio.run(subtask.checkpoint(3, _location(tmp_path, 3)))
    assert _final(checkpointer) == 2
    checkpointer.notify_complete(3)  # checkpoint 2 was subsumed: 3 holds all that 2 did, and more
    assert _may_close(checkpointer)


def test_an_aborted_checkpoint_other_than_the_final_one_leaves_it_final(tmp_path: Path) -> None:
    subtask = _Subtask()
    checkpointer = subtask.checkpointer
    checkpointer.on_end_of_input()
    asyncio.run(subtask.checkpoint(2, _location(tmp_path, 2)))
    checkpointer.notify_aborted(1)
    assert _final(checkpointer) == 2


def test_without_checkpoints_after_finished_tasks_the_task_may_close_at_its_end_of_input() -> None:
    subtask = _Subtask(wait_for_final_checkpoint=False)
    assert not _may_close(subtask.checkpointer)
    subtask.checkpointer.on_end_of_input()
    assert _may_close(subtask.checkpointer)

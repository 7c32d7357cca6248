"""The subtask's side of a checkpoint, as Flink's SubtaskCheckpointCoordinator: snapshot, write,
acknowledge, and what the coordinator's notifications mean for the chain and for finishing.

The task (`sluice.engine.task.StreamTask`) keeps the mailbox and the inputs. It hands a barrier to its
`SubtaskCheckpointer` once it may checkpoint: a subtask the coordinator triggers directly when the
trigger comes (a source), any other once the barrier has aligned on every open input channel (see
`sluice.engine._alignment`). It passes on the coordinator's notifications as they come out of the
mailbox, and says when its input ended. The steps, in order:

Taking a checkpoint (`checkpoint`), on the task's thread, no record processed in between:
  1. forward the barrier to every output, so that it goes downstream ahead of any later record;
  2. snapshot every operator of the chain synchronously (a pickle: a copy; a keyed state backend
     freezes its tables, copy-on-write) and time it: that is all that holds up record processing;
  3. note the task's final checkpoint (FLIP-147): the first one taken after its input ended;
  4. start writing the state, beside processing, and flush the outputs (the barrier leaves now).
Beside processing (`_write_and_ack`):
  5. write each operator's state files under the checkpoint's location, then release the frozen
     keyed tables (they take the writes made meanwhile);
  6. acknowledge to the coordinator: each operator's files, sizes and digests, whether it finished,
     the timings. A write that fails declines the checkpoint instead (a failure the coordinator counts).
Giving up an alignment (`decline_on_barrier`, a newer barrier overtook it): `CancelCheckpoint` to every
output, so that downstream stops waiting for the barrier, and a decline to the coordinator.
Notifications from the coordinator:
  7. complete: every operator of the chain learns it (two-phase-commit sinks commit). Once the final
     checkpoint, or a later one, has completed, the task may close (`may_close`): the output it sent
     before its end of input is committed;
  8. abort: every operator learns it (sinks drop what they prepared). An aborted final checkpoint
     does not count: the next checkpoint taken is the final one.
Closing: the task waits for every state write in flight (`wait_for_writes`) before closing its chain.

With checkpoints after finished tasks switched off (`wait_for_final_checkpoint=False`, as before
FLIP-147), a task may close as soon as its input ended.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from sluice.checkpoint.acknowledgement import AckedOperator, Acknowledgement
from sluice.checkpoint.barrier import BarrierTiming, CancelCheckpoint, CheckpointBarrier
from sluice.checkpoint.snapshot import OperatorAck
from sluice.checkpoint.storage import write_state_file
from sluice.state.chain_files import KeyedFile
from sluice.transport.messages import STATE_WRITE, Decline

Report = Callable[[Acknowledgement | Decline], None]
"""Sends a message to the coordinator."""


class SnapshottingChain(Protocol):
    """What the checkpointer needs of a task's operator chain (`sluice.engine.chain.OperatorChain`)."""

    def broadcast(self, event: CheckpointBarrier | CancelCheckpoint, /) -> None: ...

    def snapshot(self, checkpoint_id: int, savepoint: bool, completed: int, /) -> list[OperatorAck]: ...

    def notify_complete(self, checkpoint_id: int, /) -> None: ...

    def notify_aborted(self, checkpoint_id: int, /) -> None: ...


class SubtaskCheckpointer:
    """One subtask's checkpoints: the steps of the module docstring, and whether the task may close."""

    def __init__(
        self,
        chain: SnapshottingChain,
        vertex: int,
        subtask_index: int,
        name: str,
        report: Report,
        flush: Callable[[], Awaitable[None]],
        wait_for_final_checkpoint: bool = True,
    ) -> None:
        self._chain = chain
        self._vertex = vertex
        self._subtask_index = subtask_index
        self._name = name
        """`vertex name[subtask index]`, for messages."""
        self._report = report
        self._flush = flush
        """Flushes every output of the task (the barrier leaves with what precedes it)."""
        self._wait_for_final_checkpoint = wait_for_final_checkpoint
        self._input_ended = False
        self.final_checkpoint: int | None = None
        """The first checkpoint taken after the input ended, until it completes or is aborted."""
        self.may_close = False
        """The input ended and the final checkpoint (or a later one) completed: nothing is left to commit.
        A plain attribute: the task's loop reads it at every turn."""
        self._writes: set[asyncio.Task[None]] = set()

    def on_end_of_input(self) -> None:
        """The task's input ended (with or without drain): the next checkpoint it takes is its final one."""
        self._input_ended = True
        if not self._wait_for_final_checkpoint:
            self.may_close = True

    async def checkpoint(self, barrier: CheckpointBarrier, timing: BarrierTiming) -> None:
        """Steps 1-4: the barrier goes out, the chain is snapshot, its state is written beside processing."""
        cid = barrier.checkpoint_id
        self._chain.broadcast(barrier)
        started = time.perf_counter()
        acks = self._chain.snapshot(cid, barrier.is_savepoint, barrier.completed)
        sync_ms = (time.perf_counter() - started) * 1000
        if self._input_ended and self.final_checkpoint is None:
            self.final_checkpoint = cid
        write = asyncio.create_task(self._write_and_ack(cid, acks, barrier.location, timing, sync_ms))
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)
        await self._flush()

    def decline_on_barrier(self, checkpoint_id: int, why: str) -> None:
        """Gives up a checkpoint whose alignment cannot complete here."""
        self._chain.broadcast(CancelCheckpoint(checkpoint_id))
        self._report(Decline(checkpoint_id, self._vertex, self._subtask_index, why))

    def notify_complete(self, checkpoint_id: int) -> None:
        """Step 7."""
        self._chain.notify_complete(checkpoint_id)
        final = self.final_checkpoint
        if self._input_ended and final is not None and checkpoint_id >= final:
            self.may_close = True

    def notify_aborted(self, checkpoint_id: int) -> None:
        """Step 8."""
        self._chain.notify_aborted(checkpoint_id)
        if self.final_checkpoint == checkpoint_id:
            self.final_checkpoint = None

    async def wait_for_writes(self) -> None:
        """Returns once every state write started has acknowledged or declined its checkpoint."""
        if self._writes:
            await asyncio.gather(*self._writes)

    async def _write_and_ack(
        self, cid: int, acks: list[OperatorAck], target: str, timing: BarrierTiming, sync_ms: float
    ) -> None:
        """Steps 5 and 6."""
        started = time.perf_counter()
        operators = []
        try:
            for ack in acks:
                operators.append(await self._write_operator(ack, target))
        except Exception as err:
            why = f"writing state of {self._name} failed: {type(err).__name__}: {err}"
            self._report(Decline(cid, self._vertex, self._subtask_index, why, STATE_WRITE))
            return
        finally:
            # Back on the task's thread: the frozen keyed state takes the writes made meanwhile.
            for ack in acks:
                if ack.keyed is not None:
                    ack.keyed.release()
        acknowledgement = Acknowledgement(
            cid,
            self._vertex,
            self._subtask_index,
            tuple(operators),
            self._input_ended,
            sync_ms=round(sync_ms, 3),
            async_ms=round((time.perf_counter() - started) * 1000, 3),
            start_delay_ms=timing.start_delay_ms,
            alignment_ms=timing.alignment_ms,
        )
        self._report(acknowledgement)

    async def _write_operator(self, ack: OperatorAck, target: str) -> AckedOperator:
        """Writes one operator's state files for the checkpoint; returns what the coordinator learns."""
        path, size, digest = None, 0, None
        if ack.data is not None:
            path = f"{ack.uid}-{self._subtask_index}.state"
            size, digest = await asyncio.to_thread(write_state_file, target, path, ack.data)
        chain: tuple[KeyedFile, ...] = ()
        protected: tuple[str, ...] = ()
        written = state_size = size
        if ack.keyed is not None:
            keyed = await asyncio.to_thread(ack.keyed.write, target, f"{ack.uid}-{self._subtask_index}")
            ack.keyed.written(keyed)
            chain = tuple(keyed.chain)
            protected = tuple(keyed.protected)
            written += keyed.written
            state_size += keyed.state_size
        return AckedOperator(
            uid=ack.uid,
            finished=ack.finished,
            path=path,
            size=size,
            key_groups=ack.key_groups or None,
            operator_state=ack.operator_state,
            union=ack.union,
            pending_commits=ack.pending_commits,
            keyed_files=chain,
            protected_files=protected,
            bytes_written=written,
            state_size=state_size,
            sha256=digest,
        )

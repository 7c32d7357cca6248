"""One subtask: runs its operator chain over its inputs (or its source) and takes part in checkpoints.

The task owns the mailbox (the coordinator's messages) and the inputs (records, watermarks, barriers
and their alignment, end of data). Its side of each checkpoint, from the aligned barrier to the
acknowledgement and the notifications, is its `SubtaskCheckpointer` (`sluice.checkpoint.subtask`),
which also tells when the final checkpoint has completed.

Finishing (FLIP-147), for a source that ran out, a stop-with-savepoint, or a task whose inputs all
delivered EndOfData:
  1. with drain: MAX_WATERMARK, end_input and finish on every operator; without drain neither;
     then EndOfData(drain) to every output, and END_OF_DATA reported to the coordinator;
  2. keep taking part in checkpoints until the first checkpoint taken after step 1 completes
     (that is the final checkpoint or the stop's savepoint; if it fails, the next one), and until
     every input delivered EndOfPartition;
  3. close every operator, send EndOfPartition, report FINISHED and exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

from sluice._states import SubtaskState
from sluice._waiting import wait_event
from sluice.checkpoint.barrier import BarrierTiming
from sluice.checkpoint.subtask import SubtaskCheckpointer
from sluice.engine._alignment import AlignmentResult, BarrierAligner
from sluice.engine._failure_context import failure_report
from sluice.engine._rate import TokenBucket
from sluice.engine._watermarks import WatermarkValve
from sluice.engine.chain import OperatorChain
from sluice.engine.channels import InputGate
from sluice.engine.context import Metrics, processing_time_ms
from sluice.engine.events import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    CancelCheckpoint,
    CheckpointBarrier,
    EndOfData,
    EndOfPartition,
    RecordBatch,
    Watermark,
    WatermarkStatus,
)
from sluice.engine.operators.source import SourceOperator
from sluice.engine.writer import BATCH_SIZE
from sluice.transport.messages import Abort, Complete, Message, Stop, TaskReport, Trigger

Report = Callable[[Message], None]

SOURCE_BATCH = 4 * BATCH_SIZE
"""Records a source emits per read: its chain runs them as one batch and a generated watermark follows
each read, so a larger read means fewer watermarks and fewer, fuller batches on every channel (a
watermark seals the batch ahead of it); the writer still cuts them into channel batches of at most
BATCH_SIZE."""


TaskMessage = Trigger | Complete | Abort | Stop
"""The control messages a TaskManager relays to its subtasks, as the coordinator sent them: one
vocabulary carries a checkpoint from the coordinator to the task, where the barrier takes over."""


class StreamTask:
    def __init__(
        self,
        chain: OperatorChain,
        subtask_index: int,
        gate: InputGate | None,
        input_edges: list[int],
        report: Report,
        metrics: Metrics,
        rate: float | None = None,
        wait_for_final_checkpoint: bool = True,
    ) -> None:
        self.chain = chain
        self.vertex = chain.vertex
        self.subtask_index = subtask_index
        self.gate = gate
        self.input_edges = input_edges
        """Input edge index of each input channel."""
        self.report = report
        self.metrics = metrics
        self.rate = rate
        self.checkpointer = SubtaskCheckpointer(
            chain,
            self.vertex.id,
            subtask_index,
            f"{self.vertex.name}[{subtask_index}]",
            report,
            lambda: self._flush(True),
            # Off (checkpoints-after-tasks-finish disabled): end right after end of data, as before FLIP-147.
            wait_for_final_checkpoint,
        )
        self.mailbox: deque[TaskMessage] = deque()
        self.wakeup = asyncio.Event()
        channels = len(input_edges)
        self.aligner = BarrierAligner(channels)
        self.valve = WatermarkValve(channels)
        self._ended_channels: set[int] = set()
        self._drains: list[bool] = []
        self.end_of_data = False
        self._idle_rounds = 0
        self._source = chain.head if isinstance(chain.head, SourceOperator) else None
        self._two_inputs = chain.head.two_inputs
        self._sides = [self.vertex.inputs[edge].side for edge in input_edges] if self._two_inputs else []
        """Which input of a two-input head each channel feeds."""
        metrics.probe = self._probe
        for writer in chain.writers:
            writer.time_waits(metrics.backpressure)

    def is_done(self) -> bool:
        """The final checkpoint completed and every input delivered EndOfPartition: the task closes now.

        Until its last input closes, a finished task keeps taking events (later barriers, the
        EndOfPartition itself): its upstream may still send them, and a sender that finds the queue
        full waits for room (for credit, on a remote channel). A task that stopped reading once its
        own final checkpoint completed left such a sender waiting for ever, and the job with it.
        """
        gate = self.gate
        return self.checkpointer.may_close and (gate is None or len(gate.closed) == len(gate.channels))

    # -- messages from the coordinator ------------------------------------------------------------

    def post(self, message: TaskMessage) -> None:
        self.mailbox.append(message)
        self.wakeup.set()
        if self.gate is not None:
            self.gate.notify()

    def _probe(self) -> tuple[int | None, int, int]:
        """Input watermark (None before the first one) and input queue fill, for a heartbeat."""
        if self.gate is None:
            return None, 0, 0
        watermark = self.valve.current
        return (None if watermark == MIN_WATERMARK else watermark), *self.gate.fill()

    def _state(
        self,
        state: SubtaskState,
        error: str | None = None,
        trace: str | None = None,
        drain: bool | None = None,
        storage: bool | None = None,
    ) -> None:
        if state in (SubtaskState.FINISHED, SubtaskState.FAILED):
            self.metrics.ended()
        self.report(TaskReport(self.vertex.id, self.subtask_index, state, error, trace, drain, storage))

    # -- the main loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            self.chain.open()
            self._state(SubtaskState.RUNNING)
            if self.chain.finished_on_restore:
                await self._finished_on_restore()
            else:
                await self._loop()
            await self.checkpointer.wait_for_writes()
            self.chain.close()
            self.chain.broadcast(EndOfPartition())
            await self._flush(True)
            for writer in self.chain.writers:
                await writer.close()
            self._state(SubtaskState.FINISHED)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                self.chain.close()
            raise
        except Exception as err:
            error, storage = failure_report(err, self)  # before close(): a source's readers say where
            with contextlib.suppress(Exception):
                self.chain.close()
            self._state(SubtaskState.FAILED, error=error, trace=traceback.format_exc(), storage=storage)

    async def _finished_on_restore(self) -> None:
        # Every operator of this chain finished before the checkpoint: nothing runs again; downstream
        # only needs to learn that this input has ended.
        self.chain.broadcast(Watermark(MAX_WATERMARK))
        self.chain.broadcast(EndOfData(drain=True))
        self.end_of_data = True
        self._state(SubtaskState.END_OF_DATA)
        await self._flush(True)

    async def _loop(self) -> None:
        source, gate = self._source, self.gate
        bucket = TokenBucket(self.rate) if self.rate is not None else None
        while not self.is_done():
            busy = False
            if self.mailbox:
                await self._handle_mailbox()
                if self.is_done():
                    break
            if source is not None and not self.end_of_data:
                busy = await self._read_source(source, bucket)
            if gate is not None:
                polled = gate.poll()
                if polled is not None:
                    await self._dispatch(*polled)
                    busy = True
            self._fire_processing_timers()
            if busy:
                self._idle_rounds = 0
                if any(w.has_full_batches() for w in self.chain.writers):
                    await self._flush(False)
                await asyncio.sleep(0)
                continue
            await self._flush(True)
            if self.is_done():
                break
            self._idle_rounds += 1
            await self._idle_wait(source, bucket)

    async def _read_source(self, source: SourceOperator, bucket: TokenBucket | None) -> bool:
        """Emits what the source has, as far as its rate allows; whether it emitted anything."""
        batch = SOURCE_BATCH if bucket is None else bucket.allowance(SOURCE_BATCH)
        if batch <= 0:
            return False
        emitted = source.emit_next(batch)
        if emitted < 0:
            await self._end_of_data(drain=True)
            return False
        if bucket is not None:
            bucket.spend(emitted)
        self.metrics.records_in += emitted
        return emitted > 0

    async def _idle_wait(self, source: SourceOperator | None, bucket: TokenBucket | None) -> None:
        timeout: float | None = 1.0
        timer = self.chain.next_processing_timer()
        if timer is not None:
            timeout = max(0.0, min(1.0, (timer - processing_time_ms()) / 1000))
        if source is not None and not self.end_of_data:
            # A source is polled; one that keeps having nothing is polled less and less often (up to
            # every 50 ms) rather than spinning on an empty split.
            backoff = min(0.05, 0.001 * 2 ** min(self._idle_rounds, 6))
            poll = (
                backoff
                if bucket is None
                else max(backoff, min(BATCH_SIZE / bucket.rate / 4, bucket.refill_seconds()))
            )
            timeout = min(timeout or 1.0, poll)
        idle = self.metrics.idle
        idle.start()
        try:
            if self.gate is not None:
                await self.gate.wait(timeout)
            else:
                self.wakeup.clear()
                if not self.mailbox:
                    await wait_event(self.wakeup, timeout)
        finally:
            idle.stop()

    def _fire_processing_timers(self) -> None:
        timer = self.chain.next_processing_timer()
        if timer is not None:
            now = processing_time_ms()
            if timer <= now:
                self.chain.on_processing_time(now)

    async def _flush(self, partial: bool) -> None:
        for writer in self.chain.writers:
            await writer.flush(partial)

    # -- input events -------------------------------------------------------------------------------

    async def _dispatch(self, channel: int, event: Any) -> None:
        kind = type(event)
        if kind is RecordBatch:
            self.metrics.records_in += len(event.values)
            if self._two_inputs:
                self.chain.head.process_input(self._sides[channel], event.values, event.timestamps)
            else:
                self.chain.head.process_batch(event.values, event.timestamps)
        elif kind is Watermark:
            advanced = self.valve.on_watermark(channel, event.timestamp)
            self._pass_on_time(advanced)
        elif kind is WatermarkStatus:
            advanced = self.valve.on_status(channel, event.idle)
            self._pass_on_time(advanced)
        elif kind is CheckpointBarrier:
            await self._on_barrier(channel, event)
        elif kind is CancelCheckpoint:
            self._on_cancel(event)
        elif kind is EndOfData:
            await self._on_end_of_data(channel, event.drain)
        elif kind is EndOfPartition:
            await self._on_end_of_partition(channel)

    async def _on_barrier(self, channel: int, barrier: CheckpointBarrier) -> None:
        result = self.aligner.on_barrier(channel, barrier)
        if result.aborted is not None:
            self._abort_alignment(result.aborted, "a newer checkpoint's barrier arrived")
        await self._checkpoint_if_aligned(result)
        self._sync_blocked()

    def _on_cancel(self, cancel: CancelCheckpoint) -> None:
        if self.aligner.on_cancel(cancel.checkpoint_id):
            self._sync_blocked()
        self.chain.broadcast(cancel)

    def _pass_on_time(self, advanced: int | None) -> None:
        # Becoming active goes first, so downstream counts this input again before its watermark.
        changed = self.valve.idleness_changed()
        if changed is False:
            self.chain.head.process_idle(False)
        if advanced is not None:
            self.chain.head.process_watermark(advanced)
        if changed is True:
            self.chain.head.process_idle(True)

    def _sync_blocked(self) -> None:
        assert self.gate is not None
        self.gate.blocked = set(self.aligner.blocked)

    async def _on_end_of_data(self, channel: int, drain: bool) -> None:
        self._ended_channels.add(channel)
        self._drains.append(drain)
        if self._two_inputs:
            # One input of a connect or a join ended (a bounded dimension or rules input, say); the
            # operator runs on with the other, and keeps what the ended one gave it (FLIP-147).
            side = self._sides[channel]
            if drain and all(c in self._ended_channels for c, s in enumerate(self._sides) if s == side):
                self.chain.head.end_input(side)
        else:
            edge = self.input_edges[channel]
            if drain and all(c in self._ended_channels for c, e in enumerate(self.input_edges) if e == edge):
                self.chain.head.end_input(edge)
        if len(self._ended_channels) == len(self.input_edges):
            await self._end_of_data(drain=all(self._drains))

    async def _on_end_of_partition(self, channel: int) -> None:
        assert self.gate is not None
        if channel not in self._ended_channels:
            raise RuntimeError(
                f"input channel {channel} of {self.vertex.name}[{self.subtask_index}] ended without EndOfData"
            )
        self.gate.closed.add(channel)
        self.gate.blocked.discard(channel)
        advanced = self.valve.on_closed(channel)
        if advanced is not None and not self.end_of_data:
            self.chain.head.process_watermark(advanced)
        await self._checkpoint_if_aligned(self.aligner.on_channel_closed(channel))
        self._sync_blocked()

    # -- finishing ----------------------------------------------------------------------------------

    async def _end_of_data(self, drain: bool) -> None:
        if self.end_of_data:
            return
        self.chain.end_of_input(drain, watermark_done=self.valve.current == MAX_WATERMARK)
        self.chain.broadcast(EndOfData(drain=drain))
        await self._flush(True)
        self.end_of_data = True
        self.checkpointer.on_end_of_input()
        self._state(SubtaskState.END_OF_DATA, drain=drain)

    # -- the mailbox: checkpoints and stops ----------------------------------------------------------

    async def _handle_mailbox(self) -> None:
        while self.mailbox:
            message = self.mailbox.popleft()
            if isinstance(message, Trigger):
                await self._on_trigger(message)
            elif isinstance(message, Complete):
                self.checkpointer.notify_complete(message.checkpoint)
            elif isinstance(message, Abort):
                if self.aligner.on_cancel(message.checkpoint) and self.gate is not None:
                    self._sync_blocked()
                self.checkpointer.notify_aborted(message.checkpoint)
            elif isinstance(message, Stop) and self._source is not None and not self.end_of_data:
                await self._end_of_data(drain=message.mode.drains)

    async def _on_trigger(self, trigger: Trigger) -> None:
        barrier = CheckpointBarrier(
            trigger.checkpoint,
            trigger.timestamp,
            trigger.location,
            trigger.savepoint,
            trigger.completed,
        )
        if self._source is not None:
            await self.checkpointer.checkpoint(barrier, BarrierTiming.on_trigger(trigger.timestamp))
            return
        # A non-source subtask is triggered directly once its inputs have finished; their
        # EndOfPartition may still be on the way, so the checkpoint completes when they all closed.
        result = self.aligner.on_trigger(barrier)
        if result.aborted is not None:
            self._abort_alignment(result.aborted, "a newer checkpoint was triggered")
        await self._checkpoint_if_aligned(result)
        self._sync_blocked()

    async def _checkpoint_if_aligned(self, result: AlignmentResult) -> None:
        if result.aligned is not None:
            await self.checkpointer.checkpoint(result.aligned, result.timing or BarrierTiming())

    def _abort_alignment(self, checkpoint_id: int, why: str) -> None:
        self.checkpointer.decline_on_barrier(checkpoint_id, why)

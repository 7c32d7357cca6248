"""The operators of one subtask, joined by direct calls, and the lifecycle calls over all of them."""

from __future__ import annotations

import pickle
from typing import Any

from sluice.checkpoint.restore import FullyFinished, Share
from sluice.checkpoint.snapshot import OperatorAck, OperatorSnapshot, RestoredState
from sluice.engine._unpicklable import PICKLING_ERRORS, unpicklable_state
from sluice.engine.context import Metrics, OperatorContext
from sluice.engine.events import MAX_WATERMARK, Event, Watermark, WatermarkStatus
from sluice.engine.operators.base import StreamOperator
from sluice.engine.writer import RecordWriter
from sluice.graph.jobgraph import JobVertex
from sluice.state.keygroups import key_group_range


class _ChainedOutput:
    __slots__ = ("_next",)

    def __init__(self, next_operator: StreamOperator) -> None:
        self._next = next_operator

    def emit(self, values: list[Any], timestamps: list[int] | None) -> None:
        self._next.process_batch(values, timestamps)

    def emit_watermark(self, timestamp: int) -> None:
        self._next.process_watermark(timestamp)

    def emit_idle(self, idle: bool) -> None:
        self._next.process_idle(idle)

    def emit_side(self, tag: str, values: list[Any], timestamps: list[int] | None) -> None:
        """Nothing reads this side output: an operator whose side output is read ends its vertex."""


class _TaskOutput:
    __slots__ = ("_main", "_metrics", "_sides", "_writers")

    def __init__(self, writers: list[RecordWriter], tags: list[str | None], metrics: Metrics) -> None:
        self._writers = writers
        self._metrics = metrics
        self._main = [w for w, tag in zip(writers, tags, strict=True) if tag is None]
        self._sides: dict[str, list[RecordWriter]] = {}
        for writer, tag in zip(writers, tags, strict=True):
            if tag is not None:
                self._sides.setdefault(tag, []).append(writer)

    def emit(self, values: list[Any], timestamps: list[int] | None) -> None:
        self._metrics.records_out += len(values)
        for writer in self._main:
            writer.emit(values, timestamps)

    def emit_side(self, tag: str, values: list[Any], timestamps: list[int] | None) -> None:
        writers = self._sides.get(tag)
        if writers:
            self._metrics.records_out += len(values)
            for writer in writers:
                writer.emit(values, timestamps)

    def emit_watermark(self, timestamp: int) -> None:
        event = Watermark(timestamp)
        for writer in self._writers:
            writer.broadcast_event(event)

    def emit_idle(self, idle: bool) -> None:
        event = WatermarkStatus(idle)
        for writer in self._writers:
            writer.broadcast_event(event)


class OperatorChain:
    def __init__(
        self,
        vertex: JobVertex,
        subtask_index: int,
        attempt: int,
        job_id: str,
        writers: list[RecordWriter],
        metrics: Metrics,
        restore: dict[str, Share],
        attempt_token: str = "",
    ) -> None:
        self.vertex = vertex
        self.writers = writers
        self.operators: list[StreamOperator] = [spec.create(StreamOperator) for spec in vertex.operators]
        finished = [isinstance(restore.get(op.uid), FullyFinished) for op in self.operators]
        self.finished_on_restore = all(finished)
        output: Any = _TaskOutput(writers, [edge.tag for edge in vertex.outputs], metrics)
        for op in reversed(self.operators):
            ctx = OperatorContext(
                operator_uid=op.uid,
                subtask_index=subtask_index,
                parallelism=vertex.parallelism,
                max_parallelism=vertex.max_parallelism,
                attempt=attempt,
                metrics=metrics,
                keyed=op.is_keyed,
                job_id=job_id,
                attempt_token=attempt_token,
                state_backend=vertex.state_backend,
            )
            op.setup(ctx, output)
            output = _ChainedOutput(op)
        self.head = self.operators[0]
        self._restore = restore
        self._key_groups = key_group_range(subtask_index, vertex.max_parallelism, vertex.parallelism)
        self.operators_finished = False
        self._opened: list[StreamOperator] = []

    def open(self) -> None:
        if self.finished_on_restore:
            # Nothing runs again; only transactions of the final checkpoint are committed once more.
            for op in self.operators:
                share = self._restore.get(op.uid)
                if isinstance(share, FullyFinished) and share.pending_commits is not None:
                    op.commit_after_finish(share.pending_commits)
            return
        # Tail first: an operator must be ready before its predecessor can emit into it.
        for op in reversed(self.operators):
            share = self._restore.get(op.uid)
            op.initialize_state(share if isinstance(share, RestoredState) else None)
            op.open()
            self._opened.append(op)

    def end_of_input(self, drain: bool, watermark_done: bool) -> None:
        """Drain: MAX_WATERMARK (fires all event-time timers), then end_input and finish head to tail."""
        for op in self.operators:
            op.stop_processing_timers()
        if drain:
            if not watermark_done:
                self.head.process_watermark(MAX_WATERMARK)
            for op in self.operators:
                op.end_input(0)
                op.finish()
            self.operators_finished = True

    def snapshot(self, checkpoint_id: int, savepoint: bool = False, completed: int = 0) -> list[OperatorAck]:
        """The synchronous part of a checkpoint: operator state is pickled now (a copy), a keyed state
        backend's tables are frozen (copy-on-write) for `OperatorAck.keyed` to write afterwards."""
        acks = []
        for op in self.operators:
            snap: OperatorSnapshot | None = op.snapshot_state(checkpoint_id)
            write = None
            if snap is not None and snap.deferred is not None:
                write = snap.deferred.plan(checkpoint_id, savepoint, completed)
                snap.deferred = None
            try:
                data = pickle.dumps(snap, protocol=5) if snap is not None and not snap.is_empty() else None
            except PICKLING_ERRORS as err:
                raise unpicklable_state(op.uid, err) from err
            keyed = snap is not None and (bool(snap.keyed) or write is not None)
            acks.append(
                OperatorAck(
                    uid=op.uid,
                    data=data,
                    finished=self.operators_finished,
                    union=snap is not None and snap.uses_union_state(),
                    operator_state=snap is not None and bool(snap.lists or snap.unions or snap.broadcast),
                    key_groups=(self._key_groups.start, self._key_groups.stop - 1)
                    if op.is_keyed or keyed
                    else None,
                    pending_commits=data is not None and op.has_pending_commits(),
                    keyed=write,
                )
            )
        return acks

    def notify_complete(self, checkpoint_id: int) -> None:
        for op in self.operators:
            op.notify_checkpoint_complete(checkpoint_id)

    def notify_aborted(self, checkpoint_id: int) -> None:
        for op in self.operators:
            op.notify_checkpoint_aborted(checkpoint_id)

    def close(self) -> None:
        """Closes every operator, even when one of them fails; re-raises the first error."""
        first: BaseException | None = None
        for op in [op for op in self.operators if op in self._opened]:
            try:
                op.close()
            except Exception as err:
                first = first or err
        if first is not None:
            raise first

    def next_processing_timer(self) -> int | None:
        due = [t for op in self.operators if (t := op.next_processing_timer()) is not None]
        return min(due) if due else None

    def on_processing_time(self, now_ms: int) -> None:
        for op in self.operators:
            op.on_processing_time(now_ms)

    def broadcast(self, event: Event) -> None:
        for writer in self.writers:
            writer.broadcast_event(event)

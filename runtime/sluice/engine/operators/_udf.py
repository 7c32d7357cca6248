"""Shared plumbing for operators that wrap a user function: lifecycle hooks, operator state, and what
happens when the function raises (`on_error`: fail the task, skip the record, or a dead letter)."""

from __future__ import annotations

from typing import Any

from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.engine.operators.base import StreamOperator
from sluice.functions import Function
from sluice.side_outputs import FailedRecord, OutputTag, describe_error


class UdfOperator(StreamOperator):
    def __init__(self, uid: str, fn: Any, on_error: str | OutputTag = "fail") -> None:
        self.uid = uid
        self.fn = fn
        self._lifecycle = fn if isinstance(fn, Function) else None
        self._timestamp_of_finish: int | None = None
        self.guarded = on_error != "fail"
        """A raising function does not fail the task: `process_batch` takes the record-by-record path."""
        self.dead_letter_tag = on_error.name if isinstance(on_error, OutputTag) else None

    def reject(self, value: Any, timestamp: int | None, error: Exception, dead: DeadLetters) -> None:
        """`value` made the user function raise: skipped and counted, or kept as a dead letter."""
        if self.dead_letter_tag is None:
            self.ctx.metrics.records_skipped += 1
            return
        dead.values.append(FailedRecord(value, describe_error(error), self.uid))
        dead.timestamps.append(timestamp)

    def send_dead_letters(self, dead: DeadLetters) -> None:
        if dead.values and self.dead_letter_tag is not None:
            self.ctx.metrics.dead_letters += len(dead.values)
            stamps = dead.timestamps
            timed = None if any(ts is None for ts in stamps) else [ts for ts in stamps if ts is not None]
            self.output.emit_side(self.dead_letter_tag, dead.values, timed)

    def initialize_state(self, restored: RestoredState | None) -> None:
        if restored is None:
            return
        store = self.ctx.operator_state
        for name, items in restored.lists.items():
            store.list_state(name).extend(items)
        for name, items in restored.unions.items():
            store.union_list_state(name).extend(items)
        for name, entries in restored.broadcast.items():
            store.broadcast_state(name).update(entries)

    def open(self) -> None:
        if self._lifecycle is not None:
            self._lifecycle.open(self.ctx)

    def finish(self) -> None:
        if self._lifecycle is not None:
            emitted = self._lifecycle.finish()
            if emitted is not None:
                values = list(emitted)
                if values:
                    self.output.emit(values, None)

    def close(self) -> None:
        if self._lifecycle is not None:
            self._lifecycle.close()

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        snap = OperatorSnapshot()
        store = self.ctx.operator_state
        snap.lists = {n: list(v) for n, v in store.lists.items() if v}
        snap.unions = {n: list(v) for n, v in store.unions.items() if v}
        snap.broadcast = {n: dict(v) for n, v in store.broadcast.items() if v}
        # Keyed state (a keyed process function's) is snapshotted by its operator, see keyed.py.
        return None if snap.is_empty() else snap


class DeadLetters:
    """The failed records of one batch, sent together after it."""

    __slots__ = ("timestamps", "values")

    def __init__(self) -> None:
        self.values: list[FailedRecord] = []
        self.timestamps: list[int | None] = []

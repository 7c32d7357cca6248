"""Shared plumbing for operators that wrap a user function: lifecycle hooks and operator state."""

from __future__ import annotations

from typing import Any

from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.engine.operators.base import StreamOperator
from sluice.functions import Function


class UdfOperator(StreamOperator):
    def __init__(self, uid: str, fn: Any) -> None:
        self.uid = uid
        self.fn = fn
        self._lifecycle = fn if isinstance(fn, Function) else None
        self._timestamp_of_finish: int | None = None

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

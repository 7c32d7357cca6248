"""The head operator of a source task: reads its splits in order and emits their records.

Splits are operator list state: on a fresh start split j goes to subtask j % parallelism; on a restore
each subtask gets the splits (with their positions) that the checkpoint assigned to it.
"""

from __future__ import annotations

from typing import Any

from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.connectors.base import Source, SplitReader
from sluice.engine.operators.base import StreamOperator


class SourceOperator(StreamOperator):
    def __init__(self, uid: str, source: Source[Any]) -> None:
        self.uid = uid
        self.source = source
        self._pending: list[Any] = []
        self._reader: SplitReader[Any] | None = None

    @property
    def bounded(self) -> bool:
        return self.source.bounded

    def initialize_state(self, restored: RestoredState | None) -> None:
        if restored is None:
            index, parallelism = self.ctx.subtask_index, self.ctx.parallelism
            self._pending = [s for j, s in enumerate(self.source.splits()) if j % parallelism == index]
        else:
            self._pending = list(restored.lists.get("splits", []))

    @property
    def has_splits(self) -> bool:
        return self._reader is not None or bool(self._pending)

    def share_of_rate(self, parallelism_splits: int) -> float | None:
        rate = self.source.records_per_second()
        if rate is None:
            return None
        total = max(1, parallelism_splits)
        mine = (1 if self._reader is not None else 0) + len(self._pending)
        return rate * mine / total

    def poll(self, max_records: int) -> list[Any] | None:
        """Up to `max_records` records of the current split; None once every split is exhausted."""
        while True:
            if self._reader is None:
                if not self._pending:
                    return None
                self._reader = self.source.open_split(self._pending.pop(0))
            batch = self._reader.read(max_records)
            if batch is not None:
                return batch
            self._reader.close()
            self._reader = None

    def emit_next(self, max_records: int) -> int:
        """Emits one batch; returns how many records, or -1 when the source has ended."""
        batch = self.poll(max_records)
        if batch is None:
            return -1
        if batch:
            self.output.emit(batch, None)
        return len(batch)

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        splits = ([self._reader.position()] if self._reader is not None else []) + list(self._pending)
        return OperatorSnapshot(lists={"splits": splits}) if splits else None

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

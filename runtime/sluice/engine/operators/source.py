"""The head operator of a source task: reads its splits and emits their records.

Splits are operator list state: on a fresh start split j goes to subtask j % parallelism; on a restore
each subtask gets the splits (with their positions) that the checkpoint assigned to it.

A bounded source's splits are read one after the other, in order. An unbounded source's splits never
end, so reading them in order would leave every split after the first unread: a subtask keeps all of
its unbounded splits open and takes a batch from each in turn.
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
        self._readers: list[SplitReader[Any]] = []
        self._turn = 0

    @property
    def bounded(self) -> bool:
        return self.source.bounded

    def initialize_state(self, restored: RestoredState | None) -> None:
        if restored is None:
            index, parallelism = self.ctx.subtask_index, self.ctx.parallelism
            self._pending = [s for j, s in enumerate(self.source.splits()) if j % parallelism == index]
        else:
            self._pending = list(restored.lists.get("splits", []))

    def _open_splits(self) -> None:
        open_at_once = 1 if self.source.bounded else len(self._readers) + len(self._pending)
        while self._pending and len(self._readers) < open_at_once:
            self._readers.append(self.source.open_split(self._pending.pop(0)))

    def poll(self, max_records: int) -> list[Any] | None:
        """Up to `max_records` records of the next split in turn; None once every split is exhausted."""
        while True:
            self._open_splits()
            if not self._readers:
                return None
            count = len(self._readers)
            for step in range(count):
                i = (self._turn + step) % count
                batch = self._readers[i].read(max_records)
                if batch is None:
                    self._readers.pop(i).close()
                    break  # the open splits changed: start the round again
                if batch:
                    self._turn = i + 1
                    return batch
            else:
                return []  # no split has a record for now

    def emit_next(self, max_records: int) -> int:
        """Emits one batch; returns how many records, or -1 when the source has ended."""
        batch = self.poll(max_records)
        if batch is None:
            return -1
        if batch:
            self.output.emit(batch, None)
        return len(batch)

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        splits = [reader.position() for reader in self._readers] + list(self._pending)
        return OperatorSnapshot(lists={"splits": splits}) if splits else None

    def close(self) -> None:
        readers, self._readers = self._readers, []
        for reader in readers:
            reader.close()

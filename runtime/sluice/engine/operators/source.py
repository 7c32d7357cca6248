"""The head operator of a source task: reads its splits and emits their records.

Splits are operator list state: on a fresh start split j goes to subtask j % parallelism; on a restore
each subtask gets the splits (with their positions) that the checkpoint assigned to it.

An unbounded source's splits never end, so a subtask keeps all of its splits open and takes a batch
from each in turn (reading them one after another would leave every split after the first unread). A
source with a `WatermarkStrategy` is read the same way and keeps a watermark per split (see
`sluice.watermarks`). A bounded source without one reads its splits one after another, in order, so a
downstream `assign_timestamps` sees each split's records in their own order.

When a checkpoint completes, each split still open hears which of its positions that checkpoint holds
(`SplitReader.notify_checkpoint_complete`): the Kafka source reports it to the broker for lag monitoring.
"""

from __future__ import annotations

from typing import Any

from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.connectors.base import Source, SplitReader
from sluice.engine.context import processing_time_ms
from sluice.engine.operators._split_clocks import SplitClocks
from sluice.engine.operators.base import StreamOperator
from sluice.watermarks import WatermarkStrategy

#: Positions of checkpoints not yet completed or aborted that are remembered for notifications; a
#: checkpoint older than this many snapshots is subsumed anyway.
_REMEMBERED_SNAPSHOTS = 16


class SourceOperator(StreamOperator):
    def __init__(self, uid: str, source: Source[Any], watermarks: WatermarkStrategy | None = None) -> None:
        self.uid = uid
        self.source = source
        self.watermarks = watermarks
        self._pending: list[Any] = []
        self._readers: dict[int, SplitReader[Any]] = {}
        self._opened = 0
        self._turn = 0
        self._clocks = (
            SplitClocks(watermarks.max_out_of_orderness_ms, watermarks.idleness_ms) if watermarks else None
        )
        self._timers_stopped = False
        self._snapshots: dict[int, list[tuple[SplitReader[Any], Any]]] = {}

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
        side_by_side = not self.source.bounded or self.watermarks is not None
        while self._pending and (side_by_side or not self._readers):
            split_id, self._opened = self._opened, self._opened + 1
            self._readers[split_id] = self.source.open_split(self._pending.pop(0))
            if self._clocks is not None:
                self._clocks.open(split_id, processing_time_ms())

    def _poll(self, max_records: int) -> tuple[int, list[Any]] | None:
        """(split, up to `max_records` of its records) from the next split in turn that has any, (-1, [])
        when none has a record for now, None once every split is exhausted."""
        while True:
            self._open_splits()
            if not self._readers:
                return None
            ids = list(self._readers)
            for step in range(len(ids)):
                split_id = ids[(self._turn + step) % len(ids)]
                batch = self._readers[split_id].read(max_records)
                if batch is None:
                    self._close_split(split_id)
                    break  # the open splits changed: start the round again
                if batch:
                    self._turn = (self._turn + step + 1) % len(ids)
                    return split_id, batch
            else:
                return -1, []

    def _close_split(self, split_id: int) -> None:
        self._readers.pop(split_id).close()
        if self._clocks is not None:
            # An ended split no longer holds event time back.
            self._clocks.close(split_id)
            self._pass_on_time()

    def emit_next(self, max_records: int) -> int:
        """Emits one batch; returns how many records, or -1 when the source has ended."""
        polled = self._poll(max_records)
        if polled is None:
            return -1
        split_id, batch = polled
        if not batch:
            return 0
        if self._clocks is None or self.watermarks is None:
            self.output.emit(batch, None)
            return len(batch)
        extract = self.watermarks.timestamp
        stamps = [extract(v) for v in batch]
        self._clocks.on_records(split_id, max(stamps), processing_time_ms())
        watermark, idle = self._clocks.advance()
        if idle is False:  # active again before its records go out
            self.output.emit_idle(False)
        self.output.emit(batch, stamps)
        if watermark is not None:
            self.output.emit_watermark(watermark)
        return len(batch)

    def _pass_on_time(self) -> None:
        assert self._clocks is not None
        self._emit_time(*self._clocks.advance())

    def _emit_time(self, watermark: int | None, idle: bool | None) -> None:
        if watermark is not None:
            self.output.emit_watermark(watermark)
        if idle is not None:
            self.output.emit_idle(idle)

    def next_processing_timer(self) -> int | None:
        if self._clocks is None or self._timers_stopped:
            return None
        return self._clocks.next_idle_check()

    def on_processing_time(self, now_ms: int) -> None:
        if self._clocks is not None and not self._timers_stopped:
            self._emit_time(*self._clocks.expire(now_ms))

    def stop_processing_timers(self) -> None:
        self._timers_stopped = True

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        positions = [(reader, reader.position()) for reader in self._readers.values()]
        self._snapshots[checkpoint_id] = positions
        for old in sorted(self._snapshots)[:-_REMEMBERED_SNAPSHOTS]:
            del self._snapshots[old]
        splits = [position for _, position in positions] + list(self._pending)
        return OperatorSnapshot(lists={"splits": splits}) if splits else None

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        done = [c for c in self._snapshots if c <= checkpoint_id]
        if not done:
            return
        # The newest completed checkpoint subsumes the older ones: only its positions are reported.
        positions = self._snapshots[max(done)]
        for c in done:
            del self._snapshots[c]
        open_readers = set(map(id, self._readers.values()))
        for reader, position in positions:
            if id(reader) in open_readers:
                reader.notify_checkpoint_complete(checkpoint_id, position)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self._snapshots.pop(checkpoint_id, None)

    def close(self) -> None:
        readers, self._readers = list(self._readers.values()), {}
        self._snapshots.clear()
        for reader in readers:
            reader.close()

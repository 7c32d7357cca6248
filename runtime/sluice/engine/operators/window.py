"""Keyed event-time windows with incremental reduce or aggregate.

Accumulators live in `sluice.state.windows.WindowAccumulators`, one dict per window end, with a heap of
the ends that tells which windows the next watermark fires; with the disk state backend, in
`sluice.state.disk_windows.DiskWindowAccumulators`, the same layout in the TaskManager's LMDB store.
Every record is folded into its accumulator at once, so a window holds one value per key. Checkpoints
freeze the windows (copy-on-write) and write them from another thread, only those that changed since
the previous checkpoint.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.engine.context import OperatorContext
from sluice.engine.events import MIN_WATERMARK
from sluice.engine.operators.base import Output, StreamOperator
from sluice.functions import AggregateFunction
from sluice.state.backends import create_window_accumulators
from sluice.state.snapshots import ChangeLog, DeferredKeyed
from sluice.state.windows import AccumulatorLayout, WindowAccumulators
from sluice.windows import FixedWindowAssigner, TumblingEventTimeWindows, window_ends

_MISSING = object()


class WindowOperator(StreamOperator):
    is_keyed = True

    def __init__(
        self,
        uid: str,
        assigner: FixedWindowAssigner,
        key_selector: Callable[[Any], Any],
        reduce: Callable[[Any, Any], Any] | None = None,
        aggregate: AggregateFunction | None = None,
    ) -> None:
        if (reduce is None) == (aggregate is None):
            raise ValueError(f"operator {uid!r}: a window needs exactly one of reduce or aggregate")
        self.uid = uid
        self.assigner = assigner
        self.key_selector = key_selector
        self.reduce_fn = reduce
        self.aggregate = aggregate
        self.accumulators: AccumulatorLayout = WindowAccumulators()
        self._changes = ChangeLog()
        self.watermark = MIN_WATERMARK

    def setup(self, ctx: OperatorContext, output: Output) -> None:
        super().setup(ctx, output)
        backend = ctx.keyed_backend
        if backend is not None and backend.kind != "heap":
            owner = f"{self.uid}-{ctx.subtask_index}-windows"
            self.accumulators = create_window_accumulators(backend.kind, owner)

    def initialize_state(self, restored: RestoredState | None) -> None:
        if restored is None:
            return
        accumulators = self.accumulators
        for chain in restored.keyed_chains:
            for name, _kind, upserts, removed in chain.frames():
                accumulators.restore_frame(name, upserts, removed)
        # Checkpoints written before windows were snapshotted incrementally kept them per key group.
        for group in restored.keyed.values():
            for end, entries in group.get("windows", {}).items():
                accumulators.restore_entries(end, entries)
        accumulators.finish_restore()

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        if timestamps is None:
            raise RuntimeError(
                f"operator {self.uid!r}: event-time windows need timestamps; "
                "call assign_timestamps(...) before key_by(...).window(...)"
            )
        if isinstance(self.assigner, TumblingEventTimeWindows) and self.reduce_fn is not None:
            self._reduce_tumbling(values, timestamps)
        else:
            self._generic(values, timestamps)
        self.accumulators.flush()

    def _reduce_tumbling(self, values: list[Any], timestamps: list[int]) -> None:
        # The hot path of most jobs: one window per record, plain reduce.
        size, offset = self.assigner.size_ms, self.assigner.offset_ms
        low, high = min(timestamps), max(timestamps)
        end = low - (low - offset) % size + size
        if high < end and end > self.watermark + 1:
            # The whole batch falls into one window that is not late: fold it without per-record checks.
            self._fold(self.accumulators.writable(end), values)
            return
        if timestamps == sorted(timestamps):
            # In event-time order, as most sources keep it: the batch is a few runs, one per window.
            self._reduce_tumbling_runs(values, timestamps)
            return
        self._reduce_tumbling_mixed(values, timestamps)

    def _fold(self, window: Any, values: list[Any]) -> None:
        """Reduces `values` into `window` (key -> accumulator), in their order."""
        key_of, reduce = self.key_selector, self.reduce_fn
        assert reduce is not None
        get = window.get
        for key, value in zip([key_of(v) for v in values], values, strict=True):
            acc = get(key, _MISSING)
            window[key] = value if acc is _MISSING else reduce(acc, value)

    def _reduce_tumbling_runs(self, values: list[Any], timestamps: list[int]) -> None:
        """A batch whose timestamps never decrease: each window's records are one slice of it."""
        size, offset = self.assigner.size_ms, self.assigner.offset_ms
        late_after = self.watermark + 1
        late = 0
        start, count = 0, len(values)
        while start < count:
            first = timestamps[start]
            end = first - (first - offset) % size + size
            stop = bisect_left(timestamps, end, start)
            if end <= late_after:
                late += stop - start
            else:
                self._fold(self.accumulators.writable(end), values[start:stop])
            start = stop
        if late:
            self.ctx.metrics.late_records_dropped += late

    def _reduce_tumbling_mixed(self, values: list[Any], timestamps: list[int]) -> None:
        key_of, reduce = self.key_selector, self.reduce_fn
        assert reduce is not None
        size, offset = self.assigner.size_ms, self.assigner.offset_ms
        writable, late_after = self.accumulators.writable, self.watermark + 1
        late = 0
        current_end: int | None = None
        current = None
        for value, ts in zip(values, timestamps, strict=True):
            end = ts - (ts - offset) % size + size
            if end <= late_after:
                late += 1
                continue
            if end != current_end:
                current_end = end
                current = writable(end)
            assert current is not None
            key = key_of(value)
            acc = current.get(key, _MISSING)
            current[key] = value if acc is _MISSING else reduce(acc, value)
        if late:
            self.ctx.metrics.late_records_dropped += late

    def _generic(self, values: list[Any], timestamps: list[int]) -> None:
        key_of, reduce, agg = self.key_selector, self.reduce_fn, self.aggregate
        late_after = self.watermark + 1
        late = 0
        for value, ts in zip(values, timestamps, strict=True):
            key = key_of(value)
            assigned = False
            for end in window_ends(self.assigner, ts):
                if end <= late_after:
                    continue
                assigned = True
                entries = self.accumulators.writable(end)
                acc = entries.get(key, _MISSING)
                if reduce is not None:
                    entries[key] = value if acc is _MISSING else reduce(acc, value)
                else:
                    assert agg is not None
                    if acc is _MISSING:
                        acc = agg.create_accumulator()
                    entries[key] = agg.add(value, acc)
            if not assigned:
                late += 1
        if late:
            self.ctx.metrics.late_records_dropped += late

    def process_watermark(self, timestamp: int) -> None:
        if timestamp <= self.watermark:
            return
        self.watermark = timestamp
        for end, entries in self.accumulators.fire_until(timestamp):
            results = list(entries.values())
            if self.aggregate is not None:
                results = [self.aggregate.get_result(acc) for acc in results]
            self.output.emit(results, [end - 1] * len(results))
        self.output.emit_watermark(timestamp)

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        if not self.accumulators.has_state():
            # Nothing open and nothing fired since the last snapshot: no files, and the chain written so
            # far ends here. Once this checkpoint completes the coordinator may delete its files, so the
            # next snapshot is a full one, not a delta on them.
            self._changes.close()
            self._changes = ChangeLog()
            return None
        return OperatorSnapshot(deferred=DeferredKeyed(self._changes, self.accumulators.begin_snapshot()))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self._changes.confirm(checkpoint_id)

    def close(self) -> None:
        try:
            self._changes.close()
        finally:
            self.accumulators.close()  # on disk, the store's files go
            super().close()

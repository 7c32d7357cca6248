"""Keyed event-time windows with incremental reduce or aggregate.

Accumulators live in `windows[end][key]`; a heap of window ends tells which windows the next watermark
fires. Every record is folded into its accumulator at once, so a window holds one value per key.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.engine.events import MIN_WATERMARK
from sluice.engine.operators.base import StreamOperator
from sluice.functions import AggregateFunction
from sluice.state.keygroups import key_group_for
from sluice.windows import TumblingEventTimeWindows, WindowAssigner, window_ends

_MISSING = object()


class WindowOperator(StreamOperator):
    is_keyed = True

    def __init__(
        self,
        uid: str,
        assigner: WindowAssigner,
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
        self.windows: dict[int, dict[Any, Any]] = {}
        self._ends: list[int] = []
        self.watermark = MIN_WATERMARK

    def initialize_state(self, restored: RestoredState | None) -> None:
        if restored is None:
            return
        for group in restored.keyed.values():
            for end, entries in group.get("windows", {}).items():
                self._window(end).update(entries)

    def _window(self, end: int) -> dict[Any, Any]:
        entries = self.windows.get(end)
        if entries is None:
            entries = self.windows[end] = {}
            heapq.heappush(self._ends, end)
        return entries

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

    def _reduce_tumbling(self, values: list[Any], timestamps: list[int]) -> None:
        # The hot path of most jobs: one window per record, plain reduce.
        key_of, reduce = self.key_selector, self.reduce_fn
        assert reduce is not None
        size, offset = self.assigner.size_ms, self.assigner.offset_ms
        low, high = min(timestamps), max(timestamps)
        end = low - (low - offset) % size + size
        if high < end and end > self.watermark + 1:
            # The whole batch falls into one window that is not late: fold it without per-record checks.
            window = self.windows.get(end)
            if window is None:
                window = self._window(end)
            get = window.get
            for key, value in zip([key_of(v) for v in values], values, strict=True):
                acc = get(key, _MISSING)
                window[key] = value if acc is _MISSING else reduce(acc, value)
            return
        self._reduce_tumbling_mixed(values, timestamps)

    def _reduce_tumbling_mixed(self, values: list[Any], timestamps: list[int]) -> None:
        key_of, reduce = self.key_selector, self.reduce_fn
        assert reduce is not None
        size, offset = self.assigner.size_ms, self.assigner.offset_ms
        windows, late_after = self.windows, self.watermark + 1
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
                current = windows.get(end)
                if current is None:
                    current = self._window(end)
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
                entries = self._window(end)
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
        ends, windows = self._ends, self.windows
        while ends and ends[0] - 1 <= timestamp:
            end = heapq.heappop(ends)
            entries = windows.pop(end, None)
            if not entries:
                continue
            results = list(entries.values())
            if self.aggregate is not None:
                results = [self.aggregate.get_result(acc) for acc in results]
            self.output.emit(results, [end - 1] * len(results))
        self.output.emit_watermark(timestamp)

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        if not self.windows:
            return None
        mp = self.ctx.max_parallelism
        group_of: dict[Any, int] = {}  # a key usually has entries in several windows: hash it once
        keyed: dict[int, dict[str, Any]] = {}
        for end, entries in self.windows.items():
            for key, acc in entries.items():
                group = group_of.get(key)
                if group is None:
                    group = group_of[key] = key_group_for(key, mp)
                slot = keyed.get(group)
                if slot is None:
                    slot = keyed[group] = {"windows": {}}
                by_end = slot["windows"].get(end)
                if by_end is None:
                    by_end = slot["windows"][end] = {}
                by_end[key] = acc
        return OperatorSnapshot(keyed=keyed)

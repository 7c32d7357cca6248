"""Keyed event-time windows that merge, fire late, or call a ProcessWindowFunction, with Flink's semantics.

Used for session windows, for any window with allowed lateness or a late-data side output, and for
`WindowedStream.process`; tumbling and sliding windows that fire once keep the faster
`sluice.engine.operators.window.WindowOperator`.

- A record is assigned its windows (a session: `[ts, ts + gap)`, merged with every window of its key
  that it overlaps or touches; contents merge too: reduce, AggregateFunction.merge, or the elements).
- A window fires when the watermark reaches `end - 1`. A window is late when the watermark has reached
  `end - 1 + allowed lateness`: its state is then removed. A record whose windows are all late goes to
  the late-data side output if there is one, else it is dropped and counted.
- A record that lands in a window whose end the watermark has passed (but within the lateness) fires
  that window again at once with the updated result: every firing emits.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.engine.context import OperatorContext
from sluice.engine.events import MIN_WATERMARK
from sluice.engine.operators.base import Output, StreamOperator
from sluice.functions import AggregateFunction, ProcessWindowFunction
from sluice.state.backends import create_keyed_windows
from sluice.state.keyed_windows import CONTENTS, END, FIRED, START, KeyedWindowLayout, KeyedWindows, Window
from sluice.state.snapshots import ChangeLog, DeferredKeyed
from sluice.windows import EventTimeSessionWindows, TimeWindow, WindowAssigner, window_ends


class KeyedWindowOperator(StreamOperator):
    is_keyed = True

    def __init__(
        self,
        uid: str,
        assigner: WindowAssigner,
        key_selector: Callable[[Any], Any],
        *,
        reduce: Callable[[Any, Any], Any] | None = None,
        aggregate: AggregateFunction | None = None,
        process: ProcessWindowFunction | None = None,
        allowed_lateness_ms: int = 0,
        late_tag: str | None = None,
    ) -> None:
        if sum(f is not None for f in (reduce, aggregate, process)) != 1:
            raise ValueError(f"operator {uid!r}: a window needs exactly one of reduce, aggregate or process")
        if allowed_lateness_ms < 0:
            raise ValueError(f"operator {uid!r}: allowed lateness must not be negative")
        self.uid = uid
        self.assigner = assigner
        self.key_selector = key_selector
        self.reduce_fn = reduce
        self.aggregate = aggregate
        self.process_fn = process
        self.lateness = allowed_lateness_ms
        self.late_tag = late_tag
        self.windows: KeyedWindowLayout = KeyedWindows()
        self.watermark = MIN_WATERMARK
        self._changes = ChangeLog()
        self._due: dict[Any, int] = {}
        """The time each key is next due (fire or clean up), as it stands in `_heap`."""
        self._heap: list[tuple[int, int, Any]] = []
        """(due time, tie-breaker, key); an entry whose time `_due` no longer holds is stale."""
        self._sequence = itertools.count()
        self._out: list[Any] = []
        self._out_ts: list[int] = []

    # -- lifecycle ------------------------------------------------------------------------------------

    def setup(self, ctx: OperatorContext, output: Output) -> None:
        super().setup(ctx, output)
        backend = ctx.keyed_backend
        if backend is not None and backend.kind != "heap":
            # The windows' contents go where the job keeps keyed state: on disk, the TaskManager's store.
            self.windows = create_keyed_windows(backend.kind, f"{self.uid}-{ctx.subtask_index}-windows")

    def initialize_state(self, restored: RestoredState | None) -> None:
        if restored is None:
            return
        for chain in restored.keyed_chains:
            for name, _kind, upserts, removed in chain.frames():
                self.windows.restore_frame(name, upserts, removed)
        for key, windows in self.windows.items():
            self._schedule(key, windows)

    def open(self) -> None:
        if self.process_fn is not None:
            self.process_fn.open(self.ctx)

    def finish(self) -> None:
        if self.process_fn is not None:
            emitted = self.process_fn.finish()
            if emitted is not None:
                values = list(emitted)
                if values:
                    self.output.emit(values, None)

    def close(self) -> None:
        try:
            if self.process_fn is not None:
                self.process_fn.close()
        finally:
            try:
                self._changes.close()
            finally:
                self.windows.close()  # on disk, the store's files go

    # -- records ----------------------------------------------------------------------------------------

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        if timestamps is None:
            raise RuntimeError(
                f"operator {self.uid!r}: event-time windows need timestamps; "
                "call assign_timestamps(...) before key_by(...).window(...)"
            )
        key_of = self.key_selector
        add = self._add_to_session if isinstance(self.assigner, EventTimeSessionWindows) else self._add_fixed
        late: list[Any] = []
        late_ts: list[int] = []
        for value, ts in zip(values, timestamps, strict=True):
            if not add(key_of(value), value, ts):
                late.append(value)
                late_ts.append(ts)
        self._flush()
        self.windows.flush()
        if late:
            self._late(late, late_ts)

    def _is_late(self, end: int) -> bool:
        return end - 1 + self.lateness <= self.watermark

    def _add_fixed(self, key: Any, value: Any, ts: int) -> bool:
        assert not isinstance(self.assigner, EventTimeSessionWindows)
        size = self.assigner.size_ms
        ends = [end for end in window_ends(self.assigner, ts) if not self._is_late(end)]
        if not ends:
            return False
        windows = self.windows.writable(key)
        for end in ends:
            window = next((w for w in windows if w[END] == end), None)
            if window is None:
                window = [end - size, end, self._single(value), False]
                windows.append(window)
            else:
                window[CONTENTS] = self._add(window[CONTENTS], value)
            self._fire_late(key, window)
        self._schedule(key, windows)
        return True

    def _add_to_session(self, key: Any, value: Any, ts: int) -> bool:
        assert isinstance(self.assigner, EventTimeSessionWindows)
        start, end = ts, ts + self.assigner.gap_ms
        held = self.windows.get(key)
        # Overlapping or touching windows merge (Flink's TimeWindow.intersects).
        merging = [w for w in held if w[START] <= end and w[END] >= start] if held else []
        if not merging and self._is_late(end):
            return False
        windows = self.windows.writable(key)
        if merging:
            merging = [w for w in windows if w[START] <= end and w[END] >= start]
            merging.sort(key=lambda w: w[START])
            contents = merging[0][CONTENTS]
            for other in merging[1:]:
                contents = self._merge(contents, other[CONTENTS])
            new_end = max(end, *(w[END] for w in merging))
            # Still the window that fired (a late record inside it): it stays fired and fires again.
            fired = len(merging) == 1 and merging[0][FIRED] and new_end == merging[0][END]
            window = [min(start, merging[0][START]), new_end, self._add(contents, value), fired]
            windows[:] = [w for w in windows if not any(w is m for m in merging)]
        else:
            window = [start, end, self._single(value), False]
        windows.append(window)
        self._fire_late(key, window)
        self._schedule(key, windows)
        return True

    def _fire_late(self, key: Any, window: Window) -> None:
        """A window the watermark has passed (or that fired before) fires at once with its new contents."""
        if window[FIRED] or window[END] - 1 <= self.watermark:
            window[FIRED] = True
            self.ctx.metrics.late_records_refired += 1
            self._emit(key, window)

    def _late(self, values: list[Any], timestamps: list[int]) -> None:
        if self.late_tag is None:
            self.ctx.metrics.late_records_dropped += len(values)
            return
        self.ctx.metrics.late_records_side_output += len(values)
        self.output.emit_side(self.late_tag, values, timestamps)

    # -- contents -------------------------------------------------------------------------------------

    def _single(self, value: Any) -> Any:
        if self.reduce_fn is not None:
            return value
        if self.aggregate is not None:
            return self.aggregate.add(value, self.aggregate.create_accumulator())
        return [value]

    def _add(self, contents: Any, value: Any) -> Any:
        if self.reduce_fn is not None:
            return self.reduce_fn(contents, value)
        if self.aggregate is not None:
            return self.aggregate.add(value, contents)
        contents.append(value)
        return contents

    def _merge(self, first: Any, second: Any) -> Any:
        if self.reduce_fn is not None:
            return self.reduce_fn(first, second)
        if self.aggregate is not None:
            return self.aggregate.merge(first, second)
        return [*first, *second]

    def _emit(self, key: Any, window: Window) -> None:
        stamp = window[END] - 1
        if self.reduce_fn is not None:
            self._out.append(window[CONTENTS])
            self._out_ts.append(stamp)
        elif self.aggregate is not None:
            self._out.append(self.aggregate.get_result(window[CONTENTS]))
            self._out_ts.append(stamp)
        else:
            assert self.process_fn is not None
            produced = self.process_fn.process(
                key, TimeWindow(window[START], window[END]), list(window[CONTENTS])
            )
            if produced is not None:
                before = len(self._out)
                self._out.extend(produced)
                self._out_ts.extend([stamp] * (len(self._out) - before))
        if len(self._out) >= 1024:
            self._flush()

    def _flush(self) -> None:
        if self._out:
            out, stamps, self._out, self._out_ts = self._out, self._out_ts, [], []
            self.output.emit(out, stamps)

    # -- time -------------------------------------------------------------------------------------------

    def _next_due(self, windows: list[Window]) -> int:
        return min(int(w[END]) - 1 + (self.lateness if w[FIRED] else 0) for w in windows)

    def _schedule(self, key: Any, windows: list[Window]) -> None:
        due = self._next_due(windows)
        known = self._due.get(key)
        if known is None or due < known:
            self._due[key] = due
            heapq.heappush(self._heap, (due, next(self._sequence), key))

    def process_watermark(self, timestamp: int) -> None:
        if timestamp <= self.watermark:
            return
        self.watermark = timestamp
        heap, due = self._heap, self._due
        while heap and heap[0][0] <= timestamp:
            at, _, key = heapq.heappop(heap)
            if due.get(key) != at:
                continue
            del due[key]
            self._advance_key(key, timestamp)
        self._flush()
        self.windows.flush()
        self.output.emit_watermark(timestamp)

    def _advance_key(self, key: Any, watermark: int) -> None:
        """Fires the windows of `key` the watermark completed and removes those it made late."""
        held = self.windows.get(key)
        if not held:
            return
        windows = self.windows.writable(key)
        for window in sorted(windows, key=lambda w: w[END]):
            if not window[FIRED] and window[END] - 1 <= watermark:
                window[FIRED] = True
                self._emit(key, window)
        windows[:] = [w for w in windows if w[END] - 1 + self.lateness > watermark]
        if windows:
            self._schedule(key, windows)
        else:
            self.windows.drop_if_empty(key)

    # -- checkpoints ------------------------------------------------------------------------------------

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        if not self.windows.has_state():
            self._changes.close()
            self._changes = ChangeLog()
            return None
        return OperatorSnapshot(deferred=DeferredKeyed(self._changes, self.windows.begin_snapshot()))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self._changes.confirm(checkpoint_id)

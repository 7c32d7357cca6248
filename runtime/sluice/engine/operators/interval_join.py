"""The interval join: `a.key_by(ka).interval_join(b.key_by(kb)).between(lower, upper).process(fn)`.

For each key, a left row at `lt` and a right row at `rt` pair when `lt + lower <= rt <= lt + upper`.
Each side's rows wait in keyed state (a map from timestamp to the rows of that timestamp) for partners
from the other side. A row is dropped once no partner can come any more: the watermark `W` promises no
row earlier than `W`, so a left row at `lt` is done when `W > lt + upper`, a right row at `rt` when
`W > rt - lower`. An event-time timer at that cleanup time, one per key and buffered timestamp (the
rows of one timestamp go together), removes exactly that timestamp's rows, as Flink's operator does: no
scan of the buffers, so an unbounded join holds steady state at a constant cost per row. A row that is
already late (earlier than the watermark) could miss partners that were dropped and is dropped itself,
as in Flink, and counted in `lateRecordsDropped`.

Records come a batch at a time from one input; the loop over them reads each key's buffers through the
state handles once per record, and calls a plain join function directly (a ProcessJoinFunction goes
through `_describe`, which gives it the pair's timestamps and key).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sluice.engine._failure_context import index_reached, mark_record
from sluice.engine.operators.keyed import KeyedProcessContext, KeyedProcessOperator
from sluice.functions import Function, ProcessJoinFunction, RuntimeContext
from sluice.state.descriptors import MapStateDescriptor
from sluice.state.keyed import MapState

_SIDES = ("left", "right")
_Entries = list[tuple[int, list[Any]]]


class JoinContext:
    """What `ProcessJoinFunction.process_element` gets with each pair."""

    __slots__ = ("key", "left_timestamp", "right_timestamp")

    def __init__(self) -> None:
        self.key: Any = None
        self.left_timestamp = 0
        self.right_timestamp = 0

    @property
    def timestamp(self) -> int:
        return max(self.left_timestamp, self.right_timestamp)


class IntervalJoin(Function):
    """Holds the user's join (a callable or a ProcessJoinFunction) and the two sides' buffers; the
    operator below calls it. Its `on_timer` is the cleanup."""

    def __init__(
        self, lower_ms: int, upper_ms: int, join: Callable[[Any, Any], Any] | ProcessJoinFunction
    ) -> None:
        self.lower = lower_ms
        self.upper = upper_ms
        self.join = join
        self.buffers: tuple[MapState, MapState] | None = None

    def open(self, ctx: RuntimeContext) -> None:
        self.buffers = (
            ctx.get_map_state(MapStateDescriptor("interval-join-left")),
            ctx.get_map_state(MapStateDescriptor("interval-join-right")),
        )
        if isinstance(self.join, Function):
            self.join.open(ctx)

    def finish(self) -> Iterable[Any] | None:
        return self.join.finish() if isinstance(self.join, Function) else None

    def close(self) -> None:
        if isinstance(self.join, Function):
            self.join.close()

    def on_timer(self, timestamp: int, ctx: KeyedProcessContext) -> Iterable[Any] | None:
        # A row's timer is its cleanup time (see `IntervalJoinOperator.process_input`): the timer at T
        # is the left rows' at T - upper - 1 and the right rows' at T + lower - 1, both due now. Every
        # buffered timestamp has its timer, so the rows it removes are exactly the expired ones.
        assert self.buffers is not None
        left, right = self.buffers
        left.remove(timestamp - self.upper - 1)
        right.remove(timestamp + self.lower - 1)
        return None


class IntervalJoinOperator(KeyedProcessOperator):
    two_inputs = True

    def __init__(
        self,
        uid: str,
        key_selectors: tuple[Callable[[Any], Any], Callable[[Any], Any]],
        join: IntervalJoin,
    ) -> None:
        super().__init__(uid, key_selectors[0], join)  # type: ignore[arg-type]
        self.key_selectors = key_selectors
        self.join = join
        self._pair = JoinContext()

    def check_function(self, uid: str, fn: Any) -> None:
        if not isinstance(fn, IntervalJoin):
            raise TypeError(f"operator {uid!r}: an interval join operator needs an IntervalJoin")

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        self.process_input(0, values, timestamps)

    def process_input(self, input_index: int, values: list[Any], timestamps: list[int] | None) -> None:
        if timestamps is None:
            raise ValueError(
                f"interval join {self.uid!r}: the {_SIDES[input_index]} input's records carry no timestamp; "
                "call assign_timestamps(...) (or read a source with timestamps) before the join"
            )
        backend = self.ctx.keyed_backend
        join = self.join
        assert backend is not None and join.buffers is not None
        from_left = input_index == 0
        mine, theirs = join.buffers if from_left else join.buffers[::-1]
        key_of = self.key_selectors[input_index]
        watermark = self.timers.watermark
        # A partner of a left row at t lies in [t + lower, t + upper]; of a right row, [t - upper, t - lower].
        low, high = (join.lower, join.upper) if from_left else (-join.upper, -join.lower)
        cleanup = join.upper + 1 if from_left else 1 - join.lower
        register = self.timers.event.register
        if isinstance(join.join, ProcessJoinFunction):
            pair_up = self._described_left if from_left else self._described_right
        else:
            pair_up = self._pairs_left if from_left else self._pairs_right
        out: list[Any] = []
        out_ts: list[int] = []
        late = 0
        records = iter(values)
        try:
            for value, ts in zip(records, timestamps, strict=True):
                if ts < watermark:
                    late += 1
                    continue
                key = key_of(value)
                backend.current_key = key
                rows = mine.get(ts)
                if rows is None:
                    mine.put(ts, [value])
                    # One timer per (key, timestamp): the rows of one timestamp go together.
                    register(key, ts + cleanup)
                else:
                    mine.put(ts, [*rows, value])
                pair_up(key, value, ts, theirs.items(), ts + low, ts + high, out, out_ts)
        except Exception as error:
            mark_record(error, values, index_reached(values, records))
            raise
        finally:
            self.ctx.metrics.late_records_dropped += late
        self._flush(out, out_ts, True)

    # Each of the four below pairs one row (`value` at `ts`) with the other input's buffered rows
    # (`(timestamp, rows)` entries) whose timestamps lie in [lo, hi]; a result carries the later timestamp
    # of its two rows. One call per record: the filter runs in the loop that emits.

    def _pairs_left(
        self,
        key: Any,
        value: Any,
        ts: int,
        entries: _Entries,
        lo: int,
        hi: int,
        out: list[Any],
        out_ts: list[int],
    ) -> None:
        fn = self.join.join
        for other_ts, others in entries:
            if not lo <= other_ts <= hi:
                continue
            stamp = other_ts if other_ts > ts else ts
            for other in others:
                out.append(fn(value, other))  # type: ignore[operator]
                out_ts.append(stamp)

    def _pairs_right(
        self,
        key: Any,
        value: Any,
        ts: int,
        entries: _Entries,
        lo: int,
        hi: int,
        out: list[Any],
        out_ts: list[int],
    ) -> None:
        fn = self.join.join
        for other_ts, others in entries:
            if not lo <= other_ts <= hi:
                continue
            stamp = other_ts if other_ts > ts else ts
            for other in others:
                out.append(fn(other, value))  # type: ignore[operator]
                out_ts.append(stamp)

    def _described_left(
        self,
        key: Any,
        value: Any,
        ts: int,
        entries: _Entries,
        lo: int,
        hi: int,
        out: list[Any],
        out_ts: list[int],
    ) -> None:
        for other_ts, others in entries:
            if not lo <= other_ts <= hi:
                continue
            for other in others:
                self._describe(key, value, ts, other, other_ts, out, out_ts)

    def _described_right(
        self,
        key: Any,
        value: Any,
        ts: int,
        entries: _Entries,
        lo: int,
        hi: int,
        out: list[Any],
        out_ts: list[int],
    ) -> None:
        for other_ts, others in entries:
            if not lo <= other_ts <= hi:
                continue
            for other in others:
                self._describe(key, other, other_ts, value, ts, out, out_ts)

    def _describe(
        self, key: Any, left: Any, left_ts: int, right: Any, right_ts: int, out: list[Any], out_ts: list[int]
    ) -> None:
        """One pair through a ProcessJoinFunction, which sees both timestamps and the key."""
        fn = self.join.join
        assert isinstance(fn, ProcessJoinFunction)
        pair = self._pair
        pair.key, pair.left_timestamp, pair.right_timestamp = key, left_ts, right_ts
        produced = fn.process_element(left, right, pair)
        if produced is not None:
            before = len(out)
            out.extend(produced)
            out_ts.extend([max(left_ts, right_ts)] * (len(out) - before))

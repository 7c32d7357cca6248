"""The interval join: `a.key_by(ka).interval_join(b.key_by(kb)).between(lower, upper).process(fn)`.

For each key, a left row at `lt` and a right row at `rt` pair when `lt + lower <= rt <= lt + upper`.
Each side's rows wait in keyed state (a map from timestamp to the rows of that timestamp) for partners
from the other side. A row is dropped once no partner can come any more: the watermark `W` promises no
row earlier than `W`, so a left row at `lt` is done when `W > lt + upper`, a right row at `rt` when
`W > rt - lower`; an event-time timer per row's cleanup time removes it, so an unbounded join holds
steady state. A row that is already late (earlier than the watermark) could miss partners that were
dropped and is dropped itself, as in Flink, and counted in `lateRecordsDropped`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sluice.engine.operators.keyed import KeyedProcessContext, KeyedProcessOperator
from sluice.functions import Function, ProcessJoinFunction, RuntimeContext
from sluice.state.descriptors import MapStateDescriptor
from sluice.state.keyed import MapState

_SIDES = ("left", "right")


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
        assert self.buffers is not None
        left, right = self.buffers
        stamps = left.keys()
        for row_ts in [t for t in stamps if t + self.upper < timestamp]:
            left.remove(row_ts)
        stamps = right.keys()
        for row_ts in [t for t in stamps if t - self.lower < timestamp]:
            right.remove(row_ts)
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
        mine, theirs = join.buffers if input_index == 0 else join.buffers[::-1]
        key_of = self.key_selectors[input_index]
        watermark = self.timers.watermark
        # A partner of a left row at t lies in [t + lower, t + upper]; of a right row, [t - upper, t - lower].
        low, high = (join.lower, join.upper) if input_index == 0 else (-join.upper, -join.lower)
        cleanup = join.upper + 1 if input_index == 0 else 1 - join.lower
        out: list[Any] = []
        out_ts: list[int] = []
        pair = self._pair
        for value, ts in zip(values, timestamps, strict=True):
            if ts < watermark:
                self.ctx.metrics.late_records_dropped += 1
                continue
            key = key_of(value)
            backend.current_key = pair.key = key
            rows = mine.get(ts)
            mine.put(ts, [value] if rows is None else [*rows, value])
            self.timers.event.register(key, ts + cleanup)
            for other_ts, others in theirs.items():
                if ts + low <= other_ts <= ts + high:
                    for other in others:
                        if input_index == 0:
                            self._emit_pair(value, ts, other, other_ts, out, out_ts)
                        else:
                            self._emit_pair(other, other_ts, value, ts, out, out_ts)
        self._flush(out, out_ts, True)

    def _emit_pair(
        self, left: Any, left_ts: int, right: Any, right_ts: int, out: list[Any], out_ts: list[int]
    ) -> None:
        join = self.join.join
        stamp = max(left_ts, right_ts)
        if isinstance(join, ProcessJoinFunction):
            pair = self._pair
            pair.left_timestamp, pair.right_timestamp = left_ts, right_ts
            produced = join.process_element(left, right, pair)
            if produced is not None:
                before = len(out)
                out.extend(produced)
                out_ts.extend([stamp] * (len(out) - before))
            return
        out.append(join(left, right))
        out_ts.append(stamp)

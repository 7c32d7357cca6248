"""A tour of the pipeline API: union, filter, flat_map, keyed process functions with keyed state and
event-time timers, sliding windows with an aggregate function, broadcast, rebalance and per-operator
parallelism. Bounded: it ends by itself, each output exactly once.

    sluice run examples/api_tour.py --arg out=/tmp/tour --parallelism 2

Outputs under `out`:
  per-second/   ["user", user, second, records, amount]: per user and event-time second, from a
                keyed process function that buffers in MapState and emits on an event-time timer
  averages/     [user, window_end, average amount] over 2 s windows sliding by 1 s
  broadcast/    every "rule" record once per subtask of a parallelism-3 operator
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sluice
from sluice.connectors import FileSink, GeneratorSource, SequenceSource
from sluice.windows import SlidingEventTimeWindows

USERS = 37


def purchase(i: int) -> tuple[int, int, int]:
    """(user, amount, event time ms) of purchase i."""
    return (i % USERS, i % 13, i // 4)


class PerSecond(sluice.KeyedProcessFunction):
    """Buffers each user's records per event-time second and emits the second once it is complete."""

    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.seconds = ctx.get_map_state(sluice.MapStateDescriptor("seconds"))
        self.total = ctx.get_state(sluice.ValueStateDescriptor("total", default=0))
        self.recent = ctx.get_list_state(sluice.ListStateDescriptor("recent"))

    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
        _, amount, ts = value
        second = ts // 1000
        records, money = self.seconds.get(second, (0, 0))
        self.seconds.put(second, (records + 1, money + amount))
        self.total.update((self.total.value() or 0) + 1)
        self.recent.update([*self.recent.get(), amount][-3:])
        ctx.timer_service.register_event_time_timer(second * 1000 + 999)

    def on_timer(self, timestamp: int, ctx: sluice.KeyedContext) -> Iterable[Any]:
        second = timestamp // 1000
        records, money = self.seconds.get(second)
        self.seconds.remove(second)
        yield ("user", ctx.key, second, records, money)


class Average(sluice.AggregateFunction):
    def create_accumulator(self) -> tuple[int, int, int]:
        return (0, 0, 0)

    def add(self, value: Any, accumulator: tuple[int, int, int]) -> tuple[int, int, int]:
        user, amount, _ = value
        return (user, accumulator[1] + amount, accumulator[2] + 1)

    def get_result(self, accumulator: tuple[int, int, int]) -> tuple[int, float]:
        return (accumulator[0], round(accumulator[1] / accumulator[2], 6))


def build(env: sluice.StreamEnvironment) -> None:
    n = int(env.args.get("n", "40000"))
    out = env.args["out"]
    # Two sources of purchases: even i from a sequence, odd i from a generator, merged with union. Each
    # source assigns its own timestamps: after the union the watermark is the minimum of both inputs,
    # so neither source's records can arrive late (a watermark generated after the union could not
    # know how far behind the other input is).
    evens = (
        env.from_source(SequenceSource(0, n // 2, splits=2), uid="evens-source")
        .map(lambda k: purchase(2 * k), uid="evens")
        .assign_timestamps(lambda p: p[2], max_out_of_orderness_ms=0, uid="evens-ts")
    )
    odds = (
        env.from_source(GeneratorSource(lambda i: i, splits=2, count=n), uid="odds-source")
        .filter(lambda i: i % 2 == 1, uid="odd-only")
        .flat_map(lambda i: [purchase(i)], uid="odds")
        .assign_timestamps(lambda p: p[2], max_out_of_orderness_ms=0, uid="odds-ts")
    )
    stamped = evens.union(odds)
    (
        stamped.key_by(lambda p: p[0])
        .process(PerSecond(), uid="per-second")
        .sink_to(FileSink(f"{out}/per-second"), uid="per-second-sink")
    )
    (
        stamped.key_by(lambda p: p[0])
        .window(SlidingEventTimeWindows.of_millis(2000, 1000))
        .aggregate(Average(), uid="averages")
        .map(list, uid="as-list")
        .sink_to(FileSink(f"{out}/averages"), uid="averages-sink")
    )
    (
        env.from_source(SequenceSource(0, 5), uid="rules-source")
        .map(lambda r: ("rule", r), uid="rules")
        .broadcast()
        .map(lambda r: r, uid="everywhere")
        .set_parallelism(3)
        .rebalance()
        .sink_to(FileSink(f"{out}/broadcast"), uid="broadcast-sink")
    )

"""A rate-limited bounded job that runs long enough to be interrupted: per-key windowed counts and sums.

Args: out (required), count (records), rate (records/s), keys, splits, kind, hold.
Record i has key i % keys and timestamp i * 10 ms; output per (key, 1 s window): [key, count, sum of i].
`kind=window` (the default) counts with a tumbling event-time window; `kind=process` computes the same
with a keyed process function over keyed state (map, list and value state, event-time timers), which
is what `--state-backend` keeps.
`hold=PATH`: while the file PATH exists, every split holds back its records from 90% of `count` on, so a
test that must hit a running job (a kill, a stop) cannot lose the race to the job's end on a slow
machine; the test removes the file to let the job finish.
"""

import os
from collections.abc import Iterator
from typing import Any

import sluice
from sluice.connectors import FileSink, GeneratorSource
from sluice.connectors.base import SplitReader
from sluice.connectors.generator import GeneratorSplit
from sluice.windows import TumblingEventTimeWindows

WINDOW_MS = 1000


class WindowedCounts(sluice.KeyedProcessFunction):
    """Tumbling 1 s windows by hand: per window end, [count, sum] in map state; a timer per window."""

    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.windows = ctx.get_map_state(sluice.MapStateDescriptor("windows"))
        self.open_ends = ctx.get_list_state(sluice.ListStateDescriptor("open-ends"))
        self.last_fired = ctx.get_state(sluice.ValueStateDescriptor("last-fired", default=-1))

    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
        _, one, i = value
        assert ctx.timestamp is not None
        end = ctx.timestamp - ctx.timestamp % WINDOW_MS + WINDOW_MS
        acc = self.windows.get(end)
        if acc is None:
            acc = (0, 0)
            self.open_ends.add(end)
            ctx.timer_service.register_event_time_timer(end - 1)
        self.windows.put(end, (acc[0] + one, acc[1] + i))

    def on_timer(self, timestamp: int, ctx: sluice.KeyedContext) -> Iterator[Any]:
        end = timestamp + 1
        ends = self.open_ends.get()
        acc = self.windows.get(end)
        # Lost or doubled state fails the job rather than writing a wrong line.
        if acc is None or end not in ends or end <= (self.last_fired.value() or -1):
            raise RuntimeError(f"key {ctx.key}: window ending {end} has no state or fired before")
        self.open_ends.update([e for e in ends if e != end])
        self.windows.remove(end)
        self.last_fired.update(end)
        yield (ctx.key, acc[0], acc[1])


class HeldGeneratorSource(GeneratorSource):
    """A GeneratorSource whose splits stop short of their last tenth while the file `hold` exists."""

    def __init__(self, hold: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hold, self.held_from = hold, (self.count or 0) * 9 // 10

    def open_split(self, split: GeneratorSplit) -> SplitReader[GeneratorSplit]:
        return _HeldReader(self, super().open_split(split))


class _HeldReader(SplitReader[GeneratorSplit]):
    def __init__(self, source: HeldGeneratorSource, reader: SplitReader[GeneratorSplit]) -> None:
        self.source, self.reader = source, reader

    def read(self, max_records: int) -> list[Any] | None:
        if self.reader.position().next >= self.source.held_from and os.path.exists(self.source.hold):
            return []  # nothing for now: checkpoints go on, the split does not end
        return self.reader.read(max_records)

    def position(self) -> GeneratorSplit:
        return self.reader.position()

    def close(self) -> None:
        self.reader.close()


def build(env: sluice.StreamEnvironment) -> None:
    count = int(env.args.get("count", "60000"))
    rate = float(env.args.get("rate", "20000"))
    keys = int(env.args.get("keys", "50"))
    splits = int(env.args.get("splits", "2"))
    kind = env.args.get("kind", "window")
    hold = env.args.get("hold")
    source = (
        HeldGeneratorSource(hold, fn=lambda i: i, splits=splits, rate=rate, count=count)
        if hold
        else GeneratorSource(lambda i: i, splits=splits, rate=rate, count=count)
    )
    keyed = (
        env.from_source(source, uid="gen")
        .assign_timestamps(lambda i: i * 10, max_out_of_orderness_ms=5000, uid="ts")
        .map(lambda i: (i % keys, 1, i), uid="pair")
        .key_by(lambda e: e[0])
    )
    if kind == "window":
        counts = keyed.window(TumblingEventTimeWindows.of_millis(WINDOW_MS)).reduce(
            lambda a, b: (a[0], a[1] + b[1], a[2] + b[2]), uid="count"
        )
    elif kind == "process":
        counts = keyed.process(WindowedCounts(), uid="count")
    else:
        raise ValueError(f"kind must be window or process, not {kind!r}")
    counts.sink_to(FileSink(env.args["out"]), uid="sink")

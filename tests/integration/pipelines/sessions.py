"""Per-key session windows (gap 500 ms) over a rate-limited bounded stream, for fault and rescale tests.

Args: out (required), count, rate, kind (reduce | aggregate | process), lateness (ms, 0: none).
Record i: key i % 20, timestamp i * 10 ms + (i // 1000) * 2000 ms. A key's records are 200 ms apart
inside a block of 1000 records and 2 s apart between blocks: one session per (key, block).
Output per session: [key, count, sum of i] (process: [key, count, sum, start, end]).
"""

from collections.abc import Iterator
from typing import Any

import sluice
from sluice.connectors import FileSink, GeneratorSource
from sluice.windows import EventTimeSessionWindows, TimeWindow

KEYS = 20


def timestamp(i: int) -> int:
    return i * 10 + (i // 1000) * 2000


class CountSum(sluice.AggregateFunction):
    def create_accumulator(self) -> tuple[int, int, int]:
        return (-1, 0, 0)

    def add(self, value: tuple[int, int, int], accumulator: tuple[int, int, int]) -> tuple[int, int, int]:
        return (value[0], accumulator[1] + value[1], accumulator[2] + value[2])

    def merge(self, first: tuple[int, int, int], second: tuple[int, int, int]) -> tuple[int, int, int]:
        return (max(first[0], second[0]), first[1] + second[1], first[2] + second[2])

    def get_result(self, accumulator: tuple[int, int, int]) -> tuple[int, int, int]:
        return accumulator


class Describe(sluice.ProcessWindowFunction):
    def process(self, key: Any, window: TimeWindow, elements: list[Any]) -> Iterator[Any]:
        yield (key, len(elements), sum(i for _, _, i in elements), window.start, window.end)


def build(env: sluice.StreamEnvironment) -> None:
    count = int(env.args.get("count", "20000"))
    rate = float(env.args.get("rate", "0")) or None
    kind = env.args.get("kind", "reduce")
    lateness = int(env.args.get("lateness", "0"))
    windowed = (
        env.from_source(
            GeneratorSource(lambda i: (i % KEYS, 1, i), count=count, splits=2, rate=rate),
            uid="gen",
            watermarks=sluice.WatermarkStrategy(lambda r: timestamp(r[2]), max_out_of_orderness_ms=100),
        )
        .key_by(lambda r: r[0])
        .window(EventTimeSessionWindows.with_gap_millis(500))
    )
    if lateness:
        windowed = windowed.allowed_lateness_millis(lateness)
    if kind == "reduce":
        sessions = windowed.reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2]), uid="sessions")
    elif kind == "aggregate":
        sessions = windowed.aggregate(CountSum(), uid="sessions")
    else:
        sessions = windowed.process(Describe(), uid="sessions")
    sessions.sink_to(FileSink(env.args["out"]), uid="sink")

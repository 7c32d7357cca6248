"""Two source splits of very different lengths, read by two subtasks: one finishes early, one runs on.

Args: out (required), short (records of split 0), long (records of split 1), rate (records/s of split 1),
union_state ("1": a process function keeps union list state, which FLIP-147 cannot checkpoint once
some of its subtasks have finished). Records are (split, i); output per (split, 1 s window of i ms):
[split, count].
"""

import time
from typing import Any

import sluice
from sluice.connectors import FileSink, Source, SplitReader
from sluice.windows import TumblingEventTimeWindows


class UnevenSource(Source[tuple[int, int, int]]):
    bounded = True

    def __init__(self, short: int, long: int, rate: float) -> None:
        self.lengths = (short, long)
        self.rate = rate

    def splits(self) -> list[tuple[int, int, int]]:
        return [(0, 0, self.lengths[0]), (1, 0, self.lengths[1])]

    def open_split(self, split: tuple[int, int, int]) -> SplitReader[tuple[int, int, int]]:
        return _Reader(split, self.rate if split[0] == 1 else None)


class _Reader(SplitReader[tuple[int, int, int]]):
    def __init__(self, split: tuple[int, int, int], rate: float | None) -> None:
        self.split, self.next, self.end = split
        self.rate = rate
        self.started, self.first = time.monotonic(), self.next

    def read(self, max_records: int) -> list[Any] | None:
        if self.next >= self.end:
            return None
        upto = (
            self.end if self.rate is None else self.first + int((time.monotonic() - self.started) * self.rate)
        )
        upto = min(upto, self.next + max_records, self.end)
        batch = [(self.split, i) for i in range(self.next, upto)]
        self.next = max(self.next, upto)
        return batch

    def position(self) -> tuple[int, int, int]:
        return (self.split, self.next, self.end)


class UnionStateCounter(sluice.ProcessFunction):
    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.seen = ctx.get_union_list_state("seen")

    def process_element(self, value: Any, timestamp: int | None) -> list[Any]:
        if not self.seen:
            self.seen.append(0)
        self.seen[0] += 1
        return [value]


def build(env: sluice.StreamEnvironment) -> None:
    source = UnevenSource(
        int(env.args.get("short", "100")),
        int(env.args.get("long", "20000")),
        float(env.args.get("rate", "4000")),
    )
    stream = env.from_source(source, uid="uneven").set_parallelism(2)
    if env.args.get("union_state") == "1":
        stream = stream.process(UnionStateCounter(), uid="union-counter").set_parallelism(2)
    (
        stream.assign_timestamps(lambda e: e[1], max_out_of_orderness_ms=0, uid="ts")
        .set_parallelism(2)
        .map(lambda e: (e[0], 1), uid="ones")
        .set_parallelism(2)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of_millis(1000))
        .reduce(lambda a, b: (a[0], a[1] + b[1]), uid="count")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )

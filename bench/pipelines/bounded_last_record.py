"""A bounded job that notes when its source handed over its last record (for end-to-FINISHED delay).

Args: n, out, mark (a file: the wall-clock time of the end of input is written there by finish()).
"""

import time

import sluice
from sluice.connectors import FileSink, SequenceSource
from sluice.windows import TumblingEventTimeWindows


class MarkEndOfInput(sluice.MapFunction):
    def __init__(self, mark: str) -> None:
        self.mark = mark

    def map(self, value: int) -> int:
        return value

    def finish(self) -> None:
        with open(self.mark, "a") as handle:
            handle.write(f"{time.time()}\n")


def build(env: sluice.StreamEnvironment) -> None:
    n = int(env.args.get("n", "200000"))
    (
        env.from_source(SequenceSource(0, n, splits=2), uid="numbers")
        .map(MarkEndOfInput(env.args["mark"]), uid="mark")
        .map(lambda i: ((i * 7919) % 1000, i // 10, i % 100), uid="parse")
        .assign_timestamps(lambda e: e[1], max_out_of_orderness_ms=0, uid="ts")
        .map(lambda e: (e[0], 1, e[2]), uid="ones")
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of_millis(1000))
        .reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2]), uid="count")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )

"""A busy source and a silent one, unioned into event-time windows. Args: out, idleness (ms, or "none").

The silent source emits one record and then nothing, forever: without idleness its watermark never
moves and no window can fire; marked idle, it stops holding event time back.
"""

from typing import Any

import sluice
from sluice.connectors import FileSink, GeneratorSource, Source, SplitReader
from sluice.windows import TumblingEventTimeWindows


class SilentSource(Source[int]):
    bounded = False

    def splits(self) -> list[int]:
        return [0]

    def open_split(self, split: int) -> SplitReader[int]:
        return _Silent(split)


class _Silent(SplitReader[int]):
    def __init__(self, sent: int) -> None:
        self.sent = sent

    def read(self, max_records: int) -> list[Any] | None:
        if self.sent:
            return []
        self.sent = 1
        return [0]

    def position(self) -> int:
        return self.sent


def build(env: sluice.StreamEnvironment) -> None:
    idleness = None if env.args.get("idleness", "none") == "none" else int(env.args["idleness"])
    busy = env.from_source(GeneratorSource(lambda i: i, rate=2000), uid="busy").assign_timestamps(
        lambda i: i, uid="busy-ts"
    )
    silent = env.from_source(SilentSource(), uid="silent").assign_timestamps(
        lambda i: i, uid="silent-ts", idleness_ms=idleness
    )
    (
        busy.union(silent)
        .map(lambda i: (i % 5, 1), uid="ones")
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of_millis(1000))
        .reduce(lambda a, b: (a[0], a[1] + b[1]), uid="count")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )

"""W1's logic on an unbounded, rate-limited stream of the same events (for stop-with-savepoint latency)."""

import sluice
from sluice.connectors import FileSink, GeneratorSource
from sluice.windows import TumblingEventTimeWindows


def build(env: sluice.StreamEnvironment) -> None:
    rate = float(env.args.get("rate", "50000"))
    (
        env.from_source(
            GeneratorSource(lambda i: i, splits=4, rate=rate),
            uid="numbers",
            watermarks=sluice.WatermarkStrategy(lambda i: i // 10),  # per split: subtasks read several
        )
        .map(lambda i: ((i * 7919) % 1000, i // 10, i % 100), uid="parse")
        .map(lambda e: (e[0], 1, e[2]), uid="ones")
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of_millis(1000))
        .reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2]), uid="count")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )

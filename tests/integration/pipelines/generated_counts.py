"""A rate-limited bounded job that runs long enough to be interrupted: per-key windowed counts and sums.

Args: out (required), count (records), rate (records/s), keys, splits.
Record i has key i % keys and timestamp i * 10 ms; output per (key, 1 s window): [key, count, sum of i].
"""

import sluice
from sluice.connectors import FileSink, GeneratorSource
from sluice.windows import TumblingEventTimeWindows


def build(env: sluice.StreamEnvironment) -> None:
    count = int(env.args.get("count", "60000"))
    rate = float(env.args.get("rate", "20000"))
    keys = int(env.args.get("keys", "50"))
    splits = int(env.args.get("splits", "2"))
    (
        env.from_source(GeneratorSource(lambda i: i, splits=splits, rate=rate, count=count), uid="gen")
        .assign_timestamps(lambda i: i * 10, max_out_of_orderness_ms=5000, uid="ts")
        .map(lambda i: (i % keys, 1, i), uid="pair")
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of_millis(1000))
        .reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2]), uid="count")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )

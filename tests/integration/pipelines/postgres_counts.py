"""A bounded, rate-limited job writing its windowed counts exactly once into PostgreSQL.

Args: dsn, table, count, rate, keys. Rows: (k, win, n, total) per key and 1 s window of i ms.
"""

import sluice
from sluice.connectors import GeneratorSource, PostgresSink
from sluice.windows import TumblingEventTimeWindows


def build(env: sluice.StreamEnvironment) -> None:
    keys = int(env.args.get("keys", "10"))
    (
        env.from_source(
            GeneratorSource(
                lambda i: i,
                splits=2,
                rate=float(env.args.get("rate", "10000")),
                count=int(env.args.get("count", "30000")),
            ),
            uid="gen",
        )
        .assign_timestamps(lambda i: i, max_out_of_orderness_ms=0, uid="ts")
        .map(lambda i: (i % keys, i // 1000, 1, i), uid="row")
        .key_by(lambda e: (e[0], e[1]))
        .window(TumblingEventTimeWindows.of_millis(1000))
        .reduce(lambda a, b: (a[0], a[1], a[2] + b[2], a[3] + b[3]), uid="count")
        .sink_to(PostgresSink(env.args["dsn"], env.args["table"], ["k", "win", "n", "total"]), uid="pg")
    )

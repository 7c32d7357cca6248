"""One stream, two outputs: the raw records and their per-key counts in 1 s event-time windows.

Args: raw, counts (output URIs), rate, keys. Unbounded: stop it with a savepoint.
The counts add up to the raw records exactly when every window has fired (stop with drain).
"""

import sluice
from sluice.connectors import FileSink, GeneratorSource
from sluice.windows import TumblingEventTimeWindows


def build(env: sluice.StreamEnvironment) -> None:
    keys = int(env.args.get("keys", "20"))
    stamped = env.from_source(
        GeneratorSource(lambda i: i, splits=2, rate=float(env.args.get("rate", "5000"))),
        uid="gen",
        watermarks=sluice.WatermarkStrategy(lambda i: i, max_out_of_orderness_ms=100),
    )
    stamped.sink_to(FileSink(env.args["raw"]), uid="raw-sink")
    (
        stamped.map(lambda i: (i % keys, 1), uid="ones")
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of_millis(1000))
        .reduce(lambda a, b: (a[0], a[1] + b[1]), uid="count")
        .sink_to(FileSink(env.args["counts"]), uid="count-sink")
    )

"""An unbounded job: a rate-limited generator, per-key counts in 1 s event-time windows, exactly once.

    sluice run examples/unbounded_counts.py --arg out=/tmp/counts --arg rate=5000 --parallelism 2 \
        --checkpoint-dir file:///tmp/chk --savepoint-dir file:///tmp/savepoints

Record i has key i % keys and event time i * ms_per_record; each window result is
[key, window start in seconds, count, sum of i], so every line can be checked on its own.
Stop it with `sluice stop --address URL [--drain]`; resume with `--from-savepoint PATH`.
"""

import sluice
from sluice.connectors import FileSink, GeneratorSource
from sluice.windows import TumblingEventTimeWindows


def build(env: sluice.StreamEnvironment) -> None:
    rate = float(env.args.get("rate", "5000"))
    keys = int(env.args.get("keys", "100"))
    ms_per_record = int(env.args.get("ms_per_record", "1"))
    (
        env.from_source(
            GeneratorSource(lambda i: i, splits=2, rate=rate),
            uid="generator",
            # A watermark per split: a subtask that reads both splits waits for the one behind.
            watermarks=sluice.WatermarkStrategy(lambda i: i * ms_per_record, max_out_of_orderness_ms=1000),
        )
        .map(lambda i: (i % keys, i * ms_per_record // 1000, 1, i), uid="pair")
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of_millis(1000))
        .reduce(lambda a, b: (a[0], a[1], a[2] + b[2], a[3] + b[3]), uid="count")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )

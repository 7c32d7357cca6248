"""W7 on Sluice: an interval join (bound +-500 ms) of two streams of W1's shape, keyed by W1's key.

Args: n (events per side), out. Each side is a generator with two splits (event i in split i % 2, so
both splits advance in event time together) and a watermark per split; the pairs (left id, right id)
go to a transactional FileSink.
"""

import sluice
from sluice.connectors import FileSink, GeneratorSource

BOUND_MS = 500
START_MS = 1_767_225_600_000


def w7_event(i: int) -> tuple[int, int, int]:
    """(key, ts_ms, id): bench/_w7_events.py describes it (the reference's own copy is there)."""
    return (i * 7919) % 1000, START_MS + i // 10, i


def build(env: sluice.StreamEnvironment) -> None:
    n = int(env.args.get("n", "1000000"))
    sides = [
        env.from_source(
            GeneratorSource(w7_event, count=n, splits=2),
            uid=side,
            watermarks=sluice.WatermarkStrategy(lambda e: e[1], max_out_of_orderness_ms=0),
        ).key_by(lambda e: e[0])
        for side in ("left", "right")
    ]
    (
        sides[0]
        .interval_join(sides[1])
        .between(-BOUND_MS, BOUND_MS)
        .process(lambda left, right: (left[2], right[2]), uid="join")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )

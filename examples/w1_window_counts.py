"""W1: windowed counts over a bounded sequence, written exactly once to JSON-lines files.

    sluice run examples/w1_window_counts.py --arg n=2000000 --arg out=/tmp/out \
        --parallelism 2 --checkpoint-dir file:///tmp/chk --checkpoint-interval 1s
"""

import sluice
from sluice.connectors import FileSink, SequenceSource
from sluice.windows import TumblingEventTimeWindows


def build(env: sluice.StreamEnvironment) -> None:
    n = int(env.args.get("n", "100000"))
    (
        env.from_source(SequenceSource(0, n, splits=4), uid="numbers")
        .map(lambda i: ((i * 7919) % 1000, i // 10, i % 100), uid="parse")
        .assign_timestamps(lambda e: e[1], max_out_of_orderness_ms=0, uid="ts")
        .map(lambda e: (e[0], 1, e[2]), uid="ones")
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of_millis(1000))
        .reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2]), uid="count")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )

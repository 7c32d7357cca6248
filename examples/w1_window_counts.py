"""W1: windowed counts over a bounded sequence, written exactly once to JSON-lines files.

Each output line is `[key, window start (ms of event time), count, sum]`.

    sluice run examples/w1_window_counts.py --arg n=2000000 --arg out=/tmp/out \
        --parallelism 2 --checkpoint-dir file:///tmp/chk --checkpoint-interval 1s
"""

import sluice
from sluice.connectors import FileSink, SequenceSource
from sluice.windows import TumblingEventTimeWindows

WINDOW_MS = 1000


def build(env: sluice.StreamEnvironment) -> None:
    n = int(env.args.get("n", "100000"))
    (
        env.from_source(SequenceSource(0, n, splits=4), uid="numbers")
        .map(lambda i: ((i * 7919) % 1000, i // 10, i % 100), uid="parse")
        .assign_timestamps(lambda e: e[1], max_out_of_orderness_ms=0, uid="ts")
        # The start of the tumbling window the event falls in, carried in the record so the row shows it.
        .map(lambda e: (e[0], e[1] - e[1] % WINDOW_MS, 1, e[2]), uid="ones")
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of_millis(WINDOW_MS))
        .reduce(lambda a, b: (a[0], a[1], a[2] + b[2], a[3] + b[3]), uid="count")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )

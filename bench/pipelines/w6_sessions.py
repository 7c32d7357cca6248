"""W6 on Sluice: W1's events in per-key session windows (gap 500 ms), with 1% late events.

Args: n, out. The source runs at parallelism 1 (its 4 splits read side by side), so that which events
are late depends on the events, not on how far one source subtask ran ahead of another.
"""

import sluice
from sluice.connectors import FileSink, GeneratorSource
from sluice.windows import EventTimeSessionWindows

GAP_MS = 500


def w6_event(i: int) -> tuple[int, int, int]:
    """(key, ts_ms, v) of event i, as bench/_w6_events.py describes (the reference's own copy is there)."""
    ts = i // 10 + (i // 100_000) * 1000
    if i % 100 == 42 and i >= 200_000:
        ts -= 15_000
    return (i * 7919) % 1000, ts, i % 100


def build(env: sluice.StreamEnvironment) -> None:
    n = int(env.args.get("n", "1000000"))
    (
        env.from_source(
            GeneratorSource(w6_event, count=n, splits=4),
            uid="events",
            watermarks=sluice.WatermarkStrategy(lambda e: e[1], max_out_of_orderness_ms=0),
        )
        .set_parallelism(1)
        .map(lambda e: (e[0], e[1], e[1], 1, e[2]), uid="session-of-one")
        .key_by(lambda e: e[0])
        .window(EventTimeSessionWindows.with_gap_millis(GAP_MS))
        .reduce(
            lambda a, b: (a[0], min(a[1], b[1]), max(a[2], b[2]), a[3] + b[3], a[4] + b[4]), uid="sessions"
        )
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )

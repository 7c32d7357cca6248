"""Numbers 0..n-1 to a FileSink through a map that blocks its TaskManager's event loop once, for `stall`
seconds, when it sees the number n // 2 (as a sink call stuck on slow storage does). Args: n, stall, out."""

import time

import sluice
from sluice.connectors import FileSink, SequenceSource


def build(env: sluice.StreamEnvironment) -> None:
    n, stall = int(env.args["n"]), float(env.args["stall"])

    def stall_once(i: int) -> int:
        if i == n // 2:
            time.sleep(stall)
        return i

    (
        env.from_source(SequenceSource(0, n, splits=1), uid="numbers")
        .map(stall_once, uid="stall")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )

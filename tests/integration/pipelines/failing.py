"""A job whose map fails on one record every time: it restarts until the strategy gives up."""

import sluice
from sluice.connectors import FileSink, SequenceSource


def explode(i: int) -> int:
    if i == 500:
        raise ValueError(f"record {i} is poison")
    return i


def build(env: sluice.StreamEnvironment) -> None:
    (
        env.from_source(SequenceSource(0, 1000), uid="numbers")
        .map(explode, uid="explode")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )

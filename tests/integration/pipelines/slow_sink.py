"""A fast unbounded source feeding a sink that takes 50 ms per batch: backpressure must slow the source."""

import time
from typing import Any

import sluice
from sluice.connectors import GeneratorSource, Sink, SinkWriter


class SlowSink(Sink):
    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _SlowWriter()


class _SlowWriter(SinkWriter):
    def write(self, values: list[Any], timestamps: list[int] | None) -> None:
        time.sleep(0.05)


def build(env: sluice.StreamEnvironment) -> None:
    (
        env.from_source(GeneratorSource(lambda i: f"{i:>20}" + "x" * 80), uid="fast")
        .set_parallelism(1)
        .rebalance()
        .sink_to(SlowSink(), uid="slow")
        .set_parallelism(2)
    )

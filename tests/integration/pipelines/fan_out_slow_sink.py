"""Two unbounded sources feeding one sink that takes 50 ms per batch: the sink's input queues fill and
the sources spend most of their time waiting for room (backpressured), the sink most of its time working
(busy). Run with one TaskManager, so that the channels between them are local."""

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
        env.from_source(GeneratorSource(lambda i: i, splits=2), uid="numbers")
        .set_parallelism(2)
        .rebalance()
        .sink_to(SlowSink(), uid="slow")
        .set_parallelism(1)
    )

"""Reads a Kafka topic and writes [partition, offset, value] exactly once into files.

Args: bootstrap, topic, out; bounded (0/1, default 1); rate (records per second over all splits, default
unlimited); discovery_ms (default 10000); splits (default: one per partition); group (consumer group,
default none); starting (starting_offsets, default earliest).
"""

from typing import Any

import sluice
from sluice.connectors import FileSink, KafkaRecord, KafkaSource


class _Paced(KafkaSource):
    """A KafkaSource read no faster than `rate`, so a test can act while the job runs."""

    def __init__(self, rate: float | None, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rate = rate

    def records_per_second(self) -> float | None:
        return self.rate


def _row(record: KafkaRecord) -> list[Any]:
    return [record.partition, record.offset, record.value]


def build(env: sluice.StreamEnvironment) -> None:
    rate = env.args.get("rate")
    source = _Paced(
        float(rate) if rate else None,
        env.args["bootstrap"],
        env.args["topic"],
        bounded=env.args.get("bounded", "1") == "1",
        value_format="str",
        with_metadata=True,
        discovery_interval_ms=int(env.args.get("discovery_ms", "10000")),
        splits=int(env.args["splits"]) if "splits" in env.args else None,
        group_id=env.args.get("group"),
        starting_offsets=env.args.get("starting", "earliest"),
    )
    env.from_source(source, uid="kafka").map(_row, uid="row").sink_to(FileSink(env.args["out"]), uid="files")

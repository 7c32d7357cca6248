"""Two Kafka sources into one FileSink: `bounded_topic` read up to its offsets at start, `topic` without end.

Args: bootstrap, bounded_topic, topic, out. Rows: [topic, partition, offset, value].
"""

from typing import Any

import sluice
from sluice.connectors import FileSink, KafkaRecord, KafkaSource


def _row(record: KafkaRecord) -> list[Any]:
    return [record.topic, record.partition, record.offset, record.value]


def build(env: sluice.StreamEnvironment) -> None:
    bootstrap = env.args["bootstrap"]
    finite = KafkaSource(
        bootstrap, env.args["bounded_topic"], bounded=True, value_format="str", with_metadata=True
    )
    endless = KafkaSource(
        bootstrap, env.args["topic"], value_format="str", with_metadata=True, discovery_interval_ms=500
    )
    a = env.from_source(finite, uid="finite").map(_row, uid="finite-rows")
    b = env.from_source(endless, uid="endless").map(_row, uid="endless-rows")
    a.union(b).sink_to(FileSink(env.args["out"]), uid="files")

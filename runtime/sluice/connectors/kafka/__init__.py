"""Kafka: `KafkaSource` (offsets in Sluice's checkpoints) and `KafkaSink` (transactions, exactly once).

Needs the `kafka` extra (confluent-kafka); it is imported only when a source or sink talks to Kafka.
Guarantees, transactional ids and settings: docs/connectors/kafka.md, and the docstrings of
`sluice.connectors.kafka.source` and `sluice.connectors.kafka.sink`.
"""

from sluice.connectors.kafka._at_least_once import KafkaAtLeastOnceSink
from sluice.connectors.kafka._common import KafkaRecord
from sluice.connectors.kafka.sink import (
    KafkaCommittable,
    KafkaSink,
    KafkaTransactionalSink,
)
from sluice.connectors.kafka.source import KafkaSource, KafkaSplit

__all__ = [
    "KafkaAtLeastOnceSink",
    "KafkaCommittable",
    "KafkaRecord",
    "KafkaSink",
    "KafkaSource",
    "KafkaSplit",
    "KafkaTransactionalSink",
]

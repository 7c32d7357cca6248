"""Settling a transaction after a restore: fencing transactional ids and finding out what committed."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from sluice.connectors.kafka._common import TXN_HEADER

if TYPE_CHECKING:
    from confluent_kafka import Producer


class Probed(Protocol):
    """What settling needs of a committable (`sink.KafkaCommittable`): its transaction's tag and where
    its first record went."""

    @property
    def tag(self) -> str: ...
    @property
    def probe_partition(self) -> int: ...
    @property
    def probe_offset(self) -> int: ...


def fenced_producer(config: dict[str, Any], txn_id: str, timeout: float) -> Producer:
    """A producer that owns `txn_id` now: the broker completes a commit the previous owner had begun,
    aborts any other transaction of it, and refuses that owner from then on."""
    from confluent_kafka import Producer

    producer = Producer({**config, "transactional.id": txn_id})
    producer.init_transactions(timeout)
    return producer


def already_committed(config: dict[str, Any], topic: str, committable: Probed, timeout: float) -> bool:
    """Whether a record tagged `committable.tag` is among the committed records of its partition, at
    or after the tagged record's first offset. Call after fencing: then that transaction is settled.

    The consumer waits until the last stable offset passes the tagged record (an open transaction of
    another producer that started earlier holds it back; the restore fences those of this job)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **config,
            "group.id": f"sluice-settle-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    tag = committable.tag.encode()
    partition = TopicPartition(topic, committable.probe_partition)
    deadline = time.monotonic() + timeout
    try:
        while True:
            _, stable = consumer.get_watermark_offsets(partition, timeout, False)
            if stable > committable.probe_offset:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"KafkaSink: partition {committable.probe_partition} of {topic} stays held back by an "
                    f"open transaction before offset {committable.probe_offset} for {timeout}s"
                )
            time.sleep(0.1)
        consumer.assign([TopicPartition(topic, committable.probe_partition, committable.probe_offset)])
        while time.monotonic() <= deadline:
            for message in consumer.consume(500, 0.5):
                if message.error() is not None:
                    continue
                headers = message.headers() or []
                pairs = headers.items() if isinstance(headers, dict) else headers
                if any(k == TXN_HEADER and v == tag for k, v in pairs):
                    return True
            (position,) = consumer.position([partition])
            if position.offset >= stable:
                return False
        raise TimeoutError(f"KafkaSink: reading {topic} up to offset {stable} took more than {timeout}s")
    finally:
        consumer.close()

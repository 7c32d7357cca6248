"""The Kafka test broker itself: topics, plain and transactional records, the last stable offset."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from confluent_kafka import Producer

from testkit.kafka import KafkaBroker, kafka_libs, unique_topic

pytestmark = pytest.mark.kafka


def test_an_open_transaction_holds_back_read_committed_consumers_until_it_commits(
    kafka_broker: KafkaBroker,
) -> None:
    topic = kafka_broker.create_topic(unique_topic(), partitions=2)
    kafka_broker.produce(topic, [b"plain-%d" % i for i in range(3)], partition=0)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "transactional.id": topic})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, b"txn-%d" % i, partition=1)
    producer.flush(30)
    assert kafka_broker.open_transactions() == [topic]
    assert kafka_broker.end_offsets(topic) == {0: 3, 1: 0}
    assert kafka_broker.end_offsets(topic, read_committed=False) == {0: 3, 1: 4}
    producer.commit_transaction(30)
    # The commit marker takes an offset of its own.
    assert kafka_broker.wait_stable(topic) == {0: 3, 1: 5}
    values = sorted(v for _, _, v in kafka_broker.consume_all(topic) if v is not None)
    assert values == sorted([b"plain-0", b"plain-1", b"plain-2", b"txn-0", b"txn-1", b"txn-2", b"txn-3"])
    assert kafka_broker.open_transactions() == []


def test_a_broker_that_cannot_start_says_why(tmp_path: Path) -> None:
    """Kafka logs through SLF4J 1.7: without a binding among its jars (hack/kafka/pom.xml) every line is
    dropped, and a broker that exits at start leaves the test nothing but its exit code (seen once,
    in the Kafka bench's smoke test)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        broker = KafkaBroker(kafka_libs(), tmp_path, port=taken.getsockname()[1])
        try:
            with pytest.raises(RuntimeError, match="the Kafka broker exited") as failure:
                broker.start()
        finally:
            broker.stop()
    assert "Address already in use" in str(failure.value)

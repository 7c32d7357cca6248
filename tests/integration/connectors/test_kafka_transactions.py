"""KafkaTransactionalSink's restore path, driven directly against the real broker.

A "crash" is a sink object dropped with its producers; the restore is a new sink object given the
committable, as the engine does after a restart: commit it again, then `recover`. Which of the cases
happens in a job depends on where the kill lands; here each one is made to happen.
"""

from __future__ import annotations

import collections

import pytest

from sluice.connectors import KafkaSink
from sluice.connectors.base import TransactionContext
from sluice.connectors.kafka import KafkaCommittable, KafkaTransactionalSink
from testkit.kafka import KafkaBroker, unique_topic

pytestmark = pytest.mark.kafka


def _sink(broker: KafkaBroker, topic: str) -> KafkaTransactionalSink:
    sink = KafkaSink(broker.bootstrap_servers, topic, value_format="json", key=lambda v: v % 3)
    assert isinstance(sink, KafkaTransactionalSink)
    return sink


def _values(broker: KafkaBroker, topic: str) -> collections.Counter[int]:
    return collections.Counter(int(v) for _, _, v in broker.consume_all(topic) if v is not None)


def _pre_committed(
    sink: KafkaTransactionalSink, ctx: TransactionContext, values: list[int], checkpoint: int
) -> KafkaCommittable:
    txn = sink.begin(ctx)
    sink.write(txn, values, None)
    return sink.pre_commit(txn, checkpoint)


def _restore(broker: KafkaBroker, topic: str, committable: KafkaCommittable, attempt: int) -> None:
    sink = _sink(broker, topic)
    ctx = TransactionContext("job", "kafka", 0, attempt, f"attempt-{attempt}")
    sink.commit(committable)
    sink.recover(ctx, [committable], 1)


def test_a_pre_committed_transaction_lost_with_its_producer_is_re_sent_once(
    kafka_broker: KafkaBroker,
) -> None:
    topic = kafka_broker.create_topic(unique_topic("settle"), 3)
    crashed = _sink(kafka_broker, topic)
    ctx = TransactionContext("job", "kafka", 0, 0, "attempt-0")
    crashed.recover(ctx, [], 0)
    committable = _pre_committed(crashed, ctx, list(range(100)), 1)
    # The next transaction is open too when the "crash" comes: the restore must abort it.
    _pre_committed(crashed, ctx, list(range(100, 150)), 2)
    assert len(kafka_broker.open_transactions()) == 2
    del crashed
    _restore(kafka_broker, topic, committable, 1)
    kafka_broker.wait_stable(topic)
    assert _values(kafka_broker, topic) == collections.Counter(range(100))
    assert kafka_broker.open_transactions() == []
    # Restored again from the same checkpoint (a crash before the next one completed): the re-sent
    # copy is found and not sent a second time.
    _restore(kafka_broker, topic, committable, 2)
    assert _values(kafka_broker, topic) == collections.Counter(range(100))


def test_a_transaction_that_committed_before_the_crash_is_not_sent_again(kafka_broker: KafkaBroker) -> None:
    topic = kafka_broker.create_topic(unique_topic("settled"), 2)
    sink = _sink(kafka_broker, topic)
    ctx = TransactionContext("job", "kafka", 0, 0, "attempt-0")
    sink.recover(ctx, [], 0)
    committable = _pre_committed(sink, ctx, list(range(40)), 1)
    sink.commit(committable)
    del sink
    # The checkpoint still holds the committable (the crash came before the next one completed).
    _restore(kafka_broker, topic, committable, 1)
    kafka_broker.wait_stable(topic)
    assert _values(kafka_broker, topic) == collections.Counter(range(40))


def test_subtasks_and_jobs_get_transactional_ids_of_their_own(kafka_broker: KafkaBroker) -> None:
    topic = kafka_broker.create_topic(unique_topic("ids"), 1)
    sink = _sink(kafka_broker, topic)
    contexts = [TransactionContext(job, "kafka", s, 0, f"{job}-{s}") for job in ("a", "b") for s in (0, 1)]
    committables = [_pre_committed(sink, ctx, [i], 1) for i, ctx in enumerate(contexts)]
    assert len({c.transactional_id for c in committables}) == 4
    assert len(kafka_broker.open_transactions()) == 4
    for committable in committables:
        sink.commit(committable)
    kafka_broker.wait_stable(topic)
    assert _values(kafka_broker, topic) == collections.Counter(range(4))


def test_a_discarded_transaction_is_aborted_at_once(kafka_broker: KafkaBroker) -> None:
    topic = kafka_broker.create_topic(unique_topic("discard"), 1)
    sink = _sink(kafka_broker, topic)
    ctx = TransactionContext("job", "kafka", 0, 0, "attempt-0")
    kept = _pre_committed(sink, ctx, [1, 2], 1)
    dropped = _pre_committed(sink, ctx, [3, 4], 2)
    sink.commit(kept)
    sink.discard(dropped)
    # A committable the sink holds no producer for any more (another process's) is aborted by fencing.
    other = _pre_committed(sink, ctx, [5], 3)
    sink._busy.clear()
    _sink(kafka_broker, topic).discard(other)
    kafka_broker.wait_stable(topic)
    assert _values(kafka_broker, topic) == collections.Counter([1, 2])
    assert kafka_broker.open_transactions() == []

"""KafkaSink: exactly-once through Kafka transactions, or at-least-once by flushing at checkpoints.

Exactly-once, per subtask: records go into a transaction of a producer taken from the subtask's pool of
transactional ids; at the checkpoint's snapshot the producer is flushed (pre-commit) and the
transaction's committable is stored in the checkpoint; when the checkpoint completes, that same producer
commits it. A committable carries a copy of the transaction's records and the tag on its first record.

Restore. librdkafka cannot resume another producer's transaction (Flink's KafkaCommitter can, by
setting the producer id and epoch through Java internals), so a pre-committed transaction that this
process no longer holds a producer for is settled thus:
  1. a producer with the committable's transactional id calls `init_transactions`, which fences the old
     producer: the broker finishes a commit that was already under way, or aborts the open transaction;
  2. a read_committed consumer looks from the tagged record's offset up to the last stable offset for a
     record with that tag: one is there iff the transaction, or an earlier re-sent copy, committed;
  3. if none is, the records are produced again, tag first, into one transaction of the subtask's
     re-send id, which is committed at once (the checkpoint that holds them is complete).
Then every id of the subtask's pool is fenced, which aborts the transactions the crashed attempt left
open, so they do not hold back read_committed consumers until `transaction.timeout.ms`. The fencing runs
in the background; a transaction begun meanwhile keeps its records and starts once it has ended.

Guarantee: every record reaches the topic's committed records exactly once, in the order the sink
received it per partition. Limits: a re-sent transaction's records get new offsets (and the aborted
original's offsets stay skipped); the tag header is visible to consumers; state holds a copy of the
records of every checkpoint that has not committed yet; after a rescale to fewer subtasks, the open
transactions of the subtasks that are gone are aborted by the broker after `transaction.timeout.ms`
(nothing fences their ids), and until then read_committed consumers of their partitions wait.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from sluice.connectors.base import TransactionContext, TwoPhaseCommitSink
from sluice.connectors.kafka._at_least_once import KafkaAtLeastOnceSink, KafkaSinkBase
from sluice.connectors.kafka._common import (
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    TRANSACTIONAL_ID_POOL,
    TXN_HEADER,
    default_transactional_id_prefix,
    free_slot,
    transactional_id,
)
from sluice.connectors.kafka._packed import Encoded, PackedRecords, Record, pack, unpack
from sluice.connectors.kafka._settle import already_committed, fenced_producer

if TYPE_CHECKING:
    from confluent_kafka import Producer

_TIMEOUT_S = 60.0
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaCommittable:
    transactional_id: str
    pool_prefix: str
    """The writing subtask's pool: its transactional ids are `{pool_prefix}-{slot}`."""
    tag: str
    probe_partition: int
    probe_offset: int
    records: tuple[PackedRecords | Record, ...]
    """The transaction's records, packed per written batch (one by one in checkpoints taken before they
    were packed: `_packed.unpack` reads both)."""


@dataclass
class _Txn:
    transactional_id: str
    pool_prefix: str
    slot: int
    producer: Producer | None
    """None until the pool's fencing has ended: what is written waits in `unsent` until then."""
    tag: str
    packed: list[PackedRecords] = field(default_factory=list)
    """The copy of every record written, for the committable."""
    unsent: list[Encoded] = field(default_factory=list)
    """What was written while `producer` was None, to produce once it is not."""
    probe: tuple[int, int] | None = None
    tagged: bool = False
    """Whether the first record, the one with the tag header, has been handed to the producer."""


class KafkaTransactionalSink(KafkaSinkBase, TwoPhaseCommitSink[_Txn, KafkaCommittable]):
    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        value_format: str,
        key: Callable[[Any], Any] | None,
        transactional_id_prefix: str | None,
        properties: dict[str, str] | None,
    ) -> None:
        super().__init__(bootstrap_servers, topic, value_format, key, properties)
        self.prefix = transactional_id_prefix
        # Producers of this process by transactional id: idle ones are reused by the next transaction,
        # busy ones (open or pre-committed) are found again by their committable's tag on commit.
        self._idle: dict[str, Producer] = {}
        self._busy: dict[str, _Txn] = {}
        self._fenced_pools: set[str] = set()
        # Pools whose fencing runs in the background since `recover`; the first use waits for it.
        self._fencing: dict[str, Future[list[Producer]]] = {}

    def _prefix(self, ctx: TransactionContext) -> str:
        return self.prefix or default_transactional_id_prefix(ctx.job_id, ctx.operator_uid)

    def _producer(self, txn_id: str) -> Producer:
        self._await_fencing(txn_id.rsplit("-", 1)[0])
        producer = self._idle.pop(txn_id, None)
        return producer or fenced_producer(self._producer_config(), txn_id, _TIMEOUT_S)

    def _producer_config(self) -> dict[str, Any]:
        config = self._config()
        config.setdefault("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)
        return config

    def begin(self, ctx: TransactionContext) -> _Txn:
        pool = transactional_id(self._prefix(ctx), ctx.subtask_index, 0).rsplit("-", 1)[0]
        slot = free_slot({t.slot for t in self._busy.values() if t.pool_prefix == pool})
        txn_id = transactional_id(self._prefix(ctx), ctx.subtask_index, slot)
        tag = f"{ctx.attempt_token or uuid.uuid4().hex}-{ctx.subtask_index}-{ctx.next_name()}"
        txn = _Txn(txn_id, pool, slot, None, tag)
        self._busy[tag] = txn
        # While the pool's fencing is under way (a broker round trip per id, 0.4 s in W5) the
        # transaction cannot start, but the task need not wait for it: its records are kept (as they
        # are anyway, for the committable) and produced once the fencing has ended, or at the latest by
        # the pre-commit, which waits for it.
        if not self._fencing_under_way(pool):
            self._start(txn)
        return txn

    def _fencing_under_way(self, pool_prefix: str) -> bool:
        fencing = self._fencing.get(pool_prefix)
        return fencing is not None and not fencing.done()

    def _start(self, txn: _Txn) -> Producer:
        """Begins `txn`'s Kafka transaction (waiting for the pool's fencing, if it still runs) and
        produces the records it kept meanwhile."""
        producer = self._producer(txn.transactional_id)
        producer.begin_transaction()
        txn.producer = producer
        unsent, txn.unsent = txn.unsent, []
        for encoded in unsent:
            self._produce(txn, producer, encoded)
        return producer

    def write(self, txn: _Txn, values: list[Any], timestamps: list[int] | None) -> None:
        encoded = self._encoded(values, timestamps)
        if not len(encoded):
            return
        txn.packed.append(pack(encoded))
        if txn.producer is not None:
            self._produce(txn, txn.producer, encoded)
            return
        txn.unsent.append(encoded)
        if not self._fencing_under_way(txn.pool_prefix):
            self._start(txn)  # produces these records with the ones kept before them

    def _produce(self, txn: _Txn, producer: Producer, encoded: Encoded) -> None:
        if not txn.tagged:
            txn.tagged = True
            self._produce_first(producer, encoded.first(), txn.tag, None, txn)
            encoded = encoded.tail()
        self._produce_all(producer, encoded.rows())

    def _produce_first(
        self, producer: Producer, record: Record, tag: str, partition: int | None, txn: _Txn | None
    ) -> list[tuple[int, int]]:
        delivered: list[tuple[int, int]] = []

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                delivered.append((msg.partition(), msg.offset()))
                if txn is not None:
                    txn.probe = delivered[0]

        key, value, stamp = record
        extra: dict[str, Any] = {"partition": partition} if partition is not None else {}
        producer.produce(
            self.topic, value, key, timestamp=stamp or 0, headers=[(TXN_HEADER, tag.encode())],
            on_delivery=on_delivery, **extra,
        )  # fmt: skip
        return delivered

    def pre_commit(self, txn: _Txn, checkpoint_id: int) -> KafkaCommittable:
        producer = txn.producer if txn.producer is not None else self._start(txn)
        left = producer.flush(_TIMEOUT_S)
        if left:
            raise RuntimeError(
                f"KafkaSink: {left} records not delivered to {self.topic} within {_TIMEOUT_S}s"
            )
        if txn.packed and txn.probe is None:
            raise RuntimeError(f"KafkaSink: the first record of transaction {txn.tag} was not delivered")
        partition, offset = txn.probe or (-1, -1)
        return KafkaCommittable(
            txn.transactional_id, txn.pool_prefix, txn.tag, partition, offset, tuple(txn.packed)
        )

    def commit(self, committable: KafkaCommittable) -> None:
        from confluent_kafka import KafkaException

        txn = self._busy.pop(committable.tag, None)
        if txn is not None and txn.producer is not None:
            try:
                txn.producer.commit_transaction(_TIMEOUT_S)
                self._idle[txn.transactional_id] = txn.producer
                return
            except KafkaException:
                # Fenced, or aborted by the broker after transaction.timeout.ms: settle it from the copy.
                pass
        self._settle(committable)

    def _settle(self, committable: KafkaCommittable) -> None:
        if not committable.records:
            return
        # The whole pool of the writing subtask first: its transactions the crash left open would hold
        # back the last stable offset that `already_committed` waits for (and that another subtask's
        # settling may wait for: fencing before waiting is what keeps them from waiting on each other).
        self._fence_pool(committable.pool_prefix)
        # A re-send id per committable: two subtasks re-sending at once (after a rescale) never share one.
        # Fencing it before looking completes the commit of an earlier re-send of this committable (one a
        # crash cut short after it was committed), so its records are below the last stable offset.
        resend_id = f"{committable.pool_prefix}-resend-{committable.tag}"
        producer = fenced_producer(self._producer_config(), resend_id, _TIMEOUT_S)
        if already_committed(self._config(), self.topic, committable, _TIMEOUT_S):
            log.info("KafkaSink: transaction %s had committed before the restore", committable.tag)
            return
        log.warning(
            "KafkaSink: transaction %s of a completed checkpoint was aborted by the restore's fencing; "
            "re-sending its %d records from the checkpoint",
            committable.tag,
            len(records := unpack(committable.records)),
        )
        producer.begin_transaction()
        first, *rest = records
        self._produce_first(producer, first, committable.tag, committable.probe_partition, None)
        self._produce_all(producer, rest)
        producer.commit_transaction(_TIMEOUT_S)

    def _fence_pool(self, pool_prefix: str) -> None:
        self._start_fencing(pool_prefix)
        self._await_fencing(pool_prefix)

    def _start_fencing(self, pool_prefix: str) -> None:
        self._fenced_pools.add(pool_prefix)
        if pool_prefix in self._fencing:
            return  # under way: fencing the ids again would only fence the producers it makes
        ids = [f"{pool_prefix}-{slot}" for slot in range(TRANSACTIONAL_ID_POOL)]
        for txn_id in ids:
            # Producers an earlier attempt of this process kept are fenced too: drop them.
            self._idle.pop(txn_id, None)
            for tag in [t for t, txn in self._busy.items() if txn.transactional_id == txn_id]:
                del self._busy[tag]
        # All at once: each fence is a round trip to the transaction coordinator (and a wait while it
        # loads), so one after another they delayed every start of an exactly-once job by seconds.
        config = self._producer_config()

        def fence_all() -> list[Producer]:
            with ThreadPoolExecutor(len(ids), thread_name_prefix="sluice-kafka-fence") as pool:
                return list(pool.map(lambda txn_id: fenced_producer(config, txn_id, _TIMEOUT_S), ids))

        runner = ThreadPoolExecutor(1, thread_name_prefix="sluice-kafka-fencing")
        self._fencing[pool_prefix] = runner.submit(fence_all)
        runner.shutdown(wait=False)

    def _await_fencing(self, pool_prefix: str) -> None:
        """Waits for the pool's fencing, if one runs; raises what made it fail."""
        fencing = self._fencing.pop(pool_prefix, None)
        if fencing is None:
            return
        producers = fencing.result()
        ids = [f"{pool_prefix}-{slot}" for slot in range(TRANSACTIONAL_ID_POOL)]
        # Slots 0 and 1 take turns while a checkpoint's transaction waits for its commit: keeping both
        # saves creating (and fencing again) slot 1's producer on the task's thread at the first
        # checkpoint. The other fenced producers are let go.
        self._idle[ids[0]], self._idle[ids[1]] = producers[0], producers[1]

    def _produce_all(self, producer: Producer, rows: Iterable[Record]) -> None:
        produce, poll, topic = producer.produce, producer.poll, self.topic
        for key, value, stamp in rows:
            while True:
                try:
                    produce(topic, value, key, timestamp=stamp or 0)
                    break
                except BufferError:
                    # The local queue is full: hand records to the broker, then try again.
                    poll(0.1)
        poll(0)

    def abort(self, txn: _Txn) -> None:
        self._busy.pop(txn.tag, None)
        if txn.producer is None:
            return  # never started: nothing reached the broker
        try:
            txn.producer.abort_transaction(_TIMEOUT_S)
            self._idle[txn.transactional_id] = txn.producer
        except Exception:
            # The next attempt fences this id anyway; a failing task must not fail again here.
            pass

    def discard(self, committable: KafkaCommittable) -> None:
        """Aborts a pre-committed transaction nothing will commit (the job ended for good before its
        checkpoint completed), so it does not hold back read_committed consumers until it times out."""
        txn = self._busy.pop(committable.tag, None)
        if txn is not None:
            self.abort(txn)
        elif committable.records:
            # Fencing aborts it; a commit already under way (it cannot be: no checkpoint holds it) would
            # be completed instead.
            fenced_producer(self._producer_config(), committable.transactional_id, _TIMEOUT_S)

    def recover(
        self, ctx: TransactionContext, committed: list[KafkaCommittable], restored_checkpoint: int
    ) -> None:
        # Aborts what an earlier attempt of this subtask left open; a no-op on a fresh job's new ids.
        # The fencing runs while the task starts its other operators: it took 130-670 ms per subtask
        # (W5), during which the whole TaskManager waited. The first transaction waits for it (`begin`).
        pool = transactional_id(self._prefix(ctx), ctx.subtask_index, 0).rsplit("-", 1)[0]
        if pool in self._fenced_pools:
            self._fenced_pools.discard(pool)  # settling a restored committable of this subtask did it
        else:
            self._start_fencing(pool)
        self._fenced_pools.discard(pool)

    def close(self) -> None:
        # Each producer holds librdkafka threads and broker connections until it is destroyed, so a
        # TaskManager that is a thread of a longer-lived process (sluice.testing, a reused Spark Python
        # worker) would otherwise keep them after the job. Idle producers have no transaction open:
        # closing them is quick. A busy one is only let go: closing it would abort its transaction,
        # a round trip that waits for the broker, and the restore's fencing settles it either way.
        for pool in list(self._fencing):
            try:
                self._await_fencing(pool)
            except Exception as err:  # it would have failed `begin`; nothing was written under it
                log.warning("KafkaSink: fencing the transactional ids %s-* failed: %s", pool, err)
        idle, self._idle = self._idle, {}
        self._busy.clear()
        for producer in idle.values():
            try:
                producer.close()
            except Exception as err:  # a sink that ends must not fail its TaskManager's end
                log.warning("KafkaSink: could not close a producer: %s", err)


def KafkaSink(  # noqa: N802 - a constructor to the user; which class it builds depends on `delivery`
    bootstrap_servers: str,
    topic: str,
    *,
    value_format: Literal["bytes", "str", "json"] = "bytes",
    key: Callable[[Any], Any] | None = None,
    delivery: Literal["exactly-once", "at-least-once"] = "exactly-once",
    transactional_id_prefix: str | None = None,
    properties: dict[str, str] | None = None,
) -> KafkaTransactionalSink | KafkaAtLeastOnceSink:
    """A sink writing each record as one Kafka record of `topic` (key from `key(record)`, if given;
    the record's event timestamp, if it has one). See docs/connectors/kafka.md."""
    if delivery == "exactly-once":
        return KafkaTransactionalSink(
            bootstrap_servers, topic, value_format, key, transactional_id_prefix, properties
        )
    if delivery == "at-least-once":
        return KafkaAtLeastOnceSink(bootstrap_servers, topic, value_format, key, properties)
    raise ValueError(f"KafkaSink: delivery must be 'exactly-once' or 'at-least-once', got {delivery!r}")

"""KafkaTransactionalSink fences its pool of transactional ids in the background from `recover` on.

Fencing is a broker round trip per id (130-670 ms per subtask in W5) that held up the whole TaskManager
at start, first in `recover`, then in the first transaction's `begin` (0.4 s of W5's job time). A
transaction begun while the fencing runs keeps its records and produces them once it has ended.

A stand-in for `fenced_producer` that waits to be released makes "not finished yet" a state the test
controls instead of a race (what a real broker does is covered by
tests/integration/connectors/test_kafka_transactions.py).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from sluice.connectors import KafkaSink
from sluice.connectors.base import TransactionContext
from sluice.connectors.kafka import KafkaTransactionalSink
from sluice.connectors.kafka import sink as sink_module
from sluice.connectors.kafka._common import TRANSACTIONAL_ID_POOL, TXN_HEADER
from sluice.connectors.kafka._packed import unpack


class _Producer:
    """Takes records as a producer does; `flush` delivers them (offset = position in `produced`)."""

    def __init__(self, txn_id: str) -> None:
        self.txn_id, self.closed, self.begun = txn_id, False, 0
        self.produced: list[tuple[bytes, list[Any]]] = []
        self._callbacks: list[tuple[int, Any]] = []

    def begin_transaction(self) -> None:
        self.begun += 1

    def produce(self, topic: str, value: bytes, key: Any = None, **kwargs: Any) -> None:
        self.produced.append((value, kwargs.get("headers") or []))
        if kwargs.get("on_delivery") is not None:
            self._callbacks.append((len(self.produced) - 1, kwargs["on_delivery"]))

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        for offset, callback in self._callbacks:
            callback(None, _Delivered(offset))
        self._callbacks.clear()
        return 0

    def close(self) -> None:
        self.closed = True


class _Delivered:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset


class _Fences:
    """Fences that finish only when released; `fail` names an id whose fence raises."""

    def __init__(self, fail: str | None = None) -> None:
        self.release = threading.Event()
        self.fenced: list[str] = []
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, config: dict[str, Any], txn_id: str, timeout: float) -> _Producer:
        assert self.release.wait(30), "the test never released the fences"
        if txn_id == self.fail:
            raise RuntimeError(f"fencing {txn_id} timed out")
        with self.lock:
            self.fenced.append(txn_id)
        return _Producer(txn_id)


def _sink() -> KafkaTransactionalSink:
    sink = KafkaSink("127.0.0.1:1", "out")
    assert isinstance(sink, KafkaTransactionalSink)
    return sink


def _fencing_sink(monkeypatch: pytest.MonkeyPatch) -> tuple[KafkaTransactionalSink, _Fences]:
    """A sink whose pool's fencing has begun (`recover`) and waits for the test to release it."""
    fences = _Fences()
    monkeypatch.setattr(sink_module, "fenced_producer", fences)
    sink = _sink()
    sink.recover(CTX, [], 0)
    return sink, fences


CTX = TransactionContext("job", "out", 3, 0, "attempt-0")
POOL = "sluice-job-out-3"


def test_a_transaction_begun_while_the_fencing_runs_keeps_its_records_until_it_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fences = _Fences()
    monkeypatch.setattr(sink_module, "fenced_producer", fences)
    sink = _sink()
    sink.recover(CTX, [], 0)
    assert fences.fenced == []  # recover did not wait: no fence can have finished
    txn = sink.begin(CTX)  # returns at once: the task goes on reading and computing
    sink.write(txn, [b"a", b"b"], None)
    assert txn.producer is None and fences.fenced == [], "nothing produced before the fencing ended"
    fences.release.set()
    committable = sink.pre_commit(txn, 1)  # waits for the fencing, then produces what was kept
    assert sorted(fences.fenced) == sorted(f"{POOL}-{slot}" for slot in range(TRANSACTIONAL_ID_POOL))
    # The transaction runs on slot 0's producer, the one the fencing made: no second fence of it.
    producer: Any = txn.producer
    assert isinstance(producer, _Producer)
    assert txn.transactional_id == f"{POOL}-0" and producer.txn_id == f"{POOL}-0"
    assert producer.begun == 1
    assert [value for value, _ in producer.produced] == [b"a", b"b"], "in the order received"
    assert producer.produced[0][1] == [(TXN_HEADER, txn.tag.encode())], "the first one tagged"
    assert producer.produced[1][1] == []
    assert (committable.probe_partition, committable.probe_offset) == (0, 0)
    assert [r[1] for r in unpack(committable.records)] == [b"a", b"b"]


def test_the_first_write_after_the_fencing_ended_produces_the_kept_records_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sink, fences = _fencing_sink(monkeypatch)
    txn = sink.begin(CTX)
    sink.write(txn, [b"kept"], None)
    fences.release.set()
    deadline = time.monotonic() + 30
    while sink._fencing_under_way(POOL):  # it ends in a thread of its own, its future a moment later
        assert time.monotonic() < deadline
        time.sleep(0.01)
    sink.write(txn, [b"next"], None)
    producer: Any = txn.producer
    assert isinstance(producer, _Producer), "the write after the fencing started the transaction"
    assert [value for value, _ in producer.produced] == [b"kept", b"next"]
    assert producer.produced[0][1] == [(TXN_HEADER, txn.tag.encode())]


def test_a_transaction_that_never_started_aborts_without_the_broker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sink, fences = _fencing_sink(monkeypatch)
    txn = sink.begin(CTX)
    sink.write(txn, [b"a"], None)
    sink.abort(txn)  # the task failed while the fencing ran
    fences.release.set()
    sink.close()
    assert txn.producer is None


def test_a_failed_fencing_fails_the_first_transaction(monkeypatch: pytest.MonkeyPatch) -> None:
    fences = _Fences(fail=f"{POOL}-5")
    monkeypatch.setattr(sink_module, "fenced_producer", fences)
    sink = _sink()
    sink.recover(CTX, [], 0)
    txn = sink.begin(CTX)
    fences.release.set()
    with pytest.raises(RuntimeError, match=f"fencing {POOL}-5 timed out"):
        sink.pre_commit(txn, 1)  # nothing is ever produced under a pool that was not fenced


def test_close_waits_for_a_fencing_under_way_and_closes_its_producers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fences = _Fences()
    made: list[_Producer] = []

    def fence(config: dict[str, Any], txn_id: str, timeout: float) -> _Producer:
        producer = fences(config, txn_id, timeout)
        made.append(producer)
        return producer

    monkeypatch.setattr(sink_module, "fenced_producer", fence)
    sink = _sink()
    sink.recover(CTX, [], 0)
    closer = threading.Thread(target=sink.close)
    closer.start()
    fences.release.set()
    closer.join(30)
    assert len(fences.fenced) == TRANSACTIONAL_ID_POOL
    # The two producers kept for reuse are closed; the others were let go as before.
    assert sorted(p.txn_id for p in made if p.closed) == [f"{POOL}-0", f"{POOL}-1"]

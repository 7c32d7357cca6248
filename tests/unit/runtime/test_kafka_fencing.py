"""KafkaTransactionalSink fences its pool of transactional ids in the background from `recover` on.

Fencing is a broker round trip per id (130-670 ms per subtask in W5) that held up the whole TaskManager
at start. A stand-in for `fenced_producer` that waits to be released makes "not finished yet" a state
the test controls instead of a race (what a real broker does is covered by
tests/integration/connectors/test_kafka_transactions.py).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from sluice.connectors import KafkaSink
from sluice.connectors.base import TransactionContext
from sluice.connectors.kafka import KafkaTransactionalSink
from sluice.connectors.kafka import sink as sink_module
from sluice.connectors.kafka._common import TRANSACTIONAL_ID_POOL


class _Producer:
    def __init__(self, txn_id: str) -> None:
        self.txn_id, self.closed, self.begun = txn_id, False, 0

    def begin_transaction(self) -> None:
        self.begun += 1

    def close(self) -> None:
        self.closed = True


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


CTX = TransactionContext("job", "out", 3, 0, "attempt-0")
POOL = "sluice-job-out-3"


def test_recover_returns_before_the_fencing_ends_and_the_first_transaction_waits_for_all_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fences = _Fences()
    monkeypatch.setattr(sink_module, "fenced_producer", fences)
    sink = _sink()
    sink.recover(CTX, [], 0)
    assert fences.fenced == []  # recover did not wait: no fence can have finished
    begun: list[tuple[Any, int]] = []
    starter = threading.Thread(target=lambda: begun.append((sink.begin(CTX), len(fences.fenced))))
    starter.start()
    fences.release.set()
    starter.join(30)
    ((txn, fenced_by_then),) = begun
    assert fenced_by_then == TRANSACTIONAL_ID_POOL
    assert sorted(fences.fenced) == sorted(f"{POOL}-{slot}" for slot in range(TRANSACTIONAL_ID_POOL))
    # The transaction runs on slot 0's producer, the one the fencing made: no second fence of it.
    assert txn.transactional_id == f"{POOL}-0" and txn.producer.txn_id == f"{POOL}-0"
    assert txn.producer.begun == 1


def test_a_failed_fencing_fails_the_first_transaction(monkeypatch: pytest.MonkeyPatch) -> None:
    fences = _Fences(fail=f"{POOL}-5")
    monkeypatch.setattr(sink_module, "fenced_producer", fences)
    sink = _sink()
    sink.recover(CTX, [], 0)
    fences.release.set()
    with pytest.raises(RuntimeError, match=f"fencing {POOL}-5 timed out"):
        sink.begin(CTX)


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

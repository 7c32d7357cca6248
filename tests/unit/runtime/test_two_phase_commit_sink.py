"""The two-phase-commit sink operator over the checkpoint protocol, with a sink that records every call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from sluice.checkpoint.snapshot import RestoredState
from sluice.connectors.base import TransactionContext, TwoPhaseCommitSink
from sluice.engine.operators.sink import TwoPhaseCommitSinkOperator

from ._support import start


@dataclass
class Txn:
    name: str
    rows: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class Prepared:
    name: str
    rows: tuple[Any, ...]


class RecordingSink(TwoPhaseCommitSink[Txn, Prepared]):
    """Keeps transactions in memory and logs each protocol call; `visible` is what readers would see."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.visible: list[Any] = []
        self.committed: set[str] = set()
        self.pre_committed_for: list[int] = []
        self.recovered: list[tuple[list[Prepared], int]] = []

    def begin(self, ctx: TransactionContext) -> Txn:
        txn = Txn(f"{ctx.operator_uid}-{ctx.subtask_index}-{ctx.attempt}-{ctx.next_name()}")
        self.calls.append(("begin", txn.name))
        return txn

    def write(self, txn: Txn, values: list[Any], timestamps: list[int] | None) -> None:
        txn.rows.extend(values)

    def pre_commit(self, txn: Txn, checkpoint_id: int) -> Prepared:
        self.calls.append(("pre_commit", txn.name))
        self.pre_committed_for.append(checkpoint_id)
        return Prepared(txn.name, tuple(txn.rows))

    def commit(self, committable: Prepared) -> None:
        self.calls.append(("commit", committable.name))
        if committable.name not in self.committed:  # idempotent, as the contract requires
            self.committed.add(committable.name)
            self.visible.extend(committable.rows)

    def abort(self, txn: Txn) -> None:
        self.calls.append(("abort", txn.name))

    def recover(self, ctx: TransactionContext, committed: list[Prepared], restored_checkpoint: int) -> None:
        self.recovered.append((list(committed), restored_checkpoint))


def sink_operator(sink: RecordingSink | None = None, restored: RestoredState | None = None, attempt: int = 0):  # type: ignore[no-untyped-def]
    op = TwoPhaseCommitSinkOperator("out", sink or RecordingSink())
    _, ctx = start(op, restored=restored, attempt=attempt)
    return op, op.sink, ctx


def test_fresh_start_lets_the_sink_recover_with_nothing_to_commit() -> None:
    _, sink, _ = sink_operator()
    assert sink.recovered == [([], 0)]


def test_transaction_begins_lazily_and_pre_commits_at_snapshot() -> None:
    op, sink, ctx = sink_operator()
    assert sink.calls == []
    op.process_batch([1, 2], None)
    op.process_batch([3], [7])
    assert sink.calls == [("begin", "out-0-0-1")]
    snapshot = op.snapshot_state(1)
    assert sink.calls[-1] == ("pre_commit", "out-0-0-1")
    assert sink.pre_committed_for == [1]
    assert snapshot is not None and snapshot.lists == {"pending": [(1, Prepared("out-0-0-1", (1, 2, 3)))]}
    assert sink.visible == []
    assert ctx.metrics.records_out == 3


def test_commit_only_on_completion_of_that_or_a_later_checkpoint() -> None:
    op, sink, _ = sink_operator()
    op.process_batch(["a"], None)
    op.snapshot_state(1)
    op.process_batch(["b"], None)
    op.snapshot_state(2)
    op.notify_checkpoint_complete(0)  # an older checkpoint: commits nothing
    assert sink.visible == []
    op.notify_checkpoint_complete(1)
    assert sink.visible == ["a"]
    assert op.has_pending_commits()
    op.notify_checkpoint_complete(2)
    assert sink.visible == ["a", "b"]
    assert not op.has_pending_commits()
    assert op.snapshot_state(3) is None


def test_committables_of_a_failed_checkpoint_are_committed_by_the_next_completed_one() -> None:
    op, sink, _ = sink_operator()
    op.process_batch(["a"], None)
    op.snapshot_state(1)
    op.notify_checkpoint_aborted(1)
    op.process_batch(["b"], None)
    snapshot = op.snapshot_state(2)
    assert snapshot is not None
    assert [cid for cid, _ in snapshot.lists["pending"]] == [1, 2]  # the failed one is carried along
    assert sink.visible == []
    op.notify_checkpoint_complete(2)
    assert sink.visible == ["a", "b"]
    assert [c for c in sink.calls if c[0] == "commit"] == [("commit", "out-0-0-1"), ("commit", "out-0-0-2")]


def test_snapshot_without_records_opens_no_transaction() -> None:
    op, sink, _ = sink_operator()
    assert op.snapshot_state(1) is None
    assert sink.calls == []


def test_restore_commits_the_checkpointed_committables_again() -> None:
    op, sink, _ = sink_operator()
    op.process_batch(["a"], None)
    op.snapshot_state(1)
    op.process_batch(["b"], None)
    snapshot = op.snapshot_state(2)
    op.notify_checkpoint_complete(1)  # the job fails before checkpoint 2's notification arrives
    assert snapshot is not None and sink.visible == ["a"]

    restored, _, _ = sink_operator(
        sink, RestoredState(lists=dict(snapshot.lists), checkpoint_id=2), attempt=1
    )
    # Checkpoint 2 still held both committables: both are committed again, which the idempotent
    # commit turns into "b" becoming visible and "a" not appearing twice.
    assert sink.visible == ["a", "b"]
    assert sink.recovered[-1] == ([Prepared("out-0-0-1", ("a",)), Prepared("out-0-0-2", ("b",))], 2)
    restored.process_batch(["c"], None)
    assert sink.calls[-1] == ("begin", "out-0-1-1")  # a new attempt names its transactions apart


def test_no_new_transaction_after_finish() -> None:
    op, sink, _ = sink_operator()
    op.process_batch(["last"], None)
    op.finish()
    with pytest.raises(RuntimeError, match="sink 'out' received records after finish"):
        op.process_batch(["too late"], None)
    # The final checkpoint pre-commits the transaction that was open at finish, and opens none.
    op.snapshot_state(5)
    op.notify_checkpoint_complete(5)
    assert sink.visible == ["last"]
    assert [c[0] for c in sink.calls] == ["begin", "pre_commit", "commit"]
    assert op.snapshot_state(6) is None


def test_close_aborts_the_open_transaction_only() -> None:
    op, sink, _ = sink_operator()
    op.process_batch(["a"], None)
    op.snapshot_state(1)
    op.process_batch(["b"], None)
    op.close()
    assert sink.calls == [
        ("begin", "out-0-0-1"),
        ("pre_commit", "out-0-0-1"),
        ("begin", "out-0-0-2"),
        ("abort", "out-0-0-2"),
    ]
    op.close()  # closing twice aborts nothing more
    assert len(sink.calls) == 4


def test_close_after_pre_commit_aborts_nothing() -> None:
    op, sink, _ = sink_operator()
    op.process_batch(["a"], None)
    op.snapshot_state(1)
    op.close()
    assert "abort" not in [c[0] for c in sink.calls]


def test_restored_as_fully_finished_commits_the_final_checkpoints_transactions() -> None:
    # The job failed after its final checkpoint completed but before the sink committed: the
    # restored, finished sink commits the pre-committed transactions and does nothing else.
    op, _, _ = sink_operator()
    op.process_batch(["a", "b"], None)
    op.finish()
    snapshot = op.snapshot_state(9)
    assert snapshot is not None and op.has_pending_commits()

    fresh_sink = RecordingSink()
    again = TwoPhaseCommitSinkOperator("out", fresh_sink)
    again.commit_after_finish(RestoredState(lists=dict(snapshot.lists), checkpoint_id=9))
    assert fresh_sink.visible == ["a", "b"]
    assert [c[0] for c in fresh_sink.calls] == ["commit"]

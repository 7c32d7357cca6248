"""Interfaces for sources and sinks.

A source is cut into splits that are read independently; a split's position is checkpointed, so after
a restore reading continues exactly where the checkpoint left it. A sink gets a writer per subtask; a
two-phase-commit sink (`TwoPhaseCommitSink`) makes its output visible only when a checkpoint completes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

Split = TypeVar("Split")
Txn = TypeVar("Txn")
Committable = TypeVar("Committable")


class SplitReader(ABC, Generic[Split]):
    @abstractmethod
    def read(self, max_records: int) -> list[Any] | None:
        """Up to `max_records` records (possibly none for now), or None once the split is exhausted."""

    @abstractmethod
    def position(self) -> Split:
        """The split as it stands now: restoring from it continues right after the last record read."""

    def notify_checkpoint_complete(self, checkpoint_id: int, position: Split) -> None:
        """Checkpoint `checkpoint_id`, which holds this split at `position`, completed: a restore will
        never go back before it. For telling an outside system (Kafka's committed offsets); a reader
        that has nobody to tell need not."""

    def close(self) -> None:
        pass


class Source(ABC, Generic[Split]):
    #: A bounded source ends; its tasks then finish and the job ends with a final checkpoint.
    bounded: bool = True

    @abstractmethod
    def splits(self) -> list[Split]:
        """All splits of a fresh start, in reading order."""

    @abstractmethod
    def open_split(self, split: Split) -> SplitReader[Split]:
        pass

    def records_per_second(self) -> float | None:
        """A limit on the records per second over all splits, or None for as fast as possible."""
        return None


class SinkWriter(ABC):
    @abstractmethod
    def write(self, values: list[Any], timestamps: list[int] | None) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class Sink(ABC):
    """An at-least-once sink: each subtask writes through its own writer."""

    @abstractmethod
    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        pass


class TwoPhaseCommitSink(ABC, Generic[Txn, Committable]):
    """An exactly-once sink: data is written in transactions that commit when a checkpoint completes.

    At each checkpoint the open transaction is pre-committed (made durable but not visible) and its
    committable is stored in the checkpoint; when the checkpoint completes it is committed. After a
    restore, committables found in the checkpoint are committed again, so `commit` must be idempotent.
    A transaction that never reached a completed checkpoint is aborted (or simply never committed).
    """

    @abstractmethod
    def begin(self, ctx: TransactionContext) -> Txn:
        pass

    @abstractmethod
    def write(self, txn: Txn, values: list[Any], timestamps: list[int] | None) -> None:
        pass

    @abstractmethod
    def pre_commit(self, txn: Txn, checkpoint_id: int) -> Committable:
        """Make the transaction durable but invisible, as part of checkpoint `checkpoint_id`."""

    @abstractmethod
    def commit(self, committable: Committable) -> None:
        """Make the pre-committed data visible. Committing an already committed one is a no-op."""

    @abstractmethod
    def abort(self, txn: Txn) -> None:
        pass

    def clean_up(self, ctx: TransactionContext, parallelism: int) -> None:
        """Called once per subtask when the first checkpoint after its start completed: every restored
        committable has been committed by then (by whichever subtask it was dealt to), so what earlier
        attempts of this job left behind and no checkpoint holds can go. Sinks that leave nothing need not.
        """

    def discard(self, committable: Committable) -> None:
        """Throw away a pre-committed transaction that nothing will commit: the job ended (canceled, or
        failed for good) before its checkpoint completed. Sinks that leave nothing behind need not."""

    def recover(
        self, ctx: TransactionContext, committed: list[Committable], restored_checkpoint: int
    ) -> None:
        """Called once per subtask at start, after the restored committables were committed again.

        `restored_checkpoint` is the id of the checkpoint restored from (0 on a fresh start). Sinks that
        leave resources behind for transactions that never reached a completed checkpoint (prepared
        database transactions, say) release here those of earlier attempts (`ctx.attempt_token`
        differs) pre-committed for a checkpoint after `restored_checkpoint`.
        """

    def close(self) -> None:
        """The TaskManager that ran this sink has ended: release its clients (connections, producers).
        Nothing is called after it. A transaction still pre-committed here is settled by the restore
        that commits it, as after a crash. Sinks that hold no client need not."""


class TransactionContext:
    """Names a transaction uniquely across subtasks, attempts and checkpoints."""

    def __init__(
        self, job_id: str, operator_uid: str, subtask_index: int, attempt: int, attempt_token: str = ""
    ) -> None:
        self.job_id = job_id
        self.operator_uid = operator_uid
        self.subtask_index = subtask_index
        self.attempt = attempt
        self.attempt_token = attempt_token
        """Unique for every attempt of every run of every job: tells this attempt's transactions apart."""
        self._sequence = 0

    def next_name(self) -> str:
        """A sequence number, unique within this subtask's attempt."""
        self._sequence += 1
        return str(self._sequence)

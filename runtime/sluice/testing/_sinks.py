"""A sink that collects what a one-process job commits, for a test to read.

The job graph reaches the TaskManagers pickled, so each subtask writes through a copy of the sink the
test made; the copies find one another through a registry of this process, keyed by the sink's id.
The sink is exactly-once (a `TwoPhaseCommitSink`): records become visible when the checkpoint that
covers them completes, and a restart neither loses nor repeats a committed record. What a test reads
is thus what a transactional sink would have made visible, failures and restarts included.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from sluice.connectors.base import TransactionContext, TwoPhaseCommitSink

_lock = threading.Lock()
# sink id -> committed transactions in commit order (name -> records); filled by the TaskManagers' threads.
_committed: dict[str, dict[str, list[Any]]] = {}


@dataclass
class _Transaction:
    name: str
    records: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class _Committable:
    name: str
    records: tuple[Any, ...]


class CollectingSink(TwoPhaseCommitSink[_Transaction, _Committable]):
    """Collects the records each completed checkpoint commits; `records()` reads them.

    Works for jobs whose sink subtasks run in this process (`sluice.testing.run_job`/`start_job`): a
    TaskManager process has a registry of its own. The records must be picklable (they are part of the
    checkpoint until committed).
    """

    def __init__(self) -> None:
        self.sink_id = uuid.uuid4().hex
        with _lock:
            _committed[self.sink_id] = {}

    def records(self) -> list[Any]:
        """Every committed record, transaction by transaction in commit order."""
        with _lock:
            return [record for records in _committed.get(self.sink_id, {}).values() for record in records]

    def begin(self, ctx: TransactionContext) -> _Transaction:
        # Unique across subtasks, attempts and runs: a restored committable commits under its old name.
        name = f"{ctx.job_id}/{ctx.attempt_token}/{ctx.operator_uid}/{ctx.subtask_index}/{ctx.next_name()}"
        return _Transaction(name)

    def write(self, txn: _Transaction, values: list[Any], timestamps: list[int] | None) -> None:
        txn.records.extend(values)

    def pre_commit(self, txn: _Transaction, checkpoint_id: int) -> _Committable:
        return _Committable(txn.name, tuple(txn.records))

    def commit(self, committable: _Committable) -> None:
        with _lock:
            # setdefault: committing again after a restore is a no-op, as the interface asks.
            _committed.setdefault(self.sink_id, {}).setdefault(committable.name, list(committable.records))

    def abort(self, txn: _Transaction) -> None:
        txn.records.clear()

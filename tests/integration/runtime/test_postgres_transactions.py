"""PostgresSink's transactions against a real PostgreSQL, driven step by step through the sink operator.

Each test plays one interleaving of the checkpoint protocol that a running job only hits by timing
(a window firing between a checkpoint's snapshot and its completion, a TaskManager killed right after),
so the outcome does not depend on the machine's load.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import signal
import time
import uuid
from multiprocessing.queues import Queue
from typing import Any

import psycopg
import pytest

from sluice.checkpoint.snapshot import RestoredState
from sluice.connectors.postgres import PostgresSink, TransactionLost
from sluice.engine.context import Metrics, OperatorContext
from sluice.engine.operators.sink import TwoPhaseCommitSinkOperator

pytestmark = pytest.mark.postgres
COLUMNS = ["k", "win", "n", "total"]
WINDOW_0 = [(k, 0, 1, k) for k in range(5)]
WINDOW_1 = [(k, 1, 1, 1000 + k) for k in range(5)]


def _table(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE counts (k int, win int, n int, total bigint)")


def _rows(dsn: str) -> collections.Counter[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return collections.Counter(conn.execute("SELECT k, win, n, total FROM counts").fetchall())


def _prepared(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT gid FROM pg_prepared_xacts").fetchall()]


def _sink_operator(
    dsn: str, token: str, restored: RestoredState | None = None, job_id: str = "job-1"
) -> TwoPhaseCommitSinkOperator:
    """A sink subtask started as a TaskManager starts it (setup, initialize_state, open)."""
    op = TwoPhaseCommitSinkOperator("pg", PostgresSink(dsn, "counts", COLUMNS))
    ctx = OperatorContext(
        operator_uid="pg",
        subtask_index=0,
        parallelism=1,
        max_parallelism=128,
        attempt=0,
        metrics=Metrics(),
        keyed=False,
        job_id=job_id,
        attempt_token=token,
    )
    op.setup(ctx, None)  # type: ignore[arg-type]  # a sink emits nothing
    op.initialize_state(restored)
    op.open()
    return op


def _attempt_killed_after_checkpoint_1(dsn: str, out: Queue[Any]) -> None:
    """Attempt 0 of a sink subtask, in a process of its own that the test kills like a TaskManager."""
    op = _sink_operator(dsn, "attempt0")
    op.process_batch(list(WINDOW_0), None)
    snapshot = op.snapshot_state(1)
    assert snapshot is not None
    # Window 1 fires after checkpoint 1's barrier, before checkpoint 1 completes.
    op.process_batch(list(WINDOW_1), None)
    op.notify_checkpoint_complete(1)
    out.put(snapshot.lists["pending"])
    time.sleep(600)


def test_rows_written_after_a_snapshot_stay_invisible_when_that_checkpoint_commits(
    postgres_db: str,
) -> None:
    _table(postgres_db)
    op = _sink_operator(postgres_db, "attempt0")
    op.process_batch(list(WINDOW_0), None)
    op.snapshot_state(1)
    # Window 1 fires after checkpoint 1's barrier: its rows belong to checkpoint 2's transaction.
    op.process_batch(list(WINDOW_1), None)
    op.notify_checkpoint_complete(1)
    assert _rows(postgres_db) == collections.Counter(WINDOW_0)
    op.close()


def test_taskmanager_killed_after_a_commit_replays_the_next_window_exactly_once(postgres_db: str) -> None:
    _table(postgres_db)
    context = multiprocessing.get_context("fork")
    out: Queue[Any] = context.Queue()
    first = context.Process(target=_attempt_killed_after_checkpoint_1, args=(postgres_db, out))
    first.start()
    try:
        pending = out.get(timeout=60)
    finally:
        assert first.pid is not None
        os.kill(first.pid, signal.SIGKILL)  # before checkpoint 2 completes
        first.join(30)

    # The job restores checkpoint 1 (its pending commit included) and replays window 1.
    restored = RestoredState(lists={"pending": pending}, checkpoint_id=1)
    second = _sink_operator(postgres_db, "attempt1", restored)
    second.process_batch(list(WINDOW_1), None)
    second.snapshot_state(2)
    second.notify_checkpoint_complete(2)
    second.close()

    assert _rows(postgres_db) == collections.Counter(WINDOW_0 + WINDOW_1)
    assert _prepared(postgres_db) == []


def test_two_jobs_writing_one_table_keep_each_others_prepared_transactions(postgres_db: str) -> None:
    _table(postgres_db)
    first = _sink_operator(postgres_db, "a0", job_id="job-a")
    first.process_batch(list(WINDOW_0), None)
    first.snapshot_state(5)  # prepared; checkpoint 5 of job-a has not completed yet
    # A second job (its own first attempt, nothing restored) starts writing into the same table.
    other = _sink_operator(postgres_db, "b0", job_id="job-b")
    other.process_batch(list(WINDOW_1), None)
    other.snapshot_state(1)
    other.notify_checkpoint_complete(1)
    first.notify_checkpoint_complete(5)
    assert _rows(postgres_db) == collections.Counter(WINDOW_0 + WINDOW_1)
    assert _prepared(postgres_db) == []


def test_a_transaction_rolled_back_behind_the_sinks_back_fails_its_commit(postgres_db: str) -> None:
    _table(postgres_db)
    op = _sink_operator(postgres_db, "a0")
    op.process_batch(list(WINDOW_0), None)
    snapshot = op.snapshot_state(1)
    assert snapshot is not None
    [(_, gid)] = snapshot.lists["pending"]
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute(f"ROLLBACK PREPARED '{gid}'")
    with pytest.raises(TransactionLost, match="neither prepared nor committed"):
        op.notify_checkpoint_complete(1)
    op.close()


def test_a_commit_repeated_after_a_restore_is_a_no_op(postgres_db: str) -> None:
    _table(postgres_db)
    op = _sink_operator(postgres_db, "a0")
    op.process_batch(list(WINDOW_0), None)
    snapshot = op.snapshot_state(1)
    assert snapshot is not None
    op.notify_checkpoint_complete(1)
    op.close()
    # Restored from checkpoint 1, whose state still lists the (now committed) transaction.
    again = _sink_operator(postgres_db, "a1", RestoredState(lists=dict(snapshot.lists), checkpoint_id=1))
    again.close()
    assert _rows(postgres_db) == collections.Counter(WINDOW_0)


def test_a_role_that_may_not_create_tables_writes_once_the_marker_table_exists(postgres_db: str) -> None:
    _table(postgres_db)
    role = f"writer_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        conn.execute(
            "CREATE TABLE sluice_transactions "
            "(gid text PRIMARY KEY, prepared_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(f"GRANT SELECT, INSERT ON counts, sluice_transactions TO {role}")
    try:
        op = _sink_operator(postgres_db.replace("postgres@", f"{role}@", 1), "a0")
        op.process_batch(list(WINDOW_0), None)
        op.snapshot_state(1)
        op.notify_checkpoint_complete(1)
        op.close()
        assert _rows(postgres_db) == collections.Counter(WINDOW_0)
    finally:
        with psycopg.connect(postgres_db, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
        with psycopg.connect(postgres_db, autocommit=True) as conn:
            # The sink's connections may outlive the operator until they are collected.
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [role])
            conn.execute(f"DROP ROLE {role}")

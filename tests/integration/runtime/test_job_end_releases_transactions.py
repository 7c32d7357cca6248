"""A job that ends for good releases what its sinks pre-committed for checkpoints that never completed.

Checkpoints here (almost) never complete (tests/integration/pipelines/never_checkpointed.py: barriers
queue behind slow records, past a 100 ms timeout; only one triggered before the backlog builds may
make it), so the sink transactions the job pre-commits stay prepared, waiting for a completion that
never comes. While the job runs that is right: a restore
would need them. Once the job is canceled, or fails with no restart left, nothing will restore it, and
prepared PostgreSQL transactions (which hold locks and block VACUUM) or hidden files must not stay.
A suspended job keeps them: the run that resumes it decides.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from testkit.checkpoints import PIPELINES
from testkit.inprocess import ThreadJob
from testkit.jobs import SluiceJob, run_cli


def _prepared(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT gid FROM pg_prepared_xacts").fetchall()]


NEVER_CHECKPOINTED = PIPELINES / "never_checkpointed.py"
# Timed-out checkpoints would fail the job over (they count, as in Flink): here they are the point.
_CHECKPOINTS = (
    *("--parallelism", "2", "--checkpoint-interval", "200ms", "--checkpoint-timeout", "100ms"),
    *("--tolerable-checkpoint-failures", "unlimited"),
)


def _connections(dsn: str, settle_s: float = 10.0) -> int:
    """Clients' connections to the test's database but this one, once closed ones have gone.

    Not the server's own workers: an autovacuum worker visits the database whenever the server's
    launcher picks it (the job's rolled-back rows leave it work), and is listed with the database's
    name. And a client backend stays listed until its server process has exited, a few ms after its
    client closed the connection (probed against this fixture's server: 30 of 300 closed connections
    were still listed by the next query, and gone 1-9 ms later). So the count is taken again until it is
    0 or `settle_s` has passed: a connection the job leaked is still open by then."""
    deadline = time.monotonic() + settle_s
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            others = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ).fetchone()
            count = int(others[0]) if others else 0
            if count == 0 or time.monotonic() >= deadline:
                return count
            time.sleep(0.05)


def _postgres_job(dsn: str, tmp_path: Path, *extra: str, job: type[SluiceJob | ThreadJob] = SluiceJob) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE numbers (i int)")
    return job(
        NEVER_CHECKPOINTED,
        *("--arg", f"dsn={dsn}", *_CHECKPOINTS, "--checkpoint-dir", f"file://{tmp_path / 'chk'}", *extra),
    )


@pytest.mark.postgres
def test_cancel_rolls_back_the_jobs_prepared_transactions(postgres_db: str, tmp_path: Path) -> None:
    # The job runs in the test process: the sink's connections end with its TaskManager threads too.
    job = _postgres_job(postgres_db, tmp_path, job=ThreadJob)
    try:
        job.wait_until(lambda: len(_prepared(postgres_db)) >= 2, 60, "transactions left prepared")
        cancel = run_cli("cancel", "--address", job.rest_url())
        assert cancel.returncode == 0, cancel.stderr
        assert job.wait(60) == 1, job.stderr
    finally:
        job.kill()
    assert _prepared(postgres_db) == []
    assert _connections(postgres_db) == 0


@pytest.mark.postgres
def test_a_job_failed_for_good_rolls_back_and_a_suspended_one_keeps_them(
    postgres_db: str, tmp_path: Path
) -> None:
    job = _postgres_job(postgres_db, tmp_path, "--restart-strategy", "none")
    try:
        job.wait_until(lambda: len(_prepared(postgres_db)) >= 2, 60, "transactions left prepared")
        # SIGTERM suspends: the prepared transactions stay for the run that resumes the job.
        job.process.send_signal(signal.SIGTERM)
        assert job.wait(60) == 3, job.stderr
    finally:
        job.kill()
    assert _prepared(postgres_db), "a suspended job keeps its prepared transactions"
    for gid in _prepared(postgres_db):
        with psycopg.connect(postgres_db, autocommit=True) as conn:
            conn.execute(f"ROLLBACK PREPARED '{gid}'")
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute("DROP TABLE numbers")

    job = _postgres_job(postgres_db, tmp_path / "second", "--restart-strategy", "none")
    try:
        job.wait_until(lambda: len(_prepared(postgres_db)) >= 2, 60, "transactions left prepared")
        # A lost TaskManager with no restart left fails the job for good; the other one still runs
        # and releases its sink's transactions.
        os.kill(job.taskmanager_pids()[0], signal.SIGKILL)
        assert job.wait(60) == 1, job.stderr
    finally:
        job.kill()
    left = _prepared(postgres_db)
    # Only the killed TaskManager's sink subtask may leave some (nothing runs there to release them;
    # the names say whose they are). The gid ends in subtask-checkpoint-sequence.
    assert len({gid.split("-")[-3] for gid in left}) <= 1, f"more than one sink subtask left {left}"


def test_cancel_removes_the_file_sinks_hidden_pre_committed_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    job = ThreadJob(
        NEVER_CHECKPOINTED,
        "--arg",
        f"out={out}",
        *_CHECKPOINTS,
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
    )
    try:
        job.wait_until(
            lambda: out.is_dir() and len(list(out.glob(".*.inprogress"))) >= 4, 60, "pre-committed files"
        )
        cancel = run_cli("cancel", "--address", job.rest_url())
        assert cancel.returncode == 0, cancel.stderr
        assert job.wait(60) == 1, job.stderr
    finally:
        job.kill()
    assert list(out.glob(".*")) == []

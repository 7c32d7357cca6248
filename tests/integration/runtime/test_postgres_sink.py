"""PostgresSink against a real PostgreSQL: the final transaction commits with the final checkpoint."""

from __future__ import annotations

import collections
import os
import signal
from pathlib import Path

import psycopg
import pytest

from testkit.checkpoints import PIPELINES
from testkit.inprocess import run_thread_job
from testkit.jobs import SluiceJob

pytestmark = pytest.mark.postgres
COUNT, KEYS = 30_000, 10


def _reference() -> collections.Counter[tuple[int, int, int, int]]:
    rows: dict[tuple[int, int], tuple[int, int]] = {}
    for i in range(COUNT):
        n, total = rows.get((i % KEYS, i // 1000), (0, 0))
        rows[(i % KEYS, i // 1000)] = (n + 1, total + i)
    return collections.Counter((k, w, n, t) for (k, w), (n, t) in rows.items())


def _prepare(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE counts (k int, win int, n int, total bigint)")


def _rows(dsn: str) -> collections.Counter[tuple[int, int, int, int]]:
    with psycopg.connect(dsn) as conn:
        return collections.Counter(conn.execute("SELECT k, win, n, total FROM counts").fetchall())


def _prepared(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT gid FROM pg_prepared_xacts").fetchall()]


def test_bounded_job_commits_its_last_rows_with_the_final_checkpoint(
    postgres_db: str, tmp_path: Path
) -> None:
    _prepare(postgres_db)
    done = run_thread_job(
        PIPELINES / "postgres_counts.py",
        "--arg",
        f"dsn={postgres_db}",
        "--arg",
        "table=counts",
        "--arg",
        f"count={COUNT}",
        "--arg",
        "rate=20000",
        "--arg",
        f"keys={KEYS}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "1h",
    )
    assert done.returncode == 0, done.stderr
    # With an hourly interval the only checkpoint is the final one: it alone committed every row.
    assert _rows(postgres_db) == _reference()
    assert _prepared(postgres_db) == []


def test_taskmanager_killed_mid_run_gives_each_row_once(postgres_db: str, tmp_path: Path) -> None:
    _prepare(postgres_db)
    job = SluiceJob(
        PIPELINES / "postgres_counts.py",
        "--arg",
        f"dsn={postgres_db}",
        "--arg",
        "table=counts",
        "--arg",
        f"count={COUNT}",
        "--arg",
        "rate=6000",
        "--arg",
        f"keys={KEYS}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "300ms",
        "--restart-delay",
        "100ms",
    )
    try:
        job.wait_checkpoints(2)
        os.kill(job.taskmanager_pids()[1], signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 1, 60, "the restart")
        assert job.wait(180) == 0, job.stderr
    finally:
        job.kill()
    assert _rows(postgres_db) == _reference()
    assert _prepared(postgres_db) == [], "transactions prepared by the killed attempt were rolled back"

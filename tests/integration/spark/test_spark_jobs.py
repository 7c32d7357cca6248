"""Whole jobs on the Spark host: when a job ends, however it ends, no TaskManager and no Spark job is left.

Plus the PostgreSQL two-phase-commit sink's final commit with TaskManagers in Spark.
"""

from __future__ import annotations

import collections
import os
import signal
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from testkit.checkpoints import PIPELINES
from testkit.jobs import REPO
from testkit.outputs import assert_same_output, keyed_window_reference, read_output
from testkit.spark import SparkJob, run_spark_job, still_running

pytestmark = pytest.mark.spark
UNBOUNDED = REPO / "examples" / "unbounded_counts.py"


def _no_spark_job_running(context: Any) -> bool:
    """No Spark job stays active once the Sluice job has ended. Spark's status tracker learns of a job's
    end from its listener bus, after `collect()` has already returned in the host's thread, so it may
    still list the job for a moment (seen once with two test workers): it is read until it agrees, for
    at most 30 s."""
    deadline = time.monotonic() + 30
    while list(context.statusTracker().getActiveJobsIds()) != []:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def test_finished_job_leaves_no_taskmanager_and_no_spark_job(spark_context: Any, tmp_path: Path) -> None:
    count = 20_000
    job = SparkJob(
        PIPELINES / "generated_counts.py",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--arg",
        f"count={count}",
        "--arg",
        "rate=10000",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "300ms",
        spark_context=spark_context,
    )
    try:
        job.wait_until(lambda: len(job.taskmanager_pids()) == 2, 120, "two TaskManagers")
        pids = job.taskmanager_pids()
        assert job.wait(120) == 0, job.stderr
    finally:
        job.kill()
    assert still_running(pids) == []
    assert _no_spark_job_running(spark_context)
    assert_same_output(
        read_output(str(tmp_path / "out")),
        keyed_window_reference(count, keys=50, window_ms=1000, ms_per_record=10),
    )


def test_cancelled_job_leaves_no_taskmanager_and_no_spark_job(spark_context: Any, tmp_path: Path) -> None:
    job = SparkJob(
        UNBOUNDED,
        "--arg",
        f"out={tmp_path / 'out'}",
        "--arg",
        "rate=2000",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "300ms",
        spark_context=spark_context,
    )
    try:
        job.wait_checkpoints(1, timeout=120)
        pids = job.taskmanager_pids()
        job.post("/v1/job/cancel", {})
        assert job.wait(60) == 1, job.stderr
    finally:
        job.kill()
    assert job.handle.wait()["state"] == "CANCELED"
    assert still_running(pids) == []
    assert _no_spark_job_running(spark_context)


def test_restart_replaces_every_taskmanager_of_the_failed_attempt(spark_context: Any, tmp_path: Path) -> None:
    job = SparkJob(
        UNBOUNDED,
        "--arg",
        f"out={tmp_path / 'out'}",
        "--arg",
        "rate=2000",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "300ms",
        "--restart-delay",
        "100ms",
        spark_context=spark_context,
    )
    try:
        job.wait_checkpoints(1, timeout=120)
        first = job.taskmanager_pids()
        os.kill(first[0], signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["attempt"] == 1, 60, "the restart")
        job.wait_until(lambda: len(job.taskmanager_pids()) == 2, 60, "two TaskManagers of the new attempt")
        second = job.taskmanager_pids()
        assert still_running(first) == [], "the TaskManager that survived the failure was ended too"
        assert set(second).isdisjoint(first)
        before = job.completed_checkpoints()
        job.wait_checkpoints(before + 2)
    finally:
        job.kill()
    assert "attempt 0 failed" in job.stderr
    assert still_running(second) == []
    assert _no_spark_job_running(spark_context)


@pytest.mark.postgres
def test_postgres_sink_commits_the_last_rows_with_the_final_checkpoint(
    spark_context: Any, postgres_db: str, tmp_path: Path
) -> None:
    count, keys = 30_000, 10
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE counts (k int, win int, n int, total bigint)")
    done = run_spark_job(
        PIPELINES / "postgres_counts.py",
        "--arg",
        f"dsn={postgres_db}",
        "--arg",
        "table=counts",
        "--arg",
        f"count={count}",
        "--arg",
        "rate=20000",
        "--arg",
        f"keys={keys}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "1h",
        spark_context=spark_context,
    )
    assert done.returncode == 0, done.stderr
    expected: dict[tuple[int, int], tuple[int, int]] = {}
    for i in range(count):
        n, total = expected.get((i % keys, i // 1000), (0, 0))
        expected[(i % keys, i // 1000)] = (n + 1, total + i)
    with psycopg.connect(postgres_db) as conn:
        rows = collections.Counter(conn.execute("SELECT k, win, n, total FROM counts").fetchall())
        prepared = conn.execute("SELECT gid FROM pg_prepared_xacts").fetchall()
    # With an hourly interval only the final checkpoint committed: it alone made every row visible.
    assert rows == collections.Counter((k, w, n, t) for (k, w), (n, t) in expected.items())
    assert prepared == []

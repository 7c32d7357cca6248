"""The W1 example end to end, and exactly-once output across a TaskManager killed mid-run.

The first two scenarios run on both hosts (the `runner` fixture): TaskManagers as local processes, and
as Spark barrier tasks, where killing a TaskManager kills the Spark Python worker that runs it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from sluice.state.keyed import BACKENDS
from testkit import spark
from testkit.jobs import REPO, SluiceJob, run_job
from testkit.outputs import (
    assert_same_output,
    hidden_files,
    keyed_window_reference,
    read_output,
    w1_reference,
)
from testkit.spark import Runner

W1 = REPO / "examples" / "w1_window_counts.py"
GENERATED = REPO / "tests" / "integration" / "pipelines" / "generated_counts.py"
# Both hosts for the scenarios that take `runner`; one SparkContext for the whole test run.
runner = spark.runner


def test_w1_example_output_equals_reference(runner: Runner, tmp_path: Path) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    done = runner.run(
        W1,
        "--arg",
        "n=200000",
        "--arg",
        f"out={out}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{chk}",
        "--checkpoint-interval",
        "1s",
    )
    assert done.returncode == 0, done.stderr
    assert "FINISHED" in done.stderr
    assert_same_output(read_output(str(out)), w1_reference(200_000))
    assert hidden_files(str(out)) == [], "a finished job leaves no in-progress file behind"


def keyed_state(backend: str) -> tuple[str, ...]:
    """generated_counts.py's keyed process function variant, its keyed state in `backend`."""
    return ("--arg", "kind=process", "--state-backend", backend)


# The window operator's own state (the default), and keyed state on each state backend.
VARIANTS = {"window": (), **{f"keyed-state-{b}": keyed_state(b) for b in BACKENDS}}


def _kill_one_taskmanager_and_check(
    runner: Runner,
    tmp_path: Path,
    checkpoint_dir: str,
    storage_env: dict[str, str] | None,
    variant: tuple[str, ...] = (),
) -> None:
    out = tmp_path / "out"
    count = 120_000
    # The source holds its last tenth until the kill has been answered by a restart: on a slow machine
    # the job could otherwise reach its end before the kill lands, and nothing would be recovered.
    hold = tmp_path / "hold"
    hold.touch()
    job = runner.start(
        GENERATED,
        *variant,
        "--arg",
        f"out={out}",
        "--arg",
        f"count={count}",
        "--arg",
        f"hold={hold}",
        "--arg",
        "rate=15000",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        checkpoint_dir,
        "--checkpoint-interval",
        "300ms",
        "--restart-delay",
        "200ms",
        env=storage_env,
    )
    try:
        job.wait_checkpoints(2)
        assert job.get("/v1/job")["subtasks"]["finished"] == 0, "the failure must hit a running job"
        committed_before = sum(read_output(str(out)).values())
        victim = job.taskmanager_pids()[1]
        if runner.host == "spark":
            # The TaskManager runs in a Python worker that Spark forked for its barrier task.
            command = Path(f"/proc/{victim}/cmdline").read_bytes().split(b"\0")
            assert b"sluice_spark_daemon" in command and b"pyspark.worker" in command, command
        os.kill(victim, signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 1, 60, "the restart")
        hold.unlink()
        code = job.wait(180)
    finally:
        job.kill()
    assert code == 0, job.stderr
    assert committed_before > 0, "output was committed before the failure"
    assert_same_output(
        read_output(str(out)), keyed_window_reference(count, keys=50, window_ms=1000, ms_per_record=10)
    )


def test_sigkill_taskmanager_gives_exactly_once_output(runner: Runner, tmp_path: Path) -> None:
    _kill_one_taskmanager_and_check(runner, tmp_path, f"file://{tmp_path / 'chk'}", None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigkill_taskmanager_keyed_state_gives_exactly_once_output(backend: str, tmp_path: Path) -> None:
    _kill_one_taskmanager_and_check(
        Runner("processes", SluiceJob, run_job),
        tmp_path,
        f"file://{tmp_path / 'chk'}",
        None,
        keyed_state(backend),
    )


@pytest.mark.s3
@pytest.mark.parametrize("variant", ["window", "keyed-state-heap"])
def test_sigkill_taskmanager_with_checkpoints_on_s3(variant: str, tmp_path: Path, s3_bucket: str) -> None:
    # The keyed state variant writes incremental files under <job>/shared/ on the S3 server.
    _kill_one_taskmanager_and_check(
        Runner("processes", SluiceJob, run_job), tmp_path, f"{s3_bucket}/checkpoints", None, VARIANTS[variant]
    )


@pytest.mark.parametrize("variant", VARIANTS)
def test_restore_from_retained_checkpoint_with_another_parallelism(variant: str, tmp_path: Path) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    count = 60_000
    first = SluiceJob(
        GENERATED,
        *VARIANTS[variant],
        "--arg",
        f"out={out}",
        "--arg",
        f"count={count}",
        "--arg",
        "rate=15000",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{chk}",
        "--checkpoint-interval",
        "300ms",
        "--job-id",
        "rescale-first",
        "--checkpoints-retained",
        "3",
    )
    try:
        first.wait_checkpoints(3)
        first.process.send_signal(signal.SIGKILL)  # the whole coordinator: a hard crash
        first.process.wait(30)
    finally:
        first.kill()
    checkpoints = sorted(
        (chk / "rescale-first").glob("chk-*/_metadata"), key=lambda p: int(p.parent.name[4:])
    )
    assert checkpoints, "the first run completed checkpoints"
    latest = checkpoints[-1].parent
    second = run_job(
        GENERATED,
        *VARIANTS[variant],
        "--arg",
        f"out={out}",
        "--arg",
        f"count={count}",
        "--arg",
        "rate=30000",
        "--parallelism",
        "3",
        "--checkpoint-dir",
        f"file://{chk}",
        "--checkpoint-interval",
        "300ms",
        "--from-savepoint",
        f"file://{latest}",
        "--job-id",
        "rescale-second",
    )
    assert second.returncode == 0, second.stderr
    assert_same_output(
        read_output(str(out)), keyed_window_reference(count, keys=50, window_ms=1000, ms_per_record=10)
    )

"""`sluice run` on its default host, Spark: a quiet terminal, Spark's log in a file, clear setting errors."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from testkit.jobs import REPO, SLUICE, SluiceJob
from testkit.outputs import assert_same_output, read_output, w1_reference
from testkit.spark import still_running

W1 = REPO / "examples" / "w1_window_counts.py"


def sluice_run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    # No --host: the default is what is under test.
    return subprocess.run(
        [*SLUICE, "run", str(W1), "--rest-port", "0", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        check=False,
    )


@pytest.mark.spark
def test_sluice_run_uses_local_spark_and_keeps_spark_output_in_its_log(tmp_path: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "spark.log"
    done = sluice_run(
        "--arg",
        "n=50000",
        "--arg",
        f"out={out}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--spark-log",
        str(log),
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert all(line.startswith("sluice: ") for line in lines), "only the job's own lines on stderr"
    assert f"sluice: Spark local[2], 2 TaskManager(s); Spark's log: {log}" in lines
    assert lines[-1].endswith("FINISHED")
    spark_log = log.read_text()
    assert "Running Spark version 4." in spark_log and "local[2]" in done.stderr
    assert "barrier" in spark_log.lower(), "the TaskManagers ran as a barrier stage"
    assert "Using incubator modules" in spark_log, "the JVM's own stderr goes to the log too"
    assert_same_output(read_output(str(out)), w1_reference(50_000))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--parallelism", "2", "--master", "local[1]"],
            "--master local[1] has 1 task slot(s) but the job needs 2 TaskManagers running at once "
            "(one barrier task each): use --master local[2] or fewer --taskmanagers",
        ),
        (
            ["--spark-conf", "spark.task.maxFailures=4"],
            "--spark-conf spark.task.maxFailures=4 is not allowed: Sluice needs spark.task.maxFailures=1",
        ),
        (
            ["--host", "processes", "--master", "local[2]", "--spark-conf", "a=b"],
            "--master and --spark-conf apply to --host spark only, not --host processes",
        ),
        (
            ["--master", "spark://127.0.0.1:7077", "--spark-conf", "spark.executor.instances=0"],
            "spark.executor.instances='0' must be at least 1",
        ),
        (
            ["--master", "k8s://https://127.0.0.1:6443"],
            "inside a pod, but POD_NAME, POD_NAMESPACE, POD_IP, KUBERNETES_SERVICE_HOST, "
            "KUBERNETES_SERVICE_PORT are not set",
        ),
    ],
)
def test_unusable_spark_settings_exit_2_before_starting_spark(
    tmp_path: Path, args: list[str], message: str
) -> None:
    chk = f"file://{tmp_path / 'chk'}"
    done = sluice_run("--arg", f"out={tmp_path / 'out'}", "--checkpoint-dir", chk, *args, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "sluice: error: " in done.stderr and message in done.stderr
    assert "Spark's log" not in done.stderr, "refused before any JVM started"


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.spark
def test_sigterm_suspends_the_job_and_leaves_no_taskmanager_and_no_jvm(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"
    job = SluiceJob(
        REPO / "examples" / "unbounded_counts.py",
        "--host",
        "spark",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "300ms",
        "--spark-log",
        str(log),
    )
    try:
        job.wait_checkpoints(1, timeout=120)
        pids = job.taskmanager_pids()
        assert _processes_mentioning(str(log)), "the driver JVM runs with this job's log configuration"
        job.process.send_signal(signal.SIGTERM)
        code = job.wait(60)
    finally:
        job.kill()
    assert code == 3 and "SUSPENDED" in job.stderr, job.stderr
    assert still_running(pids) == []
    # The JVM exits with its Python parent (it may first write the class-data archive, see cli.md).
    deadline = time.monotonic() + 30
    while _processes_mentioning(str(log)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_mentioning(str(log)) == []

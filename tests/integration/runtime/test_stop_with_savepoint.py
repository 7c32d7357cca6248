"""FLIP-34 through the CLI and REST: stop with drain (TERMINATE), without (SUSPEND), plain savepoints.

The drain runs through the real `sluice run` (processes host) and on Spark (`runner`); the other
scenarios are engine semantics and run with TaskManagers on threads of the test and on Spark
(`engine_runner`); `sluice stop` and `sluice savepoint` are always the real CLI.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
from pathlib import Path

import pytest

from sluice.state.keyed import BACKENDS
from testkit import spark
from testkit.checkpoints import PIPELINES, load, operator
from testkit.inprocess import ThreadJob, run_thread_job
from testkit.jobs import REPO, run_cli
from testkit.outputs import assert_same_output, keyed_window_reference, read_output
from testkit.spark import Runner

UNBOUNDED = REPO / "examples" / "unbounded_counts.py"
# Both hosts for the scenarios that take `runner`; one SparkContext for the whole test run.
runner = spark.runner
engine_runner = spark.engine_runner


def savepoint_metadata(path: str) -> dict:  # type: ignore[type-arg]
    return load(Path(path.removeprefix("file://")) / "_metadata")


def test_stop_with_drain_fires_every_window(runner: Runner, tmp_path: Path) -> None:
    raw, counts = tmp_path / "raw", tmp_path / "counts"
    job = runner.start(
        PIPELINES / "raw_and_windows.py",
        "--arg",
        f"raw={raw}",
        "--arg",
        f"counts={counts}",
        "--arg",
        "rate=5000",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "300ms",
        "--savepoint-dir-allow",
        f"file://{tmp_path / 'sp'}",
    )
    try:
        job.wait_checkpoints(2)
        stop = run_cli(
            "stop", "--address", job.rest_url(), "--drain", "--savepoint-dir", f"file://{tmp_path / 'sp'}"
        )
        assert stop.returncode == 0, stop.stderr + job.stderr
        assert job.wait(60) == 0, job.stderr
    finally:
        job.kill()
    path = stop.stdout.strip().splitlines()[-1]
    metadata = savepoint_metadata(path)
    assert metadata["kind"] == "savepoint" and metadata["stopMode"] == "drain"
    assert all(op["fullyFinished"] for op in metadata["operators"]), "TERMINATE finishes every operator"
    raw_lines = read_output(str(raw))
    assert raw_lines and max(raw_lines.values()) == 1, "every raw record exactly once"
    counted = sum(json.loads(line)[1] * times for line, times in read_output(str(counts)).items())
    assert counted == sum(raw_lines.values()), (
        "with drain every window fired: the counts add up to the raw records"
    )


def test_stop_without_drain_then_resume_equals_an_uninterrupted_run(
    engine_runner: Runner, tmp_path: Path
) -> None:
    _stop_without_drain_then_resume(engine_runner, tmp_path, ())


@pytest.mark.parametrize("backend", BACKENDS)
def test_stop_without_drain_then_resume_keyed_state_equals_an_uninterrupted_run(
    backend: str, tmp_path: Path
) -> None:
    # generated_counts.py's keyed process function variant: its keyed state lives in `backend`.
    variant = ("--arg", "kind=process", "--state-backend", backend)
    _stop_without_drain_then_resume(Runner("threads", ThreadJob, run_thread_job), tmp_path, variant)


def _stop_without_drain_then_resume(runner: Runner, tmp_path: Path, variant: tuple[str, ...]) -> None:
    out, sp = tmp_path / "out", tmp_path / "sp"
    count = 40_000
    options = (
        *variant,
        "--arg",
        f"out={out}",
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
        "--savepoint-dir-allow",
        f"file://{sp}",
    )
    reference = keyed_window_reference(count, keys=50, window_ms=1000, ms_per_record=10)
    job = runner.start(PIPELINES / "generated_counts.py", *options)
    try:
        job.wait_checkpoints(2)
        stop = run_cli("stop", "--address", job.rest_url(), "--savepoint-dir", f"file://{sp}")
        assert stop.returncode == 0, stop.stderr + job.stderr
        assert job.wait(60) == 0, job.stderr
    finally:
        job.kill()
    path = stop.stdout.strip().splitlines()[-1]
    metadata = savepoint_metadata(path)
    assert metadata["stopMode"] == "no-drain"
    assert not any(op["fullyFinished"] for op in metadata["operators"]), "SUSPEND finishes nothing"
    assert operator(metadata, "count")["subtasks"], "open windows were kept in the savepoint, not fired"
    suspended = read_output(str(out))
    assert not suspended - reference, "no partial window was emitted by the suspend"
    assert sum(suspended.values()) < sum(reference.values())
    # The savepoint is self-contained: it still works after being moved.
    moved = tmp_path / "moved-savepoint"
    shutil.move(path.removeprefix("file://"), moved)
    resumed = runner.run(PIPELINES / "generated_counts.py", *options, "--from-savepoint", f"file://{moved}")
    assert resumed.returncode == 0, resumed.stderr
    assert_same_output(read_output(str(out)), reference)


def test_plain_savepoint_keeps_the_job_running(engine_runner: Runner, tmp_path: Path) -> None:
    job = engine_runner.start(
        UNBOUNDED,
        "--arg",
        f"out={tmp_path / 'out'}",
        "--arg",
        "rate=2000",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "300ms",
        "--savepoint-dir",
        f"file://{tmp_path / 'sp'}",
    )
    try:
        job.wait_checkpoints(1)
        taken = run_cli("savepoint", "--address", job.rest_url())
        assert taken.returncode == 0, taken.stderr
        path = taken.stdout.strip().splitlines()[-1]
        assert savepoint_metadata(path)["stopMode"] is None
        assert job.get("/v1/job")["state"] == "RUNNING"
        before = job.completed_checkpoints()
        job.wait_checkpoints(before + 2)
        assert job.get("/v1/checkpoints")["latestSavepoint"]["path"] == path
    finally:
        job.kill()


def test_failing_savepoint_leaves_the_job_running(engine_runner: Runner, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the savepoint directory should be")
    job = engine_runner.start(
        UNBOUNDED,
        "--arg",
        f"out={tmp_path / 'out'}",
        "--arg",
        "rate=2000",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "300ms",
        "--savepoint-dir-allow",
        f"file://{tmp_path}",
    )
    try:
        job.wait_checkpoints(1)
        for command in (["savepoint"], ["stop"], ["stop", "--drain"]):
            failed = run_cli(*command, "--address", job.rest_url(), "--savepoint-dir", f"file://{blocker}/sp")
            assert failed.returncode == 1, failed.stdout
            assert "savepoint failed" in failed.stderr and "not-a-directory" in failed.stderr
            assert job.get("/v1/job")["state"] == "RUNNING"
        before = job.completed_checkpoints()
        job.wait_checkpoints(before + 2)
        stopped = run_cli("stop", "--address", job.rest_url(), "--savepoint-dir", f"file://{tmp_path / 'sp'}")
        assert stopped.returncode == 0, stopped.stderr
        assert job.wait(60) == 0
    finally:
        job.kill()


def test_savepoint_request_with_a_bad_stop_mode_is_rejected(tmp_path: Path) -> None:
    job = ThreadJob(
        UNBOUNDED,
        "--arg",
        f"out={tmp_path / 'out'}",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--savepoint-dir",
        f"file://{tmp_path / 'sp'}",
    )
    try:
        job.wait_until(lambda: job.get("/v1/job")["state"] == "RUNNING", 60, "RUNNING")
        with pytest.raises(urllib.error.HTTPError) as rejected:
            job.post("/v1/savepoints", {"stop": "pause"})
        assert rejected.value.code == 400
        assert "suspend" in json.loads(rejected.value.read())["error"]
    finally:
        job.kill()

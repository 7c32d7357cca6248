"""The job's life as a user sees it: status output, a job that fails for good, cancel."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from testkit.checkpoints import GENERATED_COUNTS, PIPELINES, generated_counts_options
from testkit.jobs import REPO, SluiceJob, run_cli, run_job
from testkit.outputs import assert_same_output, keyed_window_reference, read_output, w1_reference


def test_failing_job_exits_non_zero_with_the_error_after_its_restarts(tmp_path: Path) -> None:
    done = run_job(
        PIPELINES / "failing.py",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--max-restarts",
        "2",
        "--restart-delay",
        "100ms",
        "--job-id",
        "poison",
    )
    assert done.returncode == 1
    assert "FAILED" in done.stderr and "record 500 is poison" in done.stderr
    assert done.stderr.count("restarting in") == 2, "the fixed-delay strategy tried twice before giving up"
    result = json.loads((tmp_path / "chk" / "poison" / "job-result.json").read_text())
    assert result["state"] == "FAILED" and "record 500 is poison" in result["error"]


def test_a_job_that_has_ended_is_not_run_again_and_starts_no_spark_driver(tmp_path: Path) -> None:
    pipeline = str(REPO / "examples" / "w1_window_counts.py")
    args = [
        "--arg",
        "n=5000",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
    ]
    first = run_job(pipeline, *args, "--job-id", "once")
    assert first.returncode == 0, first.stderr
    output = read_output(str(tmp_path / "out"))

    # The same job id again (a coordinator pod restarted after its job ended), this time on Spark.
    again = run_cli("run", pipeline, *args, "--job-id", "once", "--host", "spark", "--rest-port", "0")
    assert again.returncode == 0, again.stderr
    assert "job once already ended FINISHED" in again.stderr
    assert "Spark local" not in again.stderr, "a Spark driver was started for a job that had ended"
    assert read_output(str(tmp_path / "out")) == output


def test_status_prints_the_job_and_cancel_ends_it(tmp_path: Path) -> None:
    job = SluiceJob(
        REPO / "examples" / "unbounded_counts.py",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "300ms",
    )
    try:
        job.wait_checkpoints(1)
        status = run_cli("status", "--address", job.rest_url(), "-o", "json")
        assert status.returncode == 0, status.stderr
        shown = json.loads(status.stdout)
        assert shown["state"] == "RUNNING" and shown["subtasks"] == {"total": 4, "running": 4, "finished": 0}
        assert [v["uids"] for v in shown["vertices"]] == [["generator", "pair"], ["count", "sink"]]
        cancel = run_cli("cancel", "--address", job.rest_url())
        assert cancel.returncode == 0, cancel.stderr
        assert job.wait(60) == 1
    finally:
        job.kill()
    assert "CANCELED" in job.stderr
    unreachable = run_cli("status", "--address", job.rest_url())
    assert unreachable.returncode == 1 and "cannot reach the coordinator" in unreachable.stderr


def test_sigterm_suspends_the_job_and_the_same_job_id_resumes_it_exactly_once(tmp_path: Path) -> None:
    # SIGTERM is how Kubernetes ends a pod that is deleted or evicted: the job is not over.
    out, chk, count = tmp_path / "out", tmp_path / "chk", 40_000
    options = generated_counts_options(out, chk, count, "evicted")
    first = SluiceJob(GENERATED_COUNTS, *options)
    try:
        first.wait_checkpoints(2)
        seen = int(first.get("/v1/checkpoints")["latest"]["id"])
        first.process.send_signal(signal.SIGTERM)
        code = first.wait(60)
    finally:
        first.kill()
    assert code == 3, first.stderr
    assert "job evicted SUSPENDED (the coordinator received SIGTERM)" in first.stderr
    assert not (chk / "evicted" / "job-result.json").exists(), "a suspended job has not ended"
    assert read_output(str(out)), "the first coordinator committed output before it was stopped"

    second = run_job(GENERATED_COUNTS, *options)
    assert second.returncode == 0, second.stderr
    result = json.loads((chk / "evicted" / "job-result.json").read_text())
    assert result["state"] == "FINISHED"
    # Checkpoint ids go on from the restored one: the second coordinator resumed, it did not start over.
    assert int(result["lastCheckpoint"].rsplit("chk-", 1)[1]) > seen
    assert_same_output(
        read_output(str(out)), keyed_window_reference(count, keys=50, window_ms=1000, ms_per_record=10)
    )


def test_pipeline_can_be_given_as_an_importable_module(tmp_path: Path) -> None:
    package = tmp_path / "jobs"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "w1.py").write_text((REPO / "examples" / "w1_window_counts.py").read_text())
    done = run_job(
        "jobs.w1",
        "--arg",
        "n=10000",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert_same_output(read_output(str(tmp_path / "out")), w1_reference(10_000))

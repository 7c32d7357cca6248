"""A stop-with-savepoint whose savepoint fails after the sources stopped: the job restarts and runs on."""

from __future__ import annotations

from pathlib import Path

from testkit.checkpoints import GENERATED_COUNTS, generated_counts_options
from testkit.inprocess import ThreadJob
from testkit.jobs import run_cli
from testkit.outputs import assert_same_output, keyed_window_reference, read_output


def test_savepoint_failing_after_the_stop_began_restarts_the_job(tmp_path: Path) -> None:
    out, blocked = tmp_path / "out", tmp_path / "blocked"
    blocked.mkdir()
    # The directory itself is writable (the stop's up-front probe passes), but every savepoint directory
    # this job could create in it is taken by a file: writing the savepoint's state fails mid-stop.
    for n in range(1, 2000):
        (blocked / f"savepoint-failover-job-{n}").write_text("")
    count = 60_000
    job = ThreadJob(
        GENERATED_COUNTS,
        *generated_counts_options(out, tmp_path / "chk", count, "failover-job"),
        "--restart-delay",
        "100ms",
        "--savepoint-dir-allow",
        f"file://{blocked}",
    )
    try:
        job.wait_checkpoints(2)
        stop = run_cli("stop", "--address", job.rest_url(), "--savepoint-dir", f"file://{blocked}")
        assert stop.returncode == 1, stop.stdout
        assert "savepoint failed" in stop.stderr
        job.wait_until(
            lambda: job.get("/v1/job")["restarts"] >= 1, 60, "the restart after the failed savepoint"
        )
        job.wait_until(lambda: job.get("/v1/job")["state"] == "RUNNING", 60, "RUNNING again")
        before = job.completed_checkpoints()
        job.wait_checkpoints(before + 1)
        assert job.wait(180) == 0, job.stderr
    finally:
        job.kill()
    assert_same_output(
        read_output(str(out)), keyed_window_reference(count, keys=50, window_ms=1000, ms_per_record=10)
    )

"""Checkpoint storage that answers errors while a job restores is a failed attempt, not a crash.

The checkpoint directory of a running job is swapped for a symbolic link to itself, so that listing or
reading it fails with ELOOP (an OSError other than "not found", as an object store that answers 503
gives), and a TaskManager is killed. Each restart fails to list the checkpoints; the restart strategy
retries; once the directory is back, the job restores its latest checkpoint and ends exactly once.

A listing that answers with no checkpoint at all, while this run has completed one (a directory moved
away for a while, a store answering from a stale view), is the same: the job waits for storage instead
of starting from its beginning, which wrote every window a second time.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from testkit.checkpoints import GENERATED_COUNTS, generated_counts_options
from testkit.jobs import SluiceJob
from testkit.outputs import assert_same_output, keyed_window_reference, read_output


def test_a_restore_that_cannot_list_checkpoints_is_retried_until_storage_answers(tmp_path: Path) -> None:
    out, chk, count = tmp_path / "out", tmp_path / "chk", 64_000
    job = SluiceJob(
        GENERATED_COUNTS,
        *generated_counts_options(out, chk, count, "unlistable"),
        *("--restart-delay", "300ms", "--max-restarts", "50"),
    )
    job_dir, away = chk / "unlistable", chk / "unlistable.away"
    try:
        job.wait_checkpoints(2)
        job_dir.rename(away)
        job_dir.symlink_to(job_dir)  # a loop: every access fails with ELOOP
        os.kill(job.taskmanager_pids()[0], signal.SIGKILL)
        job.wait_until(lambda: "listing checkpoints in" in job.stderr, 60, "a failed listing")
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 3, 60, "restarts while storage fails")
        job_dir.unlink()
        away.rename(job_dir)
        code = job.wait(180)
    finally:
        if job_dir.is_symlink():
            job_dir.unlink()
        if away.exists():
            away.rename(job_dir)
        job.kill()
    assert code == 0, job.stderr
    assert "Traceback" not in job.stderr
    assert_same_output(read_output(f"file://{out}"), keyed_window_reference(count, 50, 1000, 10))


def test_a_restore_that_finds_no_checkpoint_after_this_run_completed_one_waits_for_storage(
    tmp_path: Path,
) -> None:
    out, chk, count = tmp_path / "out", tmp_path / "chk", 64_000
    job = SluiceJob(
        GENERATED_COUNTS,
        *generated_counts_options(out, chk, count, "emptied"),
        *("--restart-delay", "1s", "--max-restarts", "50"),
    )
    job_dir, away = chk / "emptied", chk / "emptied.away"
    try:
        job.wait_checkpoints(2)
        os.kill(job.taskmanager_pids()[0], signal.SIGKILL)
        # Moved only once the attempt has ended, so that no write of it lands in the moved directory.
        job.wait_until(lambda: job.get("/v1/job")["state"] == "RESTARTING", 60, "the attempt's end")
        job_dir.rename(away)
        job.wait_until(lambda: "found none, though checkpoint" in job.stderr, 60, "an empty listing")
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 3, 60, "restarts while storage is empty")
        assert not job_dir.exists(), "an attempt ran while the checkpoints were away"
        away.rename(job_dir)
        code = job.wait(180)
    finally:
        if away.exists() and not job_dir.exists():
            away.rename(job_dir)
        job.kill()
    assert code == 0, job.stderr
    assert "Traceback" not in job.stderr
    assert_same_output(read_output(f"file://{out}"), keyed_window_reference(count, 50, 1000, 10))

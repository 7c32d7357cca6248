"""Restoring into a changed job: state of a removed operator is refused unless explicitly dropped.

The jobs run in the test process (`ThreadJob`); the refusal is `sluice run`'s own (exit code 2 and
its message).
"""

from __future__ import annotations

from pathlib import Path

from testkit.inprocess import ThreadJob
from testkit.jobs import REPO, run_cli, run_job

UNBOUNDED = REPO / "examples" / "unbounded_counts.py"


def test_state_of_a_removed_operator_needs_allow_non_restored_state(tmp_path: Path) -> None:
    job = ThreadJob(
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
        stop = run_cli("stop", "--address", job.rest_url())
        assert stop.returncode == 0, stop.stderr
        assert job.wait(60) == 0
    finally:
        job.kill()
    savepoint = stop.stdout.strip().splitlines()[-1]
    changed = tmp_path / "changed.py"
    changed.write_text(UNBOUNDED.read_text().replace('uid="count"', 'uid="count-v2"'))
    options = (
        "--arg",
        f"out={tmp_path / 'out2'}",
        "--arg",
        "rate=2000",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--from-savepoint",
        savepoint,
        "--checkpoint-interval",
        "300ms",
    )
    refused = run_job(changed, *options, timeout=120)
    assert refused.returncode == 2
    assert "count" in refused.stderr and "--allow-non-restored-state" in refused.stderr
    resumed = ThreadJob(changed, *options, "--allow-non-restored-state")
    try:
        resumed.wait_checkpoints(1)
        document = resumed.get("/v1/job")
        assert document["state"] == "RUNNING"
        # The dropped state is said, not silently lost: on stderr and in the job document.
        assert document["restoredFrom"]["droppedOperators"] == ["count"]
        assert document["restoredFrom"]["path"] == savepoint
        assert "without the state of operators the job no longer has" in resumed.stderr
        assert "(--allow-non-restored-state): count" in resumed.stderr
    finally:
        resumed.kill()

"""A damaged newest checkpoint does not end the job: no FAILED result poisons its job id.

The job is suspended (SIGTERM) with one retained checkpoint; its `_metadata` is then overwritten. A
coordinator started again for the job id cannot restore it: that is not an end of the job, so it stops
at once (no restarts: retrying cannot mend the file), SUSPENDED, with no `job-result.json`, and says how
to resume. Once the file is repaired, the same job id resumes from that checkpoint, and `sluice run`,
`GET /v1/job` and `sluice status` say what it restored.
"""

from __future__ import annotations

from pathlib import Path

from testkit.jobs import REPO, SluiceJob, run_cli, run_job

UNBOUNDED = REPO / "examples" / "unbounded_counts.py"


def test_a_damaged_checkpoint_suspends_the_job_and_the_repaired_one_resumes_it(tmp_path: Path) -> None:
    options = (
        "--arg",
        f"out={tmp_path / 'out'}",
        "--arg",
        "rate=2000",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "300ms",
        "--job-id",
        "damaged",
    )
    first = SluiceJob(UNBOUNDED, *options)
    try:
        first.wait_checkpoints(2)
    finally:
        first.kill()
    assert first.wait(60) == 3, first.stderr
    job_dir = tmp_path / "chk" / "damaged"
    (metadata,) = sorted(job_dir.glob("chk-*/_metadata"))
    intact = metadata.read_bytes()
    metadata.write_bytes(b"{ not json")

    damaged = run_job(UNBOUNDED, *options, timeout=120)
    assert damaged.returncode == 3, damaged.stderr
    last = damaged.stderr.strip().splitlines()[-1]
    assert "job damaged SUSPENDED: its state could not be restored" in last, damaged.stderr
    assert str(metadata.parent) in last and "has not ended" in last and "--from-savepoint" in last
    assert "restarting in" not in damaged.stderr, "a damaged checkpoint was retried"
    assert not (job_dir / "job-result.json").exists(), "a restore failure was stored as the job's end"

    metadata.write_bytes(intact)
    resumed = SluiceJob(UNBOUNDED, *options)
    try:
        resumed.wait_until(lambda: resumed.get("/v1/job")["state"] == "RUNNING", what="the job running")
        restored = resumed.get("/v1/job")["restoredFrom"]
        assert restored["kind"] == "checkpoint" and restored["droppedOperators"] == []
        assert restored["path"] == f"file://{metadata.parent}"
        assert f"job damaged: restored from checkpoint {restored['checkpointId']} at {restored['path']}" in (
            resumed.stderr
        )
        status = run_cli("status", "--address", resumed.rest_url())
        assert status.returncode == 0, status.stderr
        assert f"restored from: checkpoint {restored['checkpointId']} at {restored['path']}" in status.stdout
    finally:
        resumed.kill()

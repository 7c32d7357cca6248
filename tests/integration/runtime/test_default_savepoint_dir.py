"""`sluice run` without --savepoint-dir has a default savepoint directory beside its checkpoints, so
`sluice stop` works against the README's own command (which gives none)."""

from __future__ import annotations

from pathlib import Path

from testkit.checkpoints import PIPELINES
from testkit.jobs import SluiceJob, run_cli


def test_without_a_savepoint_dir_sluice_stop_writes_beside_the_checkpoints(tmp_path: Path) -> None:
    job = SluiceJob(
        PIPELINES / "uneven.py",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--arg",
        "short=10",
        "--arg",
        "long=10000000",
        "--arg",
        "rate=2000",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
    )
    try:
        url = job.rest_url()
        job.wait_until(lambda: job.get("/v1/job")["state"] == "RUNNING", what="the job running")
        stopped = run_cli("stop", "--address", url)
        assert stopped.returncode == 0, stopped.stderr
        assert job.wait(60) == 0, job.stderr
    finally:
        job.kill()
    announced = f"no --savepoint-dir given: savepoints go to file://{tmp_path / 'chk' / 'savepoints'}"
    assert announced in job.stderr
    written = list((tmp_path / "chk" / "savepoints").glob("savepoint-*/_metadata"))
    assert len(written) == 1, job.stderr
    assert str(written[0].parent) in stopped.stdout + stopped.stderr

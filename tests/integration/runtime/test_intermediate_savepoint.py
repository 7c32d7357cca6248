"""An intermediate savepoint (`sluice savepoint`, the job goes on) commits no output.

Recovery restores the latest checkpoint, never a savepoint. Output that a savepoint had committed after
that checkpoint would be written a second time when the job replays from the checkpoint, so two-phase
commit sinks commit with checkpoints and with the savepoint that stops a job, not with one that leaves
it running (Flink made the same choice in 1.15). The savepoint still holds its pending commits: a job
started from it commits them.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from testkit.checkpoints import GENERATED_COUNTS, generated_counts_options, load
from testkit.jobs import SluiceJob, run_cli
from testkit.outputs import assert_same_output, keyed_window_reference, read_output


def test_output_stays_exactly_once_when_a_failure_follows_an_intermediate_savepoint(tmp_path: Path) -> None:
    out, count = tmp_path / "out", 48_000
    job = SluiceJob(
        GENERATED_COUNTS,
        # No periodic checkpoint completes while the test looks: only the savepoint could commit. At
        # 3,000 records/s the input lasts 16 s: at 8,000 (6 s) a loaded machine let the job reach its end,
        # and its final checkpoint commit everything, before the savepoint was looked at.
        *generated_counts_options(out, tmp_path / "chk", count, "intermediate", interval="1h", rate=3000),
        "--restart-delay",
        "100ms",
        "--savepoint-dir-allow",
        f"file://{tmp_path / 'sp'}",
    )
    try:
        # Windows have reached the sink: its open transaction holds lines.
        job.wait_until(
            lambda: out.is_dir() and any(p.stat().st_size > 0 for p in out.glob(".*.inprogress")),
            60,
            "window lines written to the sink's open transaction",
        )
        savepoint = run_cli(
            "savepoint", "--address", job.rest_url(), "--savepoint-dir", f"file://{tmp_path / 'sp'}"
        )
        assert savepoint.returncode == 0, savepoint.stderr
        assert job.get("/v1/checkpoints")["counts"]["completed"] >= 1
        # The premise: the input had not ended (no final checkpoint could have committed anything).
        taken = load(Path(savepoint.stdout.strip().splitlines()[-1].removeprefix("file://")) / "_metadata")
        assert not any(op["finishedSubtasks"] or op["fullyFinished"] for op in taken["operators"]), taken
        assert not read_output(str(out)), "the intermediate savepoint committed output"

        pids = job.taskmanager_pids()
        os.kill(pids[0], signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 1, 60, "the restart")
        code = job.wait(180)
    finally:
        job.kill()
    assert code == 0, job.stderr
    # It ended because its input ended: its last line must not offer the intermediate savepoint as the
    # one it stopped with (resuming from that would write everything after it a second time).
    last = job.stderr.strip().splitlines()[-1]
    assert last.endswith("FINISHED"), last
    result = json.loads((tmp_path / "chk" / "intermediate" / "job-result.json").read_text())
    assert result["stopSavepoint"] is None and result["lastSavepoint"].startswith(f"file://{tmp_path}/sp/")
    assert_same_output(
        read_output(str(out)), keyed_window_reference(count, keys=50, window_ms=1000, ms_per_record=10)
    )

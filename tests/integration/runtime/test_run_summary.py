"""A short `sluice run` ends with a summary: records read and written (exact, not a heartbeat's stale
figures), time, checkpoints and where the output went; the dashboard's URL is printed beside the REST
address."""

from __future__ import annotations

import re
from pathlib import Path

from testkit.jobs import REPO, run_job
from testkit.outputs import read_output


def test_a_bounded_run_ends_with_a_summary_of_what_it_did_and_where_the_output_went(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_job(
        REPO / "examples" / "w1_window_counts.py",
        "--arg",
        "n=200000",
        "--arg",
        f"out={out}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    rest = re.search(r"job (\S+): REST API at (http://\S+)", done.stderr)
    assert rest is not None, done.stderr
    assert f"sluice: job {rest.group(1)}: dashboard at {rest.group(2)}/" in lines
    (summary,) = [line for line in lines if line.startswith("sluice: summary: ")]
    # 200,000 numbers read; one count per key (1,000) and 1 s window of i // 10 ms (20 windows).
    assert "records read 200,000, written 20,000" in summary, summary
    assert f"output: sink: file://{out} (FileSink)" in summary
    assert re.search(r"checkpoints [1-9]\d* completed, 0 failed", summary), summary
    assert sum(read_output(f"file://{out}").values()) == 20_000
    assert lines[-1] == f"sluice: job {rest.group(1)} FINISHED" and lines[-2] == summary

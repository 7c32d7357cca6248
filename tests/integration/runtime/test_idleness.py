"""An idle input does not hold back event time: windows fire although one source has gone quiet."""

from __future__ import annotations

import time
from pathlib import Path

from testkit.checkpoints import PIPELINES
from testkit.inprocess import ThreadJob
from testkit.outputs import read_output


def _windows_after(tmp_path: Path, idleness: str, seconds: float) -> int:
    out = tmp_path / f"out-{idleness}"
    job = ThreadJob(
        PIPELINES / "idle_input.py",
        "--arg",
        f"out={out}",
        "--arg",
        f"idleness={idleness}",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "200ms",
    )
    try:
        job.wait_checkpoints(1)
        time.sleep(seconds)
        job.wait_checkpoints(job.completed_checkpoints() + 1)
        return sum(read_output(str(out)).values())
    finally:
        job.kill()


def test_idle_input_lets_windows_fire_and_a_silent_one_without_idleness_holds_them(tmp_path: Path) -> None:
    assert _windows_after(tmp_path, "300", 2.5) >= 5, "with idleness, windows of the busy source fire"
    assert _windows_after(tmp_path, "none", 2.5) == 0, "without it the silent source holds event time back"

"""bench/state.py (W4) at a small size on Sluice only, both backends: the largest key count is filled
before it is timed, checkpoints complete, and the recovery after a SIGKILL is measured. Rates are not
asserted (they are measured by the benchmark, never in tests)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from testkit.jobs import REPO

pytestmark = pytest.mark.timeout(300)


def test_w4_bench_fills_the_state_checkpoints_and_recovers() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "state.py"),
            *("--keys", "1000,20000", "--seconds", "5", "--state-backend", "heap,disk"),
            *("--no-peer", "--fill"),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
        cwd=REPO,
    )
    out = done.stdout
    assert done.returncode == 0, f"{out}\n{done.stderr[-3000:]}"
    lines = [line for line in out.splitlines() if line.startswith("keys ")]
    assert len(lines) == 2, out
    assert "keys in state 20,000 (filled in" in lines[1], out
    for line in lines:
        completed = re.search(r"checkpoints (\d+) completed / (\d+) failed", line)
        assert completed is not None and int(completed.group(1)) > 0, out
    assert re.search(r"Recovery at 20,000 keys \(disk backend\): [\d.]+ s", out), out

"""bench/kafka.py (W5) at a small size on Sluice only: the benchmark starts its broker, fills the topic,
runs both deliveries and finds every window once, with the right count and sum, in each output topic
read read_committed. Rates are not asserted (they are measured by the benchmark, never in tests)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from testkit.jobs import REPO

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


def test_w5_bench_runs_both_deliveries_and_checks_their_output() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "kafka.py"), "--events", "20000", "--engines", "eo,alo"],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, f"{out}\n{done.stderr[-3000:]}"
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| Sluice")}
    assert set(rows) == {"Sluice, exactly-once", "Sluice, at-least-once"}, out
    for line in rows.values():
        assert "every window, once, right" in line, out
    assert "2000 records (2000 windows expected)" in out, out
    assert "exactly-once costs" in out, out
    warmup = next(line for line in out.splitlines() if line.startswith("warm-up run (not counted)"))
    assert "every window, once, right" in warmup, out

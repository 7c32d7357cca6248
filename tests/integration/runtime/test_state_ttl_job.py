"""State with a TTL through a real job: value, list and map state wrapped with expiry times are
checkpointed and restored whole across a killed TaskManager, on both backends (exactly-once counts)."""

from __future__ import annotations

import collections
import json
import os
import signal
from pathlib import Path

import pytest

from sluice.state.keyed import BACKENDS
from testkit.jobs import REPO, SluiceJob
from testkit.outputs import read_output

PIPELINE = REPO / "tests" / "integration" / "pipelines" / "ttl_counts.py"


@pytest.mark.parametrize("backend", BACKENDS)
def test_ttl_state_survives_a_killed_taskmanager_exactly_once(backend: str, tmp_path: Path) -> None:
    out, count = tmp_path / "out", 30_000
    job = SluiceJob(
        PIPELINE,
        "--arg",
        f"out={out}",
        "--arg",
        f"count={count}",
        "--arg",
        "rate=8000",
        "--parallelism",
        "2",
        "--state-backend",
        backend,
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "300ms",
        "--restart-delay",
        "200ms",
    )
    try:
        job.wait_checkpoints(2)
        assert job.get("/v1/job")["subtasks"]["finished"] == 0, "the failure must hit a running job"
        os.kill(job.taskmanager_pids()[1], signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 1, 60, "the restart")
        code = job.wait(180)
    finally:
        job.kill()
    assert code == 0, job.stderr
    values: dict[int, list[int]] = collections.defaultdict(list)
    counts: dict[int, list[tuple[int, int, int]]] = collections.defaultdict(list)
    for line, times in read_output(str(out)).items():
        key, value, running, listed, mapped = json.loads(line)
        values[key].extend([value] * times)
        counts[key].extend([(running, listed, mapped)] * times)
    for key in range(20):
        mine = [i for i in range(count) if i % 20 == key]
        assert sorted(values[key]) == mine, f"key {key}: records lost or doubled"
        assert sorted(counts[key]) == [(n, n, n) for n in range(1, len(mine) + 1)], f"key {key}: state lost"

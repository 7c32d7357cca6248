"""Broadcast state, interval and window joins through the real CLI, a TaskManager SIGKILLed mid-run:
the output equals plain Python's, every line once (tests/integration/pipelines/two_inputs.py)."""

from __future__ import annotations

import collections
import json
import os
import signal
from pathlib import Path

import pytest

from testkit.jobs import REPO, SluiceJob
from testkit.outputs import assert_same_output, read_output

PIPELINE = REPO / "tests" / "integration" / "pipelines" / "two_inputs.py"
KEYS = 12


def _windows(ts: int, size: int = 60, slide: int = 20) -> set[int]:
    last = ts - ts % slide
    return set(range(last, ts - size, -slide))


def expected(kind: str, count: int) -> collections.Counter[str]:
    out: collections.Counter[str] = collections.Counter()
    if kind == "broadcast":
        out.update(json.dumps([i, (i % KEYS) * 10]) for i in range(count))
        return out
    lefts = collections.defaultdict(list)
    for i in range(count):
        lefts[i % KEYS].append(i)
    for j in range(count):
        rt = 3 * j + 1
        for i in lefts[j % KEYS]:
            lt = 2 * i
            if kind == "interval":
                if lt - 7 <= rt <= lt + 4:
                    out[json.dumps([i, j])] += 1
            else:
                shared = len(_windows(lt) & _windows(rt))
                if shared:
                    out[json.dumps([i, j])] += shared
    return out


# The window join's windows on disk: its heap layout is the session windows' (test_session_windows).
@pytest.mark.parametrize(
    ("kind", "backend"), [("broadcast", "heap"), ("interval", "disk"), ("window", "disk")]
)
def test_a_two_input_operator_is_exactly_once_across_a_killed_taskmanager(
    kind: str, backend: str, tmp_path: Path
) -> None:
    out, count, local = tmp_path / "out", 12_000, tmp_path / "local-state"
    job = SluiceJob(
        PIPELINE,
        "--arg", f"out={out}",
        "--arg", f"kind={kind}",
        "--arg", f"count={count}",
        "--arg", "rate=2500",
        "--parallelism", "2",
        "--state-backend", backend,
        "--checkpoint-dir", f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval", "300ms",
        "--restart-delay", "200ms",
        env={"SLUICE_STATE_DIR": str(local)},
    )  # fmt: skip
    try:
        job.wait_checkpoints(3)
        assert job.get("/v1/job")["state"] == "RUNNING", "the kill must hit a running job"
        if kind == "window":
            stores = list(local.glob("sluice-state-*-join-*-windows-*"))
            assert len(stores) == 2, "each subtask's windows of the join are in its store on disk"
        os.kill(job.taskmanager_pids()[1], signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 1, 60, "the restart")
        code = job.wait(180)
    finally:
        job.kill()
    assert code == 0, job.stderr
    assert_same_output(read_output(str(out)), expected(kind, count))

"""Side outputs and dead letters end to end (tests/integration/pipelines/side_outputs.py): every output
against plain Python, on a clean run and across a TaskManager killed mid-run (exactly once)."""

from __future__ import annotations

import collections
import json
import os
import signal
import urllib.request
from pathlib import Path

from testkit.inprocess import run_thread_job
from testkit.jobs import REPO, SluiceJob
from testkit.outputs import assert_same_output, hidden_files, read_output

PIPELINE = REPO / "tests" / "integration" / "pipelines" / "side_outputs.py"
KEYS = 20


def expected_side_outputs(count: int) -> dict[str, collections.Counter[str]]:
    good = [i for i in range(count) if i % 7 != 3]
    big_counts: collections.Counter[tuple[int, int]] = collections.Counter(
        (i % KEYS, (i * 10) // 1000) for i in good if i >= 1000
    )
    return {
        "dead": collections.Counter(
            json.dumps([i, f"ValueError: record {i} is malformed", "parse"])
            for i in range(count)
            if i % 7 == 3
        ),
        "big": collections.Counter(json.dumps([i % KEYS, i]) for i in good if i >= 1000),
        "big-counts": collections.Counter(json.dumps([k, n]) for (k, _), n in big_counts.items()),
    }


def assert_main_output_exact(out: Path, count: int) -> None:
    """Each key's records exactly once, its running count 1..n exactly once (the order of one key's
    records across the two source splits is not fixed, so which record got which count is not)."""
    values: dict[int, list[int]] = collections.defaultdict(list)
    counts: dict[int, list[int]] = collections.defaultdict(list)
    for line, times in read_output(str(out / "main")).items():
        key, value, running = json.loads(line)
        values[key].extend([value] * times)
        counts[key].extend([running] * times)
    for key in range(KEYS):
        mine = [i for i in range(count) if i % 7 != 3 and i % KEYS == key]
        assert sorted(values[key]) == mine, f"key {key}: records lost or doubled"
        assert sorted(counts[key]) == list(range(1, len(mine) + 1)), f"key {key}: state lost or doubled"


def assert_all_outputs(out: Path, count: int) -> None:
    assert_main_output_exact(out, count)
    for name, expected in expected_side_outputs(count).items():
        assert_same_output(read_output(str(out / name)), expected)
        assert hidden_files(str(out / name)) == [], f"{name}: a finished job leaves no in-progress file"


def test_dead_letters_and_side_outputs_match_plain_python(tmp_path: Path) -> None:
    out, count = tmp_path / "out", 8000
    done = run_thread_job(
        PIPELINE,
        "--arg",
        f"out={out}",
        "--arg",
        f"count={count}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "300ms",
    )
    assert done.returncode == 0, done.stderr
    assert "FINISHED" in done.stderr
    assert_all_outputs(out, count)


def test_side_output_sinks_are_exactly_once_across_a_killed_taskmanager(tmp_path: Path) -> None:
    out, count = tmp_path / "out", 40_000
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
        dead_before = sum(read_output(str(out / "dead")).values())
        # The counts reach REST and /metrics while the job runs (heartbeats carry them).
        job.wait_until(lambda: job.get("/v1/job")["metrics"]["deadLetters"] > 0, 30, "dead letters counted")
        request = urllib.request.Request(
            job.rest_url() + "/metrics", headers={"Authorization": f"Bearer {job.token()}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            exported = response.read().decode()
        parse_vertex = [
            line for line in exported.splitlines() if line.startswith("sluice_subtask_dead_letters_total{")
        ]
        assert any(float(line.rsplit(" ", 1)[1]) > 0 for line in parse_vertex), exported
        os.kill(job.taskmanager_pids()[1], signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 1, 60, "the restart")
        code = job.wait(180)
    finally:
        job.kill()
    assert code == 0, job.stderr
    assert dead_before > 0, "dead letters were committed before the failure"
    assert_all_outputs(out, count)

"""Broadcast state, a keyed co-process, interval and window joins with a TaskManager SIGKILLed mid-run:
the output equals plain Python's, every line once (tests/integration/pipelines/two_inputs.py).

Every join and the broadcast case run through the real CLI (processes host; examples/enrichment.py's
test kills a keyed co-process there). Every operator runs on the Spark host too, where the TaskManager
is the Python worker Spark forked for its barrier task. The broadcast and co-process cases have a
bounded input (rules, dimension) that has finished before the kill: recovery must keep the state it
built without running its source again, which the restored checkpoint's metadata and the co-process's
one marker per dimension record show. The joins' state is on disk on one host and on the heap on the
other, read back by the restarted tasks.
"""

from __future__ import annotations

import collections
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sluice.checkpoint.state_key import load_state_key
from sluice.checkpoint.storage import read_metadata
from testkit.jobs import REPO, RestJob, SluiceJob
from testkit.outputs import assert_same_output, read_output
from testkit.spark import SparkJob

PIPELINE = REPO / "tests" / "integration" / "pipelines" / "two_inputs.py"
KEYS = 12


def _windows(ts: int, size: int = 60, slide: int = 20) -> set[int]:
    last = ts - ts % slide
    return set(range(last, ts - size, -slide))


def expected(kind: str, count: int) -> collections.Counter[str]:
    out: collections.Counter[str] = collections.Counter()
    if kind in ("broadcast", "coprocess"):
        out.update(json.dumps([i, (i % KEYS) * 10]) for i in range(count))
        if kind == "coprocess":
            out.update(json.dumps(["dimension", k]) for k in range(KEYS))
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


def _options(
    out: Path, kind: str, count: int, backend: str, tmp_path: Path, rate: int = 2500
) -> tuple[str, ...]:
    return (
        "--arg", f"out={out}",
        "--arg", f"kind={kind}",
        "--arg", f"count={count}",
        "--arg", f"rate={rate}",
        "--parallelism", "2",
        "--state-backend", backend,
        "--checkpoint-dir", f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval", "300ms",
        "--checkpoints-retained", "1000",  # the restored one stays, for the test to read
        "--restart-delay", "200ms",
    )  # fmt: skip


def _kill_one_taskmanager(
    job: RestJob,
    check_victim: Callable[[int], None] = lambda pid: None,
    check_running: Callable[[], None] = lambda: None,
) -> tuple[int, str]:
    """Waits for checkpoints of the running job, SIGKILLs its second TaskManager (once `check_victim`
    has looked at its pid, and `check_running` at the running job); the job's exit code and the
    checkpoint its next attempt restored."""
    try:
        job.wait_checkpoints(3)
        assert job.get("/v1/job")["state"] == "RUNNING", "the kill must hit a running job"
        check_running()
        victim = job.taskmanager_pids()[1]
        check_victim(victim)
        os.kill(victim, signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restoredFrom"] is not None, 60, "the restore")
        restored = job.get("/v1/job")["restoredFrom"]
        return job.wait(180), restored["path"]
    finally:
        job.kill()


# The bounded input of each kind that has one: its source and map, and the two-input operator.
BOUNDED_INPUT = {
    "broadcast": ("rules", "rule", "apply"),
    "coprocess": ("dimension", "dimension-rows", "enrich"),
}


def _assert_bounded_input_finished_in(checkpoint: str, kind: str) -> None:
    """The restored checkpoint has the bounded input finished: recovery kept the state built from it,
    and did not run its source again (FLIP-147)."""
    if kind not in BOUNDED_INPUT:
        return
    source, rows, operator = BOUNDED_INPUT[kind]
    entries = {op.uid: op for op in read_metadata(checkpoint, load_state_key()).operators}
    assert entries[source].fully_finished and entries[rows].fully_finished
    assert entries[operator].finished_inputs == (1,), "the operator records its second input as finished"


# The window join's windows on disk: its heap layout is the session windows' (test_session_windows).
@pytest.mark.parametrize(
    ("kind", "backend"), [("broadcast", "heap"), ("interval", "disk"), ("window", "disk")]
)
def test_a_two_input_operator_is_exactly_once_across_a_killed_taskmanager(
    kind: str, backend: str, tmp_path: Path
) -> None:
    out, count, local = tmp_path / "out", 12_000, tmp_path / "local-state"
    job = SluiceJob(
        PIPELINE, *_options(out, kind, count, backend, tmp_path), env={"SLUICE_STATE_DIR": str(local)}
    )

    def windows_on_disk() -> None:
        if kind == "window":
            stores = list(local.glob("sluice-state-*-join-*-windows-*"))
            assert len(stores) == 2, "each subtask's windows of the join are in its store on disk"

    code, restored = _kill_one_taskmanager(job, check_running=windows_on_disk)
    assert code == 0, job.stderr
    _assert_bounded_input_finished_in(restored, kind)
    assert_same_output(read_output(str(out)), expected(kind, count))


def _a_spark_python_worker(pid: int) -> None:
    """The TaskManager runs in a Python worker that Spark forked for its barrier task."""
    command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"sluice_spark_daemon" in command and b"pyspark.worker" in command, command


# The window join emits each pair once per window the two share, about five lines per left record:
# half the records, at a lower rate so that the sources still run as long, keep its run near the others'.
@pytest.mark.spark
@pytest.mark.parametrize(
    ("kind", "backend", "count", "rate"),
    [
        ("broadcast", "heap", 12_000, 2500),
        ("coprocess", "disk", 12_000, 2500),
        ("interval", "disk", 12_000, 2500),
        ("window", "heap", 6_000, 1500),
    ],
    ids=["broadcast-heap", "coprocess-disk", "interval-disk", "window-heap"],
)
def test_a_two_input_operator_is_exactly_once_across_a_killed_spark_taskmanager(
    kind: str, backend: str, count: int, rate: int, spark_context: Any, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    options = _options(out, kind, count, backend, tmp_path, rate)
    job = SparkJob(PIPELINE, *options, spark_context=spark_context)
    code, restored = _kill_one_taskmanager(job, _a_spark_python_worker)
    assert code == 0, job.stderr
    _assert_bounded_input_finished_in(restored, kind)
    assert_same_output(read_output(str(out)), expected(kind, count))

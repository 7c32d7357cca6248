"""Session windows end to end (tests/integration/pipelines/sessions.py) against plain Python: a clean
run of each window function, a TaskManager killed mid-run, stop without drain then resume, and a
restore at parallelism 3 of a checkpoint taken at 2 — exactly once, on both state backends (and from
one to the other)."""

from __future__ import annotations

import collections
import json
import os
import signal
from pathlib import Path

import pytest

from sluice.state.keyed import BACKENDS
from testkit.checkpoints import operator
from testkit.inprocess import ThreadJob, run_thread_job
from testkit.jobs import REPO, SluiceJob, run_cli
from testkit.outputs import assert_same_output, read_output

PIPELINE = REPO / "tests" / "integration" / "pipelines" / "sessions.py"
KEYS, GAP = 20, 500


def timestamp(i: int) -> int:
    """As the pipeline stamps record i."""
    return i * 10 + (i // 1000) * 2000


def reference(count: int, kind: str) -> collections.Counter[str]:
    """Sessions computed directly from every record's key and timestamp (not from the blocks)."""
    by_key: dict[int, list[int]] = collections.defaultdict(list)
    for i in range(count):
        by_key[i % KEYS].append(i)
    lines: collections.Counter[str] = collections.Counter()
    for key, items in by_key.items():
        items.sort(key=timestamp)
        session: list[int] = []
        for i in items:
            if session and timestamp(i) > timestamp(session[-1]) + GAP:
                lines[_line(key, session, kind)] += 1
                session = []
            session.append(i)
        lines[_line(key, session, kind)] += 1
    return lines


def _line(key: int, session: list[int], kind: str) -> str:
    fields = [key, len(session), sum(session)]
    if kind == "process":
        fields += [timestamp(session[0]), timestamp(session[-1]) + GAP]
    return json.dumps(fields)


def options(out: Path, chk: Path, count: int, *extra: str) -> tuple[str, ...]:
    return (
        "--arg",
        f"out={out}",
        "--arg",
        f"count={count}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{chk}",
        "--checkpoint-interval",
        "300ms",
        *extra,
    )


@pytest.mark.parametrize("kind", ["reduce", "aggregate", "process"])
def test_sessions_match_plain_python(kind: str, tmp_path: Path) -> None:
    out, count = tmp_path / "out", 12_000
    done = run_thread_job(PIPELINE, *options(out, tmp_path / "chk", count, "--arg", f"kind={kind}"))
    assert done.returncode == 0, done.stderr
    assert_same_output(read_output(str(out)), reference(count, kind))


@pytest.mark.parametrize("backend", BACKENDS)
def test_sessions_exactly_once_across_a_killed_taskmanager(backend: str, tmp_path: Path) -> None:
    out, count = tmp_path / "out", 40_000
    local = tmp_path / "local-state"
    job = SluiceJob(
        PIPELINE,
        *options(out, tmp_path / "chk", count, "--arg", "rate=10000", "--arg", "kind=process"),
        "--arg",
        "lateness=1000",
        "--state-backend",
        backend,
        "--restart-delay",
        "200ms",
        env={"SLUICE_STATE_DIR": str(local)},
    )
    try:
        job.wait_checkpoints(2)
        assert job.get("/v1/job")["subtasks"]["finished"] == 0, "the failure must hit a running job"
        stores = sorted(p.name for p in local.glob("sluice-state-*-sessions-*-windows-*"))
        # On disk the sessions' contents are in each subtask's store; on the heap there is none.
        assert len(stores) == (2 if backend == "disk" else 0), stores
        before = sum(read_output(str(out)).values())
        os.kill(job.taskmanager_pids()[1], signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 1, 60, "the restart")
        code = job.wait(180)
    finally:
        job.kill()
    assert code == 0, job.stderr
    assert before > 0, "sessions were committed before the failure"
    assert_same_output(read_output(str(out)), reference(count, "process"))


@pytest.mark.parametrize(("suspended", "resumed"), [("heap", "heap"), ("disk", "disk"), ("disk", "heap")])
def test_sessions_stop_without_drain_then_resume_at_parallelism_3(
    suspended: str, resumed: str, tmp_path: Path
) -> None:
    """Also with the sessions on disk, and resumed on the other backend (a user may switch)."""
    out, sp, count = tmp_path / "out", tmp_path / "sp", 40_000
    common = options(out, tmp_path / "chk", count, "--arg", "rate=10000", "--arg", "kind=aggregate")
    # Its input lasts 10 s, so that the stop (`sluice stop`, a process of its own) comes well before its end.
    job = ThreadJob(
        PIPELINE,
        *common,
        "--arg",
        "rate=4000",
        "--savepoint-dir-allow",
        f"file://{sp}",
        "--state-backend",
        suspended,
    )
    try:
        job.wait_checkpoints(2)
        stop = run_cli("stop", "--address", job.rest_url(), "--savepoint-dir", f"file://{sp}")
        assert stop.returncode == 0, stop.stderr + job.stderr
        assert job.wait(60) == 0, job.stderr
    finally:
        job.kill()
    path = stop.stdout.strip().splitlines()[-1]
    metadata = json.loads((Path(path.removeprefix("file://")) / "_metadata").read_text())
    assert operator(metadata, "sessions")["subtasks"], "open sessions were kept in the savepoint"
    expected = reference(count, "aggregate")
    before_resume = read_output(str(out))
    assert not before_resume - expected, "the suspend emitted no partial session"
    assert sum(before_resume.values()) < sum(expected.values())
    again = run_thread_job(
        PIPELINE, *common, "--parallelism", "3", "--from-savepoint", path, "--state-backend", resumed
    )
    assert again.returncode == 0, again.stderr
    assert_same_output(read_output(str(out)), expected)

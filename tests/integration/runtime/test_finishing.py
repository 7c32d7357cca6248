"""FLIP-147 through REST and the CLI: final checkpoints, checkpoints with finished tasks, recovery.

Engine semantics run in the test process (`ThreadJob`, TaskManagers on threads); a TaskManager killed
by SIGKILL and what `sluice run` itself decides (refusing a restore, not running an ended job again)
go through a real `sluice run`.
"""

from __future__ import annotations

import collections
import json
import os
import signal
from pathlib import Path

from testkit.checkpoints import PIPELINES, load, metadata_files, operator
from testkit.inprocess import ThreadJob, run_thread_job
from testkit.jobs import REPO, SluiceJob, run_job
from testkit.outputs import assert_same_output, hidden_files, read_output, w1_reference

W1 = REPO / "examples" / "w1_window_counts.py"


def test_bounded_job_with_hour_interval_ends_with_one_final_checkpoint(tmp_path: Path) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    done = run_thread_job(
        W1,
        "--arg",
        "n=50000",
        "--arg",
        f"out={out}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{chk}",
        "--checkpoint-interval",
        "1h",
        "--job-id",
        "hour",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # Nothing waited for the hourly interval: the only checkpoint is the one taken at end of data.
    checkpoints = metadata_files(chk)
    assert [p.parent.name for p in checkpoints] == ["chk-1"]
    final = load(checkpoints[0])
    assert all(op["fullyFinished"] and not op["subtasks"] for op in final["operators"])
    assert_same_output(read_output(str(out)), w1_reference(50_000))
    assert hidden_files(str(out)) == []
    result = json.loads((chk / "hour" / "job-result.json").read_text())
    assert result["state"] == "FINISHED" and result["lastCheckpoint"].endswith("chk-1")


def test_checkpoints_complete_while_one_source_subtask_has_finished(tmp_path: Path) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    job = ThreadJob(
        PIPELINES / "uneven.py",
        "--arg",
        f"out={out}",
        "--arg",
        "short=200",
        "--arg",
        "long=16000",
        "--arg",
        "rate=4000",
        "--checkpoint-dir",
        f"file://{chk}",
        "--checkpoint-interval",
        "200ms",
        "--checkpoints-retained",
        "100",
        "--parallelism",
        "2",
    )
    try:
        job.wait_until(
            lambda: any(
                s["state"] == "FINISHED" for v in job.get("/v1/job")["vertices"] for s in v["subtasks"]
            ),
            60,
            "the short split's subtask to finish",
        )
        seen = job.completed_checkpoints()
        job.wait_checkpoints(seen + 3)
        assert job.wait(120) == 0, job.stderr
    finally:
        job.kill()
    partial = [
        m
        for m in map(load, metadata_files(chk))
        if operator(m, "uneven")["finishedSubtasks"] == [0] and not operator(m, "uneven")["fullyFinished"]
    ]
    assert len(partial) >= 3, "checkpoints kept completing with subtask 0 of the source finished"
    source = operator(partial[-1], "uneven")
    assert [h["index"] for h in source["subtasks"]] == [1], "only the running subtask's state is kept"
    assert operator(partial[-1], "ts")["finishedSubtasks"] == [0], "chained operators finish with their task"
    counts: collections.Counter[int] = collections.Counter()
    for line, times in read_output(str(out)).items():
        split, n = json.loads(line)
        counts[split] += n * times
    assert counts == {0: 200, 1: 16000}


def test_finished_source_is_not_run_again_after_a_failure(tmp_path: Path) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    job = SluiceJob(
        PIPELINES / "two_sources.py",
        "--arg",
        f"out={out}",
        "--arg",
        "short=1000",
        "--arg",
        "count=60000",
        "--arg",
        "rate=10000",
        "--checkpoint-dir",
        f"file://{chk}",
        "--checkpoint-interval",
        "200ms",
        "--parallelism",
        "2",
        "--taskmanagers",
        "2",
        "--restart-delay",
        "100ms",
        "--checkpoints-retained",
        "50",
    )
    try:

        def short_fully_finished() -> bool:
            return any(operator(load(m), "short")["fullyFinished"] for m in metadata_files(chk))

        job.wait_until(short_fully_finished, 60, "a checkpoint with the short source fully finished")
        os.kill(job.taskmanager_pids()[0], signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 1, 60, "the restart")
        assert job.wait(180) == 0, job.stderr
    finally:
        job.kill()
    short = read_output(str(out / "short"))
    assert_same_output(short, collections.Counter(json.dumps(["short", i]) for i in range(1000)))
    long = read_output(str(out / "long"))
    assert_same_output(long, collections.Counter(json.dumps(["long", i]) for i in range(60000)))


def test_restore_refused_when_a_running_operator_feeds_a_finished_one(tmp_path: Path) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    job = ThreadJob(
        PIPELINES / "two_sources.py",
        "--arg",
        f"out={out}",
        "--arg",
        "count=1000000",
        "--arg",
        "rate=5000",
        "--checkpoint-dir",
        f"file://{chk}",
        "--checkpoint-interval",
        "200ms",
        "--checkpoints-retained",
        "50",
    )
    try:
        job.wait_until(
            lambda: [m for m in metadata_files(chk) if operator(load(m), "short-sink")["fullyFinished"]],
            60,
            "a checkpoint with the short branch fully finished",
        )
    finally:
        job.kill()
    checkpoint = next(m for m in metadata_files(chk) if operator(load(m), "short-sink")["fullyFinished"])
    refused = run_job(
        PIPELINES / "two_sources.py",
        "--arg",
        f"out={out}",
        "--arg",
        "variant=b",
        "--checkpoint-dir",
        f"file://{chk}",
        "--from-savepoint",
        f"file://{checkpoint.parent}",
    )
    assert refused.returncode == 2, refused.stderr
    assert "'extra'" in refused.stderr and "'short-sink'" in refused.stderr
    assert "fully finished" in refused.stderr


def _declined_with_a_finished_subtask(tmp_path: Path, *extra: str) -> list[str]:
    """Runs uneven.py (subtask 0 of the source finishes early) until a checkpoint is declined."""
    job = ThreadJob(
        PIPELINES / "uneven.py", "--arg", f"out={tmp_path / 'out'}",
        "--arg", "short=100", "--arg", "long=8000", "--arg", "rate=4000",
        "--checkpoint-dir", f"file://{tmp_path / 'chk'}", "--checkpoint-interval", "200ms",
        "--parallelism", "2", *extra,
    )  # fmt: skip
    try:

        def declined() -> list[str]:
            history = job.get("/v1/checkpoints")["history"]
            return [h["error"] for h in history if h["status"] == "FAILED"]

        errors: list[str] = job.wait_until(declined, 60, "a declined checkpoint")
        return errors
    finally:
        job.kill()


def test_union_list_state_partially_finished_declines_the_checkpoint(tmp_path: Path) -> None:
    errors = _declined_with_a_finished_subtask(tmp_path, "--arg", "union_state=1")
    assert "'union-counter'" in errors[0] and "union list state" in errors[0]


def test_feature_flag_off_declines_checkpoints_once_a_task_finished(tmp_path: Path) -> None:
    errors = _declined_with_a_finished_subtask(tmp_path, "--no-checkpoints-after-tasks-finish")
    assert "checkpoints-after-tasks-finish is off" in errors[0]


def test_stored_job_result_prevents_a_second_run(tmp_path: Path) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    options = (
        "--arg",
        "n=20000",
        "--arg",
        f"out={out}",
        "--checkpoint-dir",
        f"file://{chk}",
        "--job-id",
        "once",
    )
    first = run_thread_job(W1, *options)
    assert first.returncode == 0, first.stderr
    files = sorted(p.name for p in out.iterdir())
    second = run_job(W1, *options)  # `sluice run` itself finds the stored result
    assert second.returncode == 0, second.stderr
    assert "FINISHED" in second.stderr
    assert sorted(p.name for p in out.iterdir()) == files, "the job did not run again"
    assert_same_output(read_output(str(out)), w1_reference(20_000))

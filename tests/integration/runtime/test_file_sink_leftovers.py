"""FileSink leaves no hidden file behind after a failure, and never touches another job's.

A TaskManager killed mid-run leaves the hidden in-progress files of its attempt (its own and those the
surviving TaskManager had open or pre-committed). Once the restored job's first checkpoint completes,
each sink subtask removes what earlier attempts of its job left.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from sluice.connectors import FileSink
from sluice.connectors.base import TransactionContext
from testkit.checkpoints import GENERATED_COUNTS, generated_counts_options
from testkit.jobs import SluiceJob
from testkit.outputs import assert_same_output, keyed_window_reference, read_output


def test_a_killed_taskmanager_leaves_no_hidden_file_once_the_job_ends(tmp_path: Path) -> None:
    out, count = tmp_path / "out", 64_000
    job = SluiceJob(
        GENERATED_COUNTS,
        *generated_counts_options(out, tmp_path / "chk", count, "leftovers"),
        "--restart-delay",
        "100ms",
    )
    try:
        job.wait_checkpoints(2)
        job.wait_until(lambda: list(out.glob(".*.inprogress")), 30, "open files")
        os.kill(job.taskmanager_pids()[0], signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 1, 60, "the restart")
        code = job.wait(180)
    finally:
        job.kill()
    assert code == 0, job.stderr
    assert [p.name for p in out.glob(".*")] == []
    assert_same_output(read_output(f"file://{out}"), keyed_window_reference(count, 50, 1000, 10))


def test_clean_up_removes_only_this_jobs_earlier_attempts(tmp_path: Path) -> None:
    sink = FileSink(str(tmp_path))

    def hidden(job: str, subtask: int, token: str) -> str:
        txn = sink.begin(TransactionContext(job, "sink", subtask, 0, token))
        txn.handle.close()
        return Path(txn.hidden.removeprefix("file://")).name

    old_0, old_1, old_gone = hidden("a", 0, "old"), hidden("a", 1, "old"), hidden("a", 5, "old")
    current, other_job = hidden("a", 0, "new"), hidden("b", 0, "old")
    sink.clean_up(TransactionContext("a", "sink", 0, 1, "new"), parallelism=2)
    left = {p.name for p in tmp_path.iterdir()}
    assert old_0 not in left and old_gone not in left, "subtask 0 removes its own and a removed subtask's"
    assert {old_1, current, other_job} <= left, "another subtask's, the current attempt's, another job's stay"

"""A TaskManager that stops answering (SIGSTOP: alive, connected, silent) is detected and replaced.

Its TCP connections stay open, so nothing but the coordinator's heartbeat timeout can notice it. The
attempt must fail within the timeout, the job restart from its latest checkpoint, and the output still
hold every row exactly once. The checkpoint-timeout and busy-TaskManager cases need no process of
their own: they run in the test process (`ThreadJob`).
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
from pathlib import Path

from testkit.checkpoints import GENERATED_COUNTS, PIPELINES, generated_counts_options
from testkit.inprocess import ThreadJob
from testkit.jobs import SluiceJob
from testkit.outputs import assert_same_output, keyed_window_reference, read_output


def test_a_stopped_taskmanager_fails_the_attempt_after_the_heartbeat_timeout(tmp_path: Path) -> None:
    out, count = tmp_path / "out", 64_000
    job = SluiceJob(
        GENERATED_COUNTS,
        *generated_counts_options(out, tmp_path / "chk", count, "stopped-tm"),
        *("--heartbeat-timeout", "2s", "--restart-delay", "100ms"),
    )
    stopped: int | None = None
    try:
        job.wait_checkpoints(1)
        stopped = job.taskmanager_pids()[0]
        os.kill(stopped, signal.SIGSTOP)
        view = job.wait_until(lambda: (v := job.get("/v1/job"))["restarts"] >= 1 and v, 30, "a restart")
        assert "sent nothing for" in view["error"] and "heartbeat timeout 2s" in view["error"], view
        assert stopped not in job.taskmanager_pids()
        code = job.wait(180)
    finally:
        if stopped is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGKILL)
        job.kill()
    assert code == 0, job.stderr
    assert_same_output(read_output(f"file://{out}"), keyed_window_reference(count, 50, 1000, 10))


NEVER_CHECKPOINTED = PIPELINES / "never_checkpointed.py"


def test_checkpoints_that_keep_timing_out_fail_the_job_over_unless_tolerated(tmp_path: Path) -> None:
    options = ("--parallelism", "2", "--checkpoint-interval", "200ms", "--checkpoint-timeout", "100ms")
    strict = ThreadJob(
        NEVER_CHECKPOINTED,
        *("--arg", f"out={tmp_path / 'strict'}", "--checkpoint-dir", f"file://{tmp_path / 'chk1'}"),
        *options,
        *("--tolerable-checkpoint-failures", "2", "--restart-delay", "100ms"),
    )
    try:
        view = strict.wait_until(
            lambda: (v := strict.get("/v1/job"))["restarts"] >= 1 and v, 60, "a failover"
        )
        assert "3 checkpoint(s) failed in a row, 2 tolerated" in view["error"], view
        assert "timed out" in view["error"]
    finally:
        strict.kill()
    lenient = ThreadJob(
        NEVER_CHECKPOINTED,
        *("--arg", f"out={tmp_path / 'lenient'}", "--checkpoint-dir", f"file://{tmp_path / 'chk2'}"),
        *options,
        *("--tolerable-checkpoint-failures", "unlimited"),
    )
    try:
        lenient.wait_until(
            lambda: lenient.get("/v1/checkpoints")["counts"]["failed"] >= 6, 60, "six failed checkpoints"
        )
        assert lenient.get("/v1/job")["restarts"] == 0
    finally:
        lenient.kill()


STALLING_MAP = PIPELINES / "stalling_map.py"


def test_a_taskmanager_busy_longer_than_the_heartbeat_timeout_is_not_lost(tmp_path: Path) -> None:
    """The heartbeat says the process is alive and reachable, not that its event loop is free: a user
    function or a sink call that blocks the loop for longer than the timeout (slow storage) must not
    fail the attempt. Stuck tasks are the checkpoint timeout's business, as in Flink."""
    out, count = tmp_path / "out", 20_000
    job = ThreadJob(
        STALLING_MAP,
        *("--arg", f"n={count}", "--arg", "stall=4", "--arg", f"out={out}"),
        *("--checkpoint-dir", f"file://{tmp_path / 'chk'}", "--checkpoint-interval", "500ms"),
        *("--checkpoint-timeout", "30s", "--heartbeat-timeout", "1s", "--restart-delay", "100ms"),
    )
    try:
        code = job.wait(120)
    finally:
        job.kill()
    assert code == 0, job.stderr
    # A restart is logged as "attempt N failed: <why>; restarting in ..."
    assert "failed:" not in job.stderr, job.stderr
    assert read_output(f"file://{out}") == collections.Counter(str(i) for i in range(count))

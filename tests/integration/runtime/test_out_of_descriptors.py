"""The coordinator runs out of file descriptors while checkpoints are being written (issue 23, finding 4).

Issue 23 got there with 500 slowloris connections on a 512-descriptor limit; the REST and handshake
bounds now keep floods from doing that, so this test takes the descriptors away directly: it lowers the
running coordinator's limit (prlimit(2), as `prlimit --nofile` would) below the descriptors it has open.
The next `_metadata` write fails with EMFILE. That checkpoint must fail with a message, the coordinator
must keep running, and once descriptors are back, checkpoints complete again and the job ends with
every row exactly once. With no checkpoint failure tolerated, the failed checkpoint fails the attempt
over, and the restart strategy takes the job through.

On the main of the issue the coordinator died when a restart could not start TaskManagers for want of a
descriptor (`os.pipe`: EMFILE). Between a failed attempt and the next, the old attempt's descriptors are
freed, so a limit alone does not get there without a flood refilling them; the last test injects that
one fault into the process host instead.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from testkit import jobs
from testkit.checkpoints import GENERATED_COUNTS, generated_counts_options
from testkit.jobs import SluiceJob
from testkit.outputs import assert_same_output, keyed_window_reference, read_output

NO_NEW_DESCRIPTORS = 3
"""A soft limit under every descriptor but stdin, stdout and stderr: the ones open stay usable, and no
new one can be made (the kernel hands out the lowest free number, and every number from 3 is over it)."""


@pytest.mark.parametrize("tolerated", ["unlimited", "0"])
def test_running_out_of_descriptors_fails_checkpoints_not_the_coordinator(
    tmp_path: Path, tolerated: str
) -> None:
    out, count = tmp_path / "out", 64_000
    job = SluiceJob(
        GENERATED_COUNTS,
        *generated_counts_options(
            out, tmp_path / "chk", count, f"out-of-descriptors-{tolerated}", interval="200ms"
        ),
        *("--tolerable-checkpoint-failures", tolerated, "--restart-delay", "500ms", "--max-restarts", "20"),
    )
    pid = job.process.pid
    try:
        job.wait_checkpoints(2)
        url = job.rest_url()  # read before the limit: a REST call needs a descriptor too
        token = job.token()
        assert url and token
        limit = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        failed_before = int(job.get("/v1/checkpoints")["counts"]["failed"])
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (NO_NEW_DESCRIPTORS, limit[1]))
        try:
            time.sleep(2.0)  # ten checkpoint intervals without a descriptor to spare
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, limit)
        assert job.ended() is None, f"the coordinator died:\n{job.stderr}"
        checkpoints = job.get("/v1/checkpoints")
        assert int(checkpoints["counts"]["failed"]) > failed_before, checkpoints["counts"]
        errors = [c.get("error") or "" for c in checkpoints["history"] if c["status"] == "FAILED"]
        assert any("Too many open files" in e for e in errors), errors
        view = job.wait_until(lambda: (v := job.get("/v1/job"))["state"] == "RUNNING" and v, 60, "running")
        assert (view["restarts"] == 0) == (tolerated == "unlimited"), view
        job.wait_checkpoints(job.completed_checkpoints() + 2)
        code = job.wait(180)
    finally:
        job.kill()
    assert code == 0, job.stderr
    assert "Traceback" not in job.stderr, job.stderr
    assert_same_output(read_output(f"file://{out}"), keyed_window_reference(count, 50, 1000, 10))


_FAILING_RESTART = textwrap.dedent(
    """
    import errno, sys
    from sluice.hosts import processes
    from sluice.cli import main

    _start = processes.ProcessHost.start

    async def start(self, count, launch, attempt):
        if attempt == 1:  # the first restart, as when a flood holds every descriptor
            raise OSError(errno.EMFILE, "Too many open files")
        await _start(self, count, launch, attempt)

    processes.ProcessHost.start = start
    main(sys.argv[1:])
    """
)


def test_a_restart_that_cannot_start_taskmanagers_fails_its_attempt_not_the_coordinator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs, "SLUICE", [sys.executable, "-c", _FAILING_RESTART])
    out, count = tmp_path / "out", 64_000
    job = jobs.SluiceJob(
        GENERATED_COUNTS,
        *generated_counts_options(out, tmp_path / "chk", count, "restart-without-descriptors"),
        *("--restart-delay", "200ms"),
    )
    try:
        job.wait_checkpoints(1)
        os.kill(job.taskmanager_pids()[0], signal.SIGKILL)
        view = job.wait_until(
            lambda: (v := job.get("/v1/job"))["restarts"] >= 2 and v["state"] == "RUNNING" and v,
            60,
            "restarts",
        )
        code = job.wait(180)
    finally:
        job.kill()
    assert code == 0, job.stderr
    assert f"starting TaskManagers failed: OSError: [Errno {errno.EMFILE}] Too many open files" in job.stderr
    assert view["restarts"] == 2, view
    assert_same_output(read_output(f"file://{out}"), keyed_window_reference(count, 50, 1000, 10))

"""Ctrl-C in a terminal signals the whole process group: `sluice run` and its TaskManager processes.
The job is canceled by the coordinator, quietly: no KeyboardInterrupt or CancelledError tracebacks from
the TaskManagers, and the last line says CANCELED with its cause."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from testkit.jobs import REPO, SLUICE


def test_ctrl_c_to_the_process_group_cancels_the_job_without_tracebacks(tmp_path: Path) -> None:
    job = subprocess.Popen(
        [*SLUICE, "run", str(REPO / "examples" / "unbounded_counts.py"), "--arg", f"out={tmp_path / 'out'}",
         "--parallelism", "2", "--checkpoint-dir", f"file://{tmp_path / 'chk'}", "--checkpoint-interval",
         "300ms", "--host", "processes", "--rest-port", "0"],
        cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert job.stderr is not None
        url = None
        for line in job.stderr:
            found = re.search(r"REST API at (http://\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with urllib.request.urlopen(url + "/v1/checkpoints", timeout=10) as response:
                if json.loads(response.read())["counts"]["completed"] >= 1:
                    break
            time.sleep(0.2)
        os.killpg(job.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        rest = job.stderr.read()
        assert job.wait(60) == 1, rest
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    for noise in ("Traceback", "KeyboardInterrupt", "CancelledError", "Exception in callback"):
        assert noise not in rest, rest
    last = rest.strip().splitlines()[-1]
    assert " CANCELED: canceled by request; its last retained checkpoint is file://" in last, rest


def test_sigint_stops_a_run_that_inherited_it_ignored(tmp_path: Path) -> None:
    """A shell without job control (a script's `sluice run ... &`) starts the command with SIGINT
    ignored. `kill -INT` sent while the job is still starting must stop it all the same: before the
    job runs it ends the start (exit 130, nothing stored), once it runs it cancels the job (exit 1)."""
    job = subprocess.Popen(
        # `trap "" INT` is how a shell ignores SIGINT, and exec hands that on as the shell does for `&`.
        ["sh", "-c", 'trap "" INT; exec "$@"', "sh",
         *SLUICE, "run", str(REPO / "examples" / "unbounded_counts.py"), "--arg", f"out={tmp_path / 'out'}",
         "--checkpoint-dir", f"file://{tmp_path / 'chk'}", "--host", "processes", "--rest-port", "0"],
        cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert job.stderr is not None
        first = job.stderr.readline()  # said while the job is set up, before anything is started
        assert "no --savepoint-dir given" in first, first
        job.send_signal(signal.SIGINT)
        code = job.wait(60)  # an ignored SIGINT leaves the job running: this times out
        rest = first + job.stderr.read()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    assert "Traceback" not in rest, rest
    last = rest.strip().splitlines()[-1]
    if code == 130:
        assert "interrupted (SIGINT) before the job ran" in last, rest
        assert not list((tmp_path / "chk").glob("*/job-result.json")), rest
    else:
        assert code == 1, rest
        assert " CANCELED: canceled by request" in last, rest

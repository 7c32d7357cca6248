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

"""A compaction process does not outlive the TaskManager that started it (`sluice.state._compactor`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from sluice.state.compaction import PARENT_VARIABLE, _child_environment

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

# A stand-in TaskManager: starts a process that arms the compactor's parent-death signal as its main()
# does first, says so, and would then sleep for a minute; prints that process's pid and waits.
_TASKMANAGER = textwrap.dedent(
    """
    import subprocess, sys, time
    from sluice.state.compaction import _child_environment
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from sluice.state._compactor import _die_with_parent; "
         "_die_with_parent(); print('armed', flush=True); time.sleep(60)"],
        env=_child_environment(),
    )
    print(child.pid, flush=True)
    time.sleep(60)
    """
)


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def test_a_compaction_process_is_killed_when_its_taskmanager_is() -> None:
    taskmanager = subprocess.Popen(
        [sys.executable, "-c", _TASKMANAGER], stdout=subprocess.PIPE, text=True, env=_child_environment()
    )
    assert taskmanager.stdout is not None
    compactor = int(taskmanager.stdout.readline())
    try:
        assert taskmanager.stdout.readline().strip() == "armed"
        taskmanager.kill()  # as a lost pod or a chaos test would: no chance to stop the compaction
        taskmanager.wait()
        assert _gone(compactor, 10.0), "the compaction process outlived its TaskManager"
    finally:
        taskmanager.kill()
        taskmanager.wait()
        if not _gone(compactor, 0):
            with contextlib.suppress(ProcessLookupError):
                os.kill(compactor, signal.SIGKILL)


def test_a_compaction_process_whose_taskmanager_is_already_gone_exits_at_once() -> None:
    # Its parent is this test, not the pid it was given: as if the TaskManager had died between the
    # fork and the compactor's first step (the kernel would then never send the signal).
    env = {**_child_environment(), PARENT_VARIABLE: str(os.getpid() + 1)}
    done = subprocess.run(
        [sys.executable, "-m", "sluice.state._compactor"],
        input="{}",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3, done.stderr

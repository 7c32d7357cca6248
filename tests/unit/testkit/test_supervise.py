"""scripts/lib/supervise.sh: the real node's components are started again when they exit.

On a loaded machine kube-controller-manager gave up at start-up ("etcdserver: request timed out") and
nothing started it again: no Deployment of that session's real-node tests ever got a pod.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from testkit.kube import REPO_ROOT
from testkit.probe import running

SUPERVISE = REPO_ROOT / "scripts" / "lib" / "supervise.sh"

# Exits with 3 on its first start, then stays up (as a component whose first start timed out).
_FLAKY = (
    'n=$(cat starts 2>/dev/null || echo 0); echo $((n + 1)) > starts; [ "$n" -ge 1 ] && exec sleep 60; exit 3'
)


def _wait_for(what: str, check: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.05)


def test_a_component_that_exits_is_started_again_and_sigterm_ends_both(tmp_path: Path) -> None:
    child_file = tmp_path / "child.pid"
    log = tmp_path / "log"
    with log.open("w") as out:
        supervisor = subprocess.Popen(
            [str(SUPERVISE), "flaky", str(child_file), "sh", "-c", _FLAKY],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for(
            "a second start",
            lambda: (tmp_path / "starts").exists() and (tmp_path / "starts").read_text() == "2\n",
        )
        _wait_for("its pid written", lambda: child_file.exists() and child_file.read_text().strip())
        child = int(child_file.read_text())
        _wait_for("the second start running", lambda: running(child))
        assert "supervise: flaky exited with status 3; starting it again in 1s" in log.read_text()

        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=10) == 0
        _wait_for("the component gone with its supervisor", lambda: not running(child))
        assert not child_file.exists()
        assert (tmp_path / "starts").read_text() == "2\n", "started again after SIGTERM"
    finally:
        supervisor.kill()
        supervisor.wait()

"""The real node's lease: one test run at a time uses the machine's one-node cluster.

A run left going on the machine tore the node down under CI's run, whose six real-node tests then all
failed with an operator that never became ready (tests/e2e/_real_node.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from e2e._real_node import node_lease


def test_a_second_holder_waits_names_the_first_and_gets_the_node_when_it_is_given_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lease = tmp_path / "node.lease"
    order: list[str] = []
    first = node_lease(lease)
    first.__enter__()
    order.append("first")

    def give_back() -> None:
        time.sleep(0.5)
        order.append("first gives back")
        first.__exit__(None, None, None)

    releaser = threading.Thread(target=give_back)
    releaser.start()
    with node_lease(lease, wait_s=30, poll_s=0.05):
        order.append("second")
        assert lease.read_text() == f"pid {os.getpid()} in {os.getcwd()}"
    releaser.join()
    assert order == ["first", "first gives back", "second"]
    assert f"another test run holds it (pid {os.getpid()} in {os.getcwd()})" in capsys.readouterr().out


def test_a_holder_that_never_gives_back_fails_the_waiter_with_who_holds_it(tmp_path: Path) -> None:
    lease = tmp_path / "node.lease"
    refused = pytest.raises(
        RuntimeError, match=r"still in use by another test run \(pid \d+ in .*node\.lease"
    )
    with node_lease(lease), refused, node_lease(lease, wait_s=0.2, poll_s=0.05):
        pytest.fail("two holders at once")


def test_a_killed_holder_gives_the_node_back(tmp_path: Path) -> None:
    lease = tmp_path / "node.lease"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(lease), str(Path(__file__).parents[2])],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        with (
            pytest.raises(RuntimeError, match=f"pid {holder.pid} in"),
            node_lease(lease, wait_s=0.1, poll_s=0.05),
        ):
            pytest.fail("the lease of a live holder")
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        with node_lease(lease, wait_s=5, poll_s=0.05):
            assert lease.read_text().startswith(f"pid {os.getpid()} ")
    finally:
        holder.kill()
        holder.wait(timeout=10)


_HOLD = """
import sys, time
sys.path.insert(0, sys.argv[2])
from e2e._real_node import node_lease
with node_lease(__import__("pathlib").Path(sys.argv[1])):
    print("holding", flush=True)
    time.sleep(60)
"""

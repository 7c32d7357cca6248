"""The real node's session process (tests/e2e/_node_session.py): prepares the node beside the earlier
tiers, holds its lease for the run, and takes it down at the end, also when the run dies.

The cluster and image scripts are stand-ins that log their calls: what is under test is the order of
the session's steps, its lease and its hand-over to the e2e tier's fixture, not the node itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from e2e._node_session import wait_prepared, write_ready
from e2e._real_node import PreparedNode, node_lease
from testkit.pids import running

_TESTS = Path(__file__).resolve().parents[2]

_CLUSTER = """#!/bin/sh
echo "$1" >> "{calls}"
case $1 in
    status) exit {status} ;;
    up) echo "{kubeconfig}" ;;
    netns) echo sluice-node ;;
    load) {load} ;;
esac
"""
_IMAGE = """#!/bin/sh
echo image >> "{calls}"
echo /cache/sluice-0123.tar
"""
# Runs the session with the stand-ins in place of the scripts.
_HOLDER = """
import sys
from pathlib import Path
import e2e._real_node as real_node
real_node.CLUSTER_SCRIPT = Path(sys.argv[1])
real_node.IMAGE_SCRIPT = Path(sys.argv[2])
from e2e._node_session import hold
hold(Path(sys.argv[3]), poll_s=0.05)
"""


def _stand_ins(tmp_path: Path, *, was_up: bool = False, load_fails: bool = False) -> tuple[Path, Path, Path]:
    calls = tmp_path / "calls"
    cluster = tmp_path / "k8s-cluster.sh"
    cluster.write_text(
        _CLUSTER.format(
            calls=calls,
            status=0 if was_up else 1,
            kubeconfig=tmp_path / "admin.kubeconfig",
            load="echo 'ctr: image import failed: no space left' >&2; exit 3" if load_fails else "true",
        )
    )
    image = tmp_path / "build-image.sh"
    image.write_text(_IMAGE.format(calls=calls))
    for script in (cluster, image):
        script.chmod(0o755)
    return cluster, image, calls


def _holder_argv(cluster: Path, image: Path, ready: Path) -> list[str]:
    return [sys.executable, "-c", _HOLDER, str(cluster), str(image), str(ready)]


def _environment(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(_TESTS), "SLUICE_CLUSTER_DIR": str(tmp_path / "cluster")}


def _wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_the_session_prepares_hands_over_holds_the_lease_and_takes_the_node_down_at_the_end(
    tmp_path: Path,
) -> None:
    cluster, image, calls = _stand_ins(tmp_path)
    ready = tmp_path / "ready.json"
    holder = subprocess.Popen(_holder_argv(cluster, image, ready), env=_environment(tmp_path))
    try:
        prepared = wait_prepared(ready, holder.pid, poll_s=0.05)
        assert prepared == PreparedNode(tmp_path / "admin.kubeconfig", "sluice-node")
        # The image first, then the node, then the import; nothing taken down yet.
        assert calls.read_text().split() == ["status", "image", "up", "netns", "load"]
        # The run holds the node: another run cannot take it.
        lease = tmp_path / "cluster.lease"
        refused = pytest.raises(RuntimeError, match="still in use by another test run")
        with refused, node_lease(lease, wait_s=0.3, poll_s=0.05):
            pass
        holder.send_signal(signal.SIGTERM)
        assert holder.wait(timeout=30) == 0
    finally:
        holder.kill()
    assert calls.read_text().split()[-1] == "down"
    with node_lease(tmp_path / "cluster.lease", wait_s=1, poll_s=0.05):
        pass  # given back after the node went down


def test_a_node_that_was_up_before_the_run_is_left_up(tmp_path: Path) -> None:
    cluster, image, calls = _stand_ins(tmp_path, was_up=True)
    ready = tmp_path / "ready.json"
    holder = subprocess.Popen(_holder_argv(cluster, image, ready), env=_environment(tmp_path))
    try:
        wait_prepared(ready, holder.pid, poll_s=0.05)
        holder.send_signal(signal.SIGTERM)
        assert holder.wait(timeout=30) == 0
    finally:
        holder.kill()
    assert "down" not in calls.read_text().split()


def test_when_the_run_dies_the_session_takes_the_node_down(tmp_path: Path) -> None:
    """A run killed by CI's time limit must not leave the node up, nor its lease held."""
    cluster, image, calls = _stand_ins(tmp_path)
    ready = tmp_path / "ready.json"
    # The "run": a shell that starts the session in the background and is then killed.
    background = '"$@" & echo $! > "$0.pid"; sleep 600'
    run = subprocess.Popen(
        ["sh", "-c", background, str(ready), *_holder_argv(cluster, image, ready)],
        env=_environment(tmp_path),
    )
    try:
        _wait_for(ready)
        holder_pid = int(Path(f"{ready}.pid").read_text())
        run.kill()
        run.wait(timeout=10)
        deadline = time.monotonic() + 30
        while "down" not in calls.read_text().split():
            assert time.monotonic() < deadline, f"the orphan did not take the node down: {calls.read_text()}"
            time.sleep(0.05)
        while running(holder_pid):
            assert time.monotonic() < deadline, "the orphaned session did not exit"
            time.sleep(0.05)
    finally:
        run.kill()


def test_a_preparation_that_fails_reaches_the_e2e_tier_as_its_error_and_the_node_is_taken_down(
    tmp_path: Path,
) -> None:
    cluster, image, calls = _stand_ins(tmp_path, load_fails=True)
    ready = tmp_path / "ready.json"
    holder = subprocess.Popen(_holder_argv(cluster, image, ready), env=_environment(tmp_path))
    try:
        with pytest.raises(RuntimeError, match=r"could not be prepared(.|\n)*no space left"):
            wait_prepared(ready, holder.pid, poll_s=0.05)
        holder.send_signal(signal.SIGTERM)
        assert holder.wait(timeout=30) == 0
    finally:
        holder.kill()
    assert calls.read_text().split()[-1] == "down"


def test_the_fixture_waits_for_the_file_while_the_session_lives(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    node = PreparedNode(tmp_path / "kubeconfig", "sluice-node")
    writer = threading.Timer(0.3, write_ready, args=(ready, node))
    writer.start()
    try:
        assert wait_prepared(ready, os.getpid(), poll_s=0.02) == node
    finally:
        writer.cancel()
    assert not ready.with_name(ready.name + ".partial").exists()
    assert json.loads(ready.read_text()) == {"kubeconfig": str(node.kubeconfig), "netns": "sluice-node"}


def test_a_session_that_ended_without_a_word_fails_the_fixture_at_once(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with pytest.raises(RuntimeError, match=rf"session process \({gone.pid}\) ended without preparing"):
        wait_prepared(tmp_path / "ready.json", gone.pid, poll_s=0.02)

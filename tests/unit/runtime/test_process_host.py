"""The process host's TaskManager interpreters: started early, handed their settings, ended and reaped.

`sluice run --host processes` starts the first attempt's interpreters before the coordinator imports
anything (hosts/processes.py); these tests hold it to what that promises: the attempt uses the very
interpreters started early, a mismatch or an unused start leaves nothing running, and an interpreter
that never gets its settings ends quietly.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.hosts.processes import TASKMANAGER_MODULE, ProcessHost, TaskManagerProcess
from sluice.transport.secret import JobSecret, TaskManagerLaunch

SIGINT_BIT = 1 << 1  # signal 2 in /proc/PID/status's SigIgn mask


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie's pid still exists until it is reaped)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


def _ignored_signals(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no SigIgn line for pid {pid}")


@pytest.fixture
def coordinator() -> Iterator[socket.socket]:
    """A listening socket standing in for the coordinator's control port: it only counts connections."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(30)
    yield server
    server.close()


def _launch(server: socket.socket) -> TaskManagerLaunch:
    host, port = server.getsockname()
    return TaskManagerLaunch(coordinator=f"{host}:{port}", secret=JobSecret.generate())


def test_the_first_attempt_hands_its_settings_to_the_interpreters_started_early(
    coordinator: socket.socket,
) -> None:
    host = ProcessHost()
    host.start_early(2)
    early = [p.pid for p in host._early]

    async def attempt() -> list[int]:
        await host.start(2, _launch(coordinator), attempt=1)
        pids = [p.pid for p in host.processes]
        # Each TaskManager, once it has its settings, connects to the coordinator they name.
        for _ in range(2):
            connection, _ = await asyncio.get_running_loop().run_in_executor(None, coordinator.accept)
            connection.close()
        await host.stop()
        return pids

    assert asyncio.run(attempt()) == early
    assert not any(_running(pid) for pid in early)
    assert host._early == []


def test_interpreters_started_early_for_another_count_are_ended_and_new_ones_started(
    coordinator: socket.socket,
) -> None:
    host = ProcessHost()
    host.start_early(1)
    (early,) = [p.pid for p in host._early]

    async def attempt() -> list[int]:
        await host.start(2, _launch(coordinator), attempt=1)
        pids = [p.pid for p in host.processes]
        await host.stop()
        return pids

    pids = asyncio.run(attempt())
    assert len(pids) == 2 and early not in pids
    assert not _running(early)


def test_interpreters_started_early_and_not_used_are_ended_and_reaped() -> None:
    host = ProcessHost()
    host.start_early(2)
    pids = [p.pid for p in host._early]
    host.discard_early()
    assert not any(_running(pid) for pid in pids)
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids), "left a zombie"


def test_an_interpreter_started_early_ignores_ctrl_c_from_its_first_instruction() -> None:
    before = signal.getsignal(signal.SIGINT)
    host = ProcessHost()
    host.start_early(1)
    try:
        # At once, while it still imports: its own handler (taskmanager.main) is not in place yet.
        assert _ignored_signals(host._early[0].pid) & SIGINT_BIT
    finally:
        host.discard_early()
    # The coordinator's own handling of SIGINT is as it was.
    assert signal.getsignal(signal.SIGINT) is before


def test_wait_returns_the_exit_code_of_a_taskmanager_that_died() -> None:
    process = TaskManagerProcess(0, "127.0.0.1")
    process.hand_over(b'{"coordinator": "no port"}\n')
    code = asyncio.run(asyncio.wait_for(process.wait(), 60))
    assert code not in (0, None)
    assert process.returncode == code


@pytest.mark.parametrize(
    ("given", "code", "says"),
    [
        (b"", 0, ""),
        (b"not json\n", 1, "sluice TaskManager: launch settings is not JSON"),
        (
            b'{"coordinator": "127.0.0.1:1"}\n',
            1,
            "sluice TaskManager: launch settings lacks the field 'secret'",
        ),
    ],
    ids=["nothing handed: ends quietly", "not JSON", "no secret"],
)
def test_a_taskmanager_without_valid_settings_ends_with_one_clear_line(
    given: bytes, code: int, says: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", TASKMANAGER_MODULE, "--index", "0"],
        input=given,
        check=False,
        capture_output=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == code
    err = done.stderr.decode()
    assert err.startswith(says) if says else err == ""
    assert "Traceback" not in err

"""The real services the chaos harness runs jobs against, started outside pytest, and process tracking.

PostgreSQL and the moto S3 server come from tests/testkit (the same code the test fixtures use); this
module only starts them for a whole harness session and adds what a fault needs: an immediate
PostgreSQL restart, and a record of every process a `sluice run` started, so that the harness can tell
whether TaskManagers outlived their coordinator (a leftover) and can always clean up after itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from testkit.ports import free_loopback_port
from testkit.postgres import PostgresServer, _server_user, find_postgres_bin
from testkit.s3 import S3Server


class Services:
    """PostgreSQL and the S3 server, each started on first use and stopped by `close`."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._postgres: PostgresServer | None = None
        self._s3: S3Server | None = None

    def postgres(self) -> PostgresServer:
        if self._postgres is None:
            base = Path(tempfile.mkdtemp(prefix="sluice-chaos-pg-"))
            server = PostgresServer(find_postgres_bin(), base, free_loopback_port(), _server_user())
            # Assigned before start: a failed start still leaves a directory for `close` to remove.
            self._postgres = server
            server.start()
        return self._postgres

    def s3(self) -> S3Server:
        if self._s3 is None:
            server = S3Server(port=free_loopback_port(), log_file=self.workdir / "moto.log")
            self._s3 = server
            server.start()
        return self._s3

    def restart_postgres(self) -> None:
        """`pg_ctl restart -m immediate`: a crash of the server (no shutdown checkpoint), then recovery.

        Prepared transactions survive it (they are in WAL); every open session is cut."""
        server = self.postgres()
        command = [
            str(server.bin_dir / "pg_ctl"), "restart", "-D", str(server.data_dir), "-m", "immediate",
            "-l", str(server.log_file), "-w", "-t", "60",
        ]  # fmt: skip
        if server.run_as:
            command = ["runuser", "-u", server.run_as, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl restart failed ({done.returncode}): {done.stdout}{done.stderr}")

    def close(self) -> None:
        if self._postgres is not None:
            self._postgres.stop()
            shutil.rmtree(self._postgres.base_dir, ignore_errors=True)
        if self._s3 is not None:
            self._s3.stop()


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live process; None once it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every live descendant of `root`, pid -> start time (the pair names a process: pids are reused)."""
    parents: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                parents.setdefault(stat[0], []).append(int(entry))
                starts[int(entry)] = stat[1]
    found: dict[int, int] = {}
    todo = list(parents.get(root, []))
    while todo and len(found) < 10_000:
        pid = todo.pop()
        if pid in starts and pid not in found:
            found[pid] = starts[pid]
            todo.extend(parents.get(pid, []))
    return found


def alive(processes: dict[int, int]) -> dict[int, int]:
    """The processes of `processes` (pid -> start time) that still run."""
    return {pid: start for pid, start in processes.items() if (_stat(pid) or (0, -1))[1] == start}


def wait_gone(processes: dict[int, int], timeout: float) -> dict[int, int]:
    """Waits up to `timeout` s for the processes to exit; returns those still running."""
    deadline = time.monotonic() + timeout
    left = alive(processes)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = alive(left)
    return left


def kill_all(processes: dict[int, int]) -> None:
    """SIGKILL (after SIGCONT, for stopped ones: harmless) every one of `processes` still running."""
    for pid in alive(processes):
        for sig in (signal.SIGKILL, signal.SIGCONT):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

"""TaskManagers as local processes: the light host for tests and small machines.

A TaskManager interpreter spends most of its start importing the engine (about 0.14 s), and needs its
launch settings only after that. `start_early` starts the first attempt's interpreters at once, before
the coordinator has imported and built anything, so that both import side by side; the first attempt
then only hands each its settings. Later attempts start theirs as they need them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys

from sluice._waiting import within
from sluice.transport.secret import TaskManagerLaunch

TASKMANAGER_MODULE = "sluice.engine.taskmanager"


class TaskManagerProcess:
    """One TaskManager interpreter, a child of this process, waiting for its settings on stdin."""

    def __init__(self, index: int, bind_host: str) -> None:
        self.index = index
        self._popen = subprocess.Popen(
            [sys.executable, "-m", TASKMANAGER_MODULE, "--index", str(index), "--bind-host", bind_host],
            stdin=subprocess.PIPE,
        )
        self.pid = self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    def hand_over(self, settings: bytes) -> None:
        """Writes the launch settings (the job's secret among them) and closes the pipe."""
        stdin = self._popen.stdin
        assert stdin is not None
        # One short line into an empty pipe never blocks. A TaskManager that already died is reported
        # by wait_lost, not here.
        with contextlib.suppress(BrokenPipeError):
            stdin.write(settings)
        with contextlib.suppress(BrokenPipeError):
            stdin.close()

    async def wait(self) -> int:
        code = self._popen.poll()
        if code is not None:
            return code
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # not Linux, or a kernel older than 5.3: look now and then
            while (code := self._popen.poll()) is None:
                await asyncio.sleep(0.05)
            return code
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()

        def exited() -> None:
            if not ended.done():
                ended.set_result(None)

        loop.add_reader(pidfd, exited)
        try:
            await ended
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        # The pidfd is readable once the child has exited: this reaps it without blocking.
        return self._popen.wait()

    def send_signal(self, signum: int) -> None:
        # Popen looks first whether the child was reaped: an unreaped child keeps its pid, so the
        # signal never reaches another process that took the number.
        with contextlib.suppress(ProcessLookupError):
            self._popen.send_signal(signum)

    def end_now(self) -> None:
        """Ends an interpreter nothing was handed to (SIGTERM: it has no handler for it) and reaps it."""
        self.send_signal(signal.SIGTERM)
        try:
            self._popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.send_signal(signal.SIGKILL)
            self._popen.wait()
        if self._popen.stdin is not None:
            self._popen.stdin.close()


class ProcessHost:
    name = "processes"

    def __init__(self, bind_host: str = "127.0.0.1") -> None:
        self.bind_host = bind_host
        self.processes: list[TaskManagerProcess] = []
        self._early: list[TaskManagerProcess] = []
        self._stopping = False

    def control_bind_host(self) -> str:
        return self.bind_host

    def start_early(self, count: int) -> None:
        """Starts `count` interpreters for the first attempt now; `discard_early` ends any not used.

        Call it from the main thread before the coordinator handles SIGINT itself. Ctrl-C reaches the
        whole process group, and ending the job is the coordinator's to do: `taskmanager.main` ignores
        SIGINT, but only once it has imported. An interpreter started with SIGINT ignored keeps it
        ignored from its first instruction, so a Ctrl-C in the first moments of `sluice run` prints no
        traceback from a TaskManager still importing.
        """
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self._early = [TaskManagerProcess(index, self.bind_host) for index in range(count)]
        finally:
            signal.signal(signal.SIGINT, previous)

    def discard_early(self) -> None:
        early, self._early = self._early, []
        for process in early:
            process.end_now()

    async def start(self, count: int, launch: TaskManagerLaunch, attempt: int) -> None:
        self._stopping = False
        early = [p for p in self._early if p.returncode is None]
        if len(early) != count or len(early) != len(self._early):
            self.discard_early()
            early = []
        self._early = []
        # The launch settings carry the job's secret: through a pipe, not argv (which `ps` shows to
        # every user) nor the environment (which the TaskManager's own children would inherit).
        settings = launch.encode().encode() + b"\n"
        for index in range(count):
            process = early[index] if early else TaskManagerProcess(index, self.bind_host)
            process.hand_over(settings)
            self.processes.append(process)

    async def wait_lost(self) -> str:
        waits = {asyncio.ensure_future(p.wait()): i for i, p in enumerate(self.processes)}
        if not waits:
            await asyncio.Event().wait()
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for future in pending:
            future.cancel()
        first = next(iter(done))
        code = first.result()
        return f"TaskManager {waits[first]} (pid {self.processes[waits[first]].pid}) exited with code {code}"

    async def stop(self, grace_s: float = 0.0) -> None:
        self._stopping = True
        if grace_s > 0:
            # TaskManagers that were told to shut down exit by themselves; give them the time to.
            with contextlib.suppress(TimeoutError):
                await within(asyncio.gather(*(p.wait() for p in self.processes)), grace_s)
        for process in self.processes:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                await within(process.wait(), 5)
            except TimeoutError:
                process.send_signal(signal.SIGKILL)
                await process.wait()
        self.processes = []

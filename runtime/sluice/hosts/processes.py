"""TaskManagers as local processes: the light host for tests and small machines."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

from sluice._waiting import within
from sluice.transport.secret import TaskManagerLaunch


class ProcessHost:
    name = "processes"

    def __init__(self, bind_host: str = "127.0.0.1") -> None:
        self.bind_host = bind_host
        self.processes: list[asyncio.subprocess.Process] = []
        self._stopping = False

    def control_bind_host(self) -> str:
        return self.bind_host

    async def start(self, count: int, launch: TaskManagerLaunch, attempt: int) -> None:
        self._stopping = False
        env = dict(os.environ)
        env["SLUICE_ATTEMPT"] = str(attempt)
        # The launch settings carry the job's secret: through a pipe, not argv (which `ps` shows to
        # every user) nor the environment (which the TaskManager's own children would inherit).
        settings = launch.encode().encode() + b"\n"
        for index in range(count):
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "sluice.engine.taskmanager",
                "--index",
                str(index),
                "--bind-host",
                self.bind_host,
                env=env,
                stdin=asyncio.subprocess.PIPE,
            )
            assert proc.stdin is not None
            proc.stdin.write(settings)
            with contextlib.suppress(ConnectionError):
                await proc.stdin.drain()
            proc.stdin.close()
            self.processes.append(proc)

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
        for proc in self.processes:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
        for proc in self.processes:
            try:
                await within(proc.wait(), 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        self.processes = []

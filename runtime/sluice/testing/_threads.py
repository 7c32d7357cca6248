"""TaskManagers as threads of this process: the host of `sluice.testing`'s one-process jobs.

Each TaskManager runs the engine's own `TaskManager` on an event loop of its own thread and talks to
the coordinator over the same loopback sockets, handshake and messages as a TaskManager process. What
differs from `ProcessHost` is only how one is started and ended: a thread cannot be killed, so `stop`
cancels the TaskManager's main task on its loop, which closes its connections and ends its tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import sys
import threading
import traceback

from sluice._waiting import within
from sluice.engine.taskmanager import TaskManager
from sluice.transport.secret import TaskManagerLaunch

# What a cancelled TaskManager thread reports, as a terminated process's negative signal number would.
CANCELLED = -15
# How long `stop` waits for a cancelled TaskManager's thread; user code blocking its event loop (a
# `time.sleep` in a map) delays the cancellation until it returns.
JOIN_TIMEOUT_S = 30.0


class _TaskManagerThread:
    def __init__(self, launch: TaskManagerLaunch, index: int, bind_host: str, attempt: int) -> None:
        self.index = index
        self.code: int | None = None
        self.ended = threading.Event()
        self._launch, self._bind_host = launch, bind_host
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task[int] | None = None
        self._watchers: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[int]]] = []
        self._lock = threading.Lock()
        self.thread = threading.Thread(
            target=self._run, name=f"sluice-taskmanager-{attempt}-{index}", daemon=True
        )

    def _run(self) -> None:
        code = 1
        taskmanager: TaskManager | None = None
        try:
            taskmanager = TaskManager(self._launch, self.index, self._bind_host)
            code = asyncio.run(self._serve(taskmanager))
        finally:
            if taskmanager is not None:
                taskmanager.close_sinks()
            with self._lock:
                self.code = code
                self.ended.set()
                watchers, self._watchers = self._watchers, []
            for loop, future in watchers:
                with contextlib.suppress(RuntimeError):  # the watching loop has closed
                    loop.call_soon_threadsafe(_settle, future, code)

    async def _serve(self, taskmanager: TaskManager) -> int:
        self._loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        try:
            return await taskmanager.run()
        except asyncio.CancelledError:
            return CANCELLED

    def watch(self) -> asyncio.Future[int]:
        """A future of the calling loop that gets the thread's exit code when it ends."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        with self._lock:
            if self.code is not None:
                future.set_result(self.code)
            else:
                self._watchers.append((loop, future))
        return future

    def where(self) -> str:
        """The thread's stack and its loop's unfinished tasks, for the error that says it is stuck."""
        frame = sys._current_frames().get(self.thread.ident or -1)
        lines = ["thread:", *traceback.format_stack(frame)] if frame is not None else ["thread: gone"]
        loop = self._loop
        if loop is not None:
            try:
                tasks = list(asyncio.all_tasks(loop))
            except RuntimeError:  # the set changed while it was read (it is another thread's)
                tasks = []
            for task in tasks:
                stack = io.StringIO()
                task.print_stack(file=stack)
                lines.append(stack.getvalue())
        return "".join(lines)

    def cancel(self) -> None:
        loop, main = self._loop, self._main
        if loop is not None and main is not None and not self.ended.is_set():
            with contextlib.suppress(RuntimeError):  # its loop closed in between: it has ended
                loop.call_soon_threadsafe(main.cancel)


def _settle(future: asyncio.Future[int], code: int) -> None:
    if not future.done():
        future.set_result(code)


class ThreadHost:
    """Runs each TaskManager of a job on a thread of this process (`sluice.testing`)."""

    name = "threads"

    def __init__(self, bind_host: str = "127.0.0.1") -> None:
        self.bind_host = bind_host
        self.threads: list[_TaskManagerThread] = []

    def control_bind_host(self) -> str:
        return self.bind_host

    async def start(self, count: int, launch: TaskManagerLaunch, attempt: int) -> None:
        for index in range(count):
            taskmanager = _TaskManagerThread(launch, index, self.bind_host, attempt)
            taskmanager.thread.start()
            self.threads.append(taskmanager)

    async def wait_lost(self) -> str:
        watches = {taskmanager.watch(): taskmanager for taskmanager in self.threads}
        if not watches:
            await asyncio.Event().wait()
        done, pending = await asyncio.wait(watches, return_when=asyncio.FIRST_COMPLETED)
        for future in pending:
            future.cancel()
        first = next(iter(done))
        return f"TaskManager {watches[first].index} (a thread) exited with code {first.result()}"

    async def stop(self, grace_s: float = 0.0) -> None:
        threads, self.threads = self.threads, []
        if grace_s > 0:
            # TaskManagers that were told to shut down end by themselves; give them the time to.
            with contextlib.suppress(TimeoutError):
                await within(asyncio.gather(*(t.watch() for t in threads)), grace_s)
        for taskmanager in threads:
            taskmanager.cancel()
        for taskmanager in threads:
            await asyncio.to_thread(taskmanager.thread.join, JOIN_TIMEOUT_S)
            if taskmanager.thread.is_alive():
                raise RuntimeError(
                    f"TaskManager {taskmanager.index} (a thread) did not end within {JOIN_TIMEOUT_S}s of "
                    "being cancelled: user code is blocking its event loop, or one of its tasks does not "
                    f"end when cancelled. Where it is:\n{taskmanager.where()}"
                )

"""One run of one container: a host process group started through `_enter.py`.

The process leads its own process group; stopping the container signals the whole group (SIGTERM,
then SIGKILL once the grace period is over), and when the main process exits whatever it left behind in
its group is killed, as the end of a container's PID namespace would.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ._volumes import Mount

_ENTER = Path(__file__).with_name("_enter.py")


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Exit:
    exit_code: int
    signal: int | None
    started_at: str
    finished_at: str

    @property
    def reason(self) -> str:
        return "Completed" if self.exit_code == 0 else "Error"

    def terminated(self, container_id: str) -> dict[str, object]:
        state: dict[str, object] = {
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "containerID": container_id,
        }
        if self.signal is not None:
            state["signal"] = self.signal
        return state


class ContainerProcess:
    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        cwd: str,
        hostname: str | None,
        mounts: Sequence[Mount],
        log_path: Path,
    ) -> None:
        self._spec = {
            "argv": list(argv),
            "env": dict(env),
            "cwd": cwd,
            "hostname": hostname,
            "mounts": [m.to_json() for m in mounts],
        }
        self._log_path = log_path
        self._process: asyncio.subprocess.Process | None = None
        self.started_at = ""

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    @property
    def container_id(self) -> str:
        return f"process://{self.pid}"

    async def start(self) -> None:
        """Start the process; returns once the container command runs (or the start failed)."""
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        # The write end closes when _enter.py execs the command (close-on-exec) or dies: EOF on the
        # read end means "started", so no signal can reach the launcher instead of the container.
        exec_read, exec_write = os.pipe()
        spec_path = self._log_path.with_suffix(".spec.json")
        spec_path.write_text(json.dumps({**self._spec, "exec_fd": exec_write}, indent=1))
        write_open = True
        try:
            with self._log_path.open("ab") as log:
                self._process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-I",
                    "-S",
                    str(_ENTER),
                    str(spec_path),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=(exec_write,),
                )
            os.close(exec_write)
            write_open = False
            await asyncio.get_running_loop().run_in_executor(None, os.read, exec_read, 1)
        finally:
            os.close(exec_read)
            if write_open:
                os.close(exec_write)
        self.started_at = now()

    async def wait(self) -> Exit:
        assert self._process is not None
        code = await self._process.wait()
        self._signal_group(signal.SIGKILL)
        # Negative return codes are signals; the kubelet reports those as 128 + signal number.
        signum = -code if code < 0 else None
        return Exit(128 + signum if signum else code, signum, self.started_at, now())

    async def stop(self, grace_seconds: float) -> None:
        """SIGTERM the group, SIGKILL it after the grace period; returns when the main process is gone."""
        if self._process is None or self._process.returncode is not None:
            return
        self._signal_group(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(self._process.wait()), timeout=max(grace_seconds, 0))
        except TimeoutError:
            self._signal_group(signal.SIGKILL)
            await self._process.wait()

    def kill_now(self) -> None:
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, signum: int) -> None:
        if self._process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signum)

"""Runs `sluice run` for a benchmark and samples what it needs: REST state, TaskManager peak memory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from sluice._tokens import find_token

REPO = Path(__file__).resolve().parents[1]
_REST = re.compile(r"job (\S+): REST API at (http://\S+)")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process, 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class TreeCpu:
    """CPU seconds of a process and all its descendants, sampled until it ends."""

    def __init__(self) -> None:
        self.seen: dict[int, float] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> TreeCpu:
        self._root = os.getpid()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        self._thread.join()

    def total(self) -> float:
        return sum(self.seen.values())

    def _sample(self) -> None:
        while not self._done.wait(0.05):
            for pid in descendants(self._root):
                self.seen[pid] = max(self.seen.get(pid, 0.0), cpu_seconds(pid))


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _status_bytes(pid: int, field: str) -> int:
    """A size from /proc/<pid>/status (VmHWM, VmRSS, ...) in bytes, 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def peak_rss_bytes(pid: int) -> int:
    """The process's peak resident set (VmHWM), 0 once it is gone."""
    return _status_bytes(pid, "VmHWM")


def rss_bytes(pid: int) -> int:
    """The process's resident set now (VmRSS), 0 once it is gone."""
    return _status_bytes(pid, "VmRSS")


def with_children_rss_bytes(pid: int) -> int:
    """The resident set now of a process and its child processes (a TaskManager's compaction process,
    which its pod's memory counts as well)."""
    children: list[int] = []
    try:
        for thread in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{thread}/children") as listed:
                children += [int(c) for c in listed.read().split()]
    except OSError:
        pass
    return rss_bytes(pid) + sum(rss_bytes(c) for c in children if _has_run(c))


def _has_run(pid: int) -> bool:
    """Whether a child has become its own program. Until its exec, a child started with vfork shares
    its parent's memory and reports the parent's resident set as its own: counting it would count the
    parent twice."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"sluice.state._compactor" in cmdline.read()
    except OSError:
        return False


# How long `sluice run` may take to print its REST address: a Spark JVM on a machine with dozens of
# runnable processes took over two minutes to start.
READY_TIMEOUT_S = 600


class BenchJob:
    def __init__(self, pipeline: Path, *options: str, env: dict[str, str] | None = None) -> None:
        self.started = time.monotonic()
        self.started_at = time.time()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sluice.cli",
                "run",
                str(pipeline),
                "--rest-port",
                "0",
                "--quiet",
                *options,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, **(env or {})},
        )
        self.url: str | None = None
        self.token: str | None = None
        self.lines: list[str] = []
        self.last_line_at = self.started
        """`time.monotonic()` when the last line of its stderr (its verdict, once it has ended) came."""
        self.exited_at = self.started
        """`time.monotonic()` when `wait` saw it exit."""
        self.peaks: dict[int, int] = {}
        self.tree_peaks: dict[int, int] = {}
        self.cpu: dict[int, float] = {}
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._sample, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.last_line_at = time.monotonic()
            self.lines.append(line)
            match = _REST.search(line)
            if match:
                # `sluice run` stored the token for this user, who runs the benchmark: read it at once,
                # the file goes when the job ends.
                self.token = find_token(match.group(1))
                self.url = match.group(2)
                self._ready.set()
        self._ready.set()

    def _sample(self) -> None:
        self._ready.wait(READY_TIMEOUT_S)
        while self.process.poll() is None and self.url:
            try:
                for tm in self.get("/v1/job")["taskManagers"]:
                    pid = tm["pid"]
                    self.peaks[pid] = max(self.peaks.get(pid, 0), peak_rss_bytes(pid))
                    self.tree_peaks[pid] = max(self.tree_peaks.get(pid, 0), with_children_rss_bytes(pid))
                    self.cpu[pid] = max(self.cpu.get(pid, 0.0), cpu_seconds(pid))
            except OSError:
                pass
            time.sleep(0.05)

    def get(self, path: str) -> Any:
        assert self.url is not None
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.loads(response.read())

    def post(self, path: str, body: dict[str, Any]) -> Any:
        assert self.url is not None
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def wait_ready(self) -> None:
        self._ready.wait(READY_TIMEOUT_S)
        if self.url is None:
            raise RuntimeError("sluice run printed no REST address:\n" + "".join(self.lines))

    def wait(self, timeout: float = 600) -> float:
        """Waits for the exit; returns seconds since start. Raises with stderr when the job failed."""
        code = self.process.wait(timeout)
        self.exited_at = time.monotonic()
        elapsed = self.exited_at - self.started
        if code != 0:
            raise RuntimeError(f"sluice run exited {code}:\n" + "".join(self.lines[-30:]))
        return elapsed

    def max_peak_rss(self) -> int:
        return max(self.peaks.values(), default=0)

    def max_peak_rss_with_children(self) -> int:
        """The most a TaskManager and its child processes held at once (sampled every 50 ms)."""
        return max(self.tree_peaks.values(), default=0)


def environment_note() -> str:
    load = os.getloadavg()[0]
    return f"{os.cpu_count()} cores, load average {load:.2f} at start"

"""Runs `sluice run` as a real subprocess and talks to its REST API, the way a user would.

`RestJob` is what a test sees of a running job, whatever runs it: `SluiceJob` here (a `sluice run`
process, TaskManagers as local processes unless the options say `--host`), or `testkit.spark.SparkJob`
(the job in the test process, TaskManagers as Spark barrier tasks).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sluice._tokens import find_token

REPO = Path(__file__).resolve().parents[2]
SLUICE = [sys.executable, "-m", "sluice.cli"]
_REST = re.compile(r"job (\S+): REST API at (http://\S+)")


def with_host(options: Sequence[str]) -> list[str]:
    """`sluice run` defaults to the Spark host; these tests use the process host unless they say."""
    return list(options) if "--host" in options else ["--host", "processes", *options]


class RestJob:
    """A running job seen through its REST API."""

    def rest_url(self, timeout: float = 60) -> str:
        raise NotImplementedError

    def token(self) -> str:
        """The bearer token of the job's REST API (the test is the job's user: it may read it)."""
        raise NotImplementedError

    @property
    def stderr(self) -> str:
        raise NotImplementedError

    def ended(self) -> str | None:
        """None while the job runs; once it has ended, how (for messages)."""
        raise NotImplementedError

    def wait(self, timeout: float = 120) -> int:
        """Waits for the end; returns what `sluice run` exits with."""
        raise NotImplementedError

    def kill(self) -> None:
        """Ends the job if it still runs (cancel), and waits for that."""
        raise NotImplementedError

    def get(self, path: str) -> Any:
        request = urllib.request.Request(
            self.rest_url() + path, headers={"Authorization": f"Bearer {self.token()}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self.rest_url() + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token()}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def wait_until(self, predicate: Any, timeout: float = 60, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            ended = self.ended()
            if ended is not None:
                raise AssertionError(f"job {ended} while waiting for {what}:\n{self.stderr}")
            try:
                last = predicate()
            except OSError:
                last = None
            if last:
                return last
            time.sleep(0.05)
        raise AssertionError(
            f"timed out after {timeout}s waiting for {what} (last: {last!r}); stderr:\n{self.stderr}"
        )

    def completed_checkpoints(self) -> int:
        return int(self.get("/v1/checkpoints")["counts"]["completed"])

    def wait_checkpoints(self, count: int, timeout: float = 60) -> None:
        self.wait_until(
            lambda: self.completed_checkpoints() >= count, timeout, f"{count} completed checkpoints"
        )

    def taskmanager_pids(self) -> list[int]:
        return [tm["pid"] for tm in self.get("/v1/job")["taskManagers"]]


class SluiceJob(RestJob):
    """A `sluice run` process; collects its stderr and finds its REST address."""

    def __init__(self, pipeline: str | Path, *options: str, env: dict[str, str] | None = None) -> None:
        command = [*SLUICE, "run", str(pipeline), "--rest-port", "0", *with_host(options)]
        self.command = command
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, **(env or {})},
        )
        self.stderr_lines: list[str] = []
        self.url: str | None = None
        self.job_id: str | None = None
        self._token: str | None = (env or {}).get("SLUICE_REST_TOKEN")
        self._url_seen = threading.Event()
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr_lines.append(line)
            match = _REST.search(line)
            if match and self.url is None:
                self.job_id, self.url = match.group(1), match.group(2)
                self._url_seen.set()
        self._url_seen.set()

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    def rest_url(self, timeout: float = 60) -> str:
        self._url_seen.wait(timeout)
        if self.url is None:
            raise AssertionError(f"sluice run printed no REST address; stderr:\n{self.stderr}")
        return self.url

    def token(self) -> str:
        if self._token is None:
            self.rest_url()
            assert self.job_id is not None
            # Read once: the coordinator removes its token file when it exits.
            self._token = find_token(self.job_id)
            if self._token is None:
                raise AssertionError(f"no stored REST token for job {self.job_id}; stderr:\n{self.stderr}")
        return self._token

    def ended(self) -> str | None:
        code = self.process.poll()
        return None if code is None else f"exited ({code})"

    def wait(self, timeout: float = 120) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"job did not end within {timeout}s; stderr:\n{self.stderr}") from None
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def run_job(
    pipeline: str | Path, *options: str, timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs `sluice run` to the end and returns the finished process (stdout, stderr, returncode)."""
    return subprocess.run(  # the caller asserts on the return code, with stderr in the message
        [*SLUICE, "run", str(pipeline), "--rest-port", "0", *with_host(options)],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def run_cli(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs another `sluice` command (status, savepoint, stop, cancel) to its end."""
    return subprocess.run(  # the caller asserts on the return code
        [*SLUICE, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )

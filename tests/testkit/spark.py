"""Jobs on the Spark host inside the test process, sharing one local SparkContext per test run.

A `sluice run` subprocess starts its own Spark JVM, seconds per test. Here the job master and REST API
run in the test process (`sluice._inprocess`), the TaskManagers are barrier tasks of a real local
Spark, and the SparkContext lives as long as the pytest session (the `spark_context` fixture in
tests/conftest.py, session-scoped: a SparkContext start costs seconds, a JVM more).

`SparkJob` and `run_spark_job` mirror `SluiceJob` and `run_job`; the `runner` fixture gives a test both
hosts, `processes` through the subprocess harness and `spark` through this one:

    def test_x(runner: Runner, tmp_path: Path) -> None:
        job = runner.start(PIPELINE, "--arg", ...)
"""

from __future__ import annotations

import functools
import logging
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sluice._inprocess import BackgroundJob, start_job
from sluice._runner import EXIT_USAGE, UsageError
from sluice.hosts.spark import SparkHost, SparkLog, local_master, spark_settings, start_spark
from testkit.jobs import RestJob, SluiceJob, run_job

# Task slots of the shared local Spark: enough for the TaskManagers of any test job.
SLOTS = 4


def start_test_spark(log_dir: Path) -> Any:
    """A local SparkContext with the settings `sluice run` uses; Spark's log goes to `log_dir`."""
    log = SparkLog(log_dir / "spark.log")
    settings = spark_settings(SLOTS, local_master(SLOTS), "sluice tests", log4j_file=str(log.config))
    return start_spark(settings, log)


def still_running(pids: list[int], grace_s: float = 2.0) -> list[int]:
    """Those of `pids` that are running processes (not gone, not zombies) after up to `grace_s`.

    The grace covers a worker that has reported its task's end and is exiting.
    """
    deadline = time.monotonic() + grace_s
    while True:
        running = [pid for pid in pids if _running(pid)]
        if not running or time.monotonic() >= deadline:
            return running
        time.sleep(0.05)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class _Lines(logging.Handler):
    """The job master's log lines, as `sluice run` would print them on stderr."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter("sluice: %(levelname)s %(name)s: %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record) + "\n")


class SparkJob(RestJob):
    """A job whose TaskManagers are barrier tasks of `spark_context`, coordinated in this process."""

    def __init__(
        self,
        pipeline: str | Path,
        *options: str,
        spark_context: Any,
        env: dict[str, str] | None = None,
    ) -> None:
        if env:
            raise ValueError("an in-process job shares the test's environment; it takes no env")
        self.host = SparkHost(spark_context)
        self._log = _Lines()
        logging.getLogger("sluice").addHandler(self._log)
        self._finished = False
        try:
            self.handle: BackgroundJob = start_job(
                [str(pipeline), "--rest-port", "0", *options],
                self.host,
                default_checkpoint_dir=f"{tempfile.gettempdir()}/sluice/checkpoints",
            )
        except BaseException:
            self._detach()
            raise

    def _detach(self) -> None:
        logging.getLogger("sluice").removeHandler(self._log)

    @property
    def stderr(self) -> str:
        return "".join(self._log.lines)

    def rest_url(self, timeout: float = 60) -> str:
        return self.handle.rest_url(timeout)

    def token(self) -> str:
        return self.handle.token

    def ended(self) -> str | None:
        return "ended" if self.handle.done() else None

    def wait(self, timeout: float = 120) -> int:
        try:
            code = self.handle.exit_code(timeout)
        except TimeoutError:
            self.kill()
            raise AssertionError(f"job did not end within {timeout}s; log:\n{self.stderr}") from None
        if not self._finished:
            self._finished = True
            result = self.handle.job.result
            outcome = "without a result" if result is None else f"{result.state}: {result.error}"
            self._log.lines.append(f"sluice: job {self.handle.job_id} {outcome}\n")
            self._detach()
        return code

    def kill(self) -> None:
        if not self.handle.done():
            self.handle.cancel()
        try:
            self.handle.exit_code(60)
        finally:
            self._detach()


def run_spark_job(
    pipeline: str | Path, *options: str, spark_context: Any, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Runs a job on the Spark host to its end; the result looks like `run_job`'s finished process."""
    command = [str(pipeline), *options]
    try:
        job = SparkJob(pipeline, *options, spark_context=spark_context)
    except UsageError as err:
        return subprocess.CompletedProcess(command, EXIT_USAGE, "", f"sluice: error: {err}\n")
    code = job.wait(timeout)
    return subprocess.CompletedProcess(command, code, "", job.stderr)


@dataclass(frozen=True)
class Runner:
    """Starts jobs on one host: `start` like `SluiceJob(...)`, `run` like `run_job(...)`."""

    host: str
    start: Callable[..., RestJob]
    run: Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(params=["processes", pytest.param("spark", marks=pytest.mark.spark)])
def runner(request: pytest.FixtureRequest) -> Runner:
    if request.param == "processes":
        return Runner("processes", SluiceJob, run_job)
    context = request.getfixturevalue("spark_context")
    return Runner(
        "spark",
        functools.partial(SparkJob, spark_context=context),
        functools.partial(run_spark_job, spark_context=context),
    )

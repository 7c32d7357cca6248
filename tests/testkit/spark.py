"""Jobs on the Spark host inside the test process, sharing one local SparkContext per test run.

A `sluice run` subprocess starts its own Spark JVM, seconds per test. Here the job master and REST API
run in the test process (`sluice._inprocess`), the TaskManagers are barrier tasks of a real local
Spark, and the SparkContext lives as long as the pytest session (the `spark_context` fixture in
tests/conftest.py, session-scoped: a SparkContext start costs seconds, a JVM more).

`SparkJob` and `run_spark_job` mirror `SluiceJob` and `run_job`; the `runner` fixture gives a test both
hosts, `processes` through the subprocess harness and `spark` through this one; `engine_runner` gives
`threads` (`testkit.inprocess.ThreadJob`, no process at all) and `spark`:

    def test_x(runner: Runner, tmp_path: Path) -> None:
        job = runner.start(PIPELINE, "--arg", ...)
"""

from __future__ import annotations

import functools
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sluice.hosts.spark import SparkHost, SparkLog, local_master, spark_settings, start_spark
from testkit.inprocess import InProcessJob, ThreadJob, run_in_process, run_thread_job
from testkit.jobs import RestJob, SluiceJob, run_job
from testkit.pids import running

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
        alive = [pid for pid in pids if running(pid)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


class SparkJob(InProcessJob):
    """A job whose TaskManagers are barrier tasks of `spark_context`, coordinated in this process."""

    def __init__(
        self,
        pipeline: str | Path,
        *options: str,
        spark_context: Any,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(pipeline, *options, host=SparkHost(spark_context), env=env)


def run_spark_job(
    pipeline: str | Path, *options: str, spark_context: Any, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Runs a job on the Spark host to its end; the result looks like `run_job`'s finished process."""
    return run_in_process(pipeline, *options, host=SparkHost(spark_context), timeout=timeout)


@dataclass(frozen=True)
class Runner:
    """Starts jobs on one host: `start` like `SluiceJob(...)`, `run` like `run_job(...)`."""

    host: str
    start: Callable[..., RestJob]
    run: Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(params=["processes", pytest.param("spark", marks=pytest.mark.spark)])
def runner(request: pytest.FixtureRequest) -> Runner:
    """A test through the real `sluice run` (processes host) and on the Spark host."""
    if request.param == "processes":
        return Runner("processes", SluiceJob, run_job)
    return _spark_runner(request)


@pytest.fixture(params=["threads", pytest.param("spark", marks=pytest.mark.spark)])
def engine_runner(request: pytest.FixtureRequest) -> Runner:
    """A test of engine semantics with TaskManagers on threads of the test process, and on the Spark
    host: no interpreter is started; what needs the CLI or a real process takes `runner`."""
    if request.param == "threads":
        return Runner("threads", ThreadJob, run_thread_job)
    return _spark_runner(request)


def _spark_runner(request: pytest.FixtureRequest) -> Runner:
    context = request.getfixturevalue("spark_context")
    return Runner(
        "spark",
        functools.partial(SparkJob, spark_context=context),
        functools.partial(run_spark_job, spark_context=context),
    )

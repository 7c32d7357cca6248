"""A whole job in this process: the job master as `sluice run` runs it, TaskManagers on threads.

The arguments are those of `sluice run` (a pipeline file or module with `build(env)`, `--arg`,
`--parallelism`, `--checkpoint-interval`, restart options, `--from-savepoint`, ...), parsed by the same
code; checkpoints go to a temporary directory unless `--checkpoint-dir` says otherwise. The job runs on
its own event loop thread, so a test can wait for it, take a savepoint or stop it from its own thread.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from sluice._inprocess import BackgroundJob
from sluice._inprocess import start_job as start_background_job
from sluice._states import StopMode
from sluice.api.environment import StreamEnvironment
from sluice.hosts.base import TaskManagerHost
from sluice.testing._threads import ThreadHost

DEFAULT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class JobOutcome:
    """How a job ended, as its job result records it."""

    job_id: str
    state: str
    """FINISHED, FAILED, CANCELED or SUSPENDED."""
    error: str | None
    last_checkpoint: str | None
    last_savepoint: str | None
    stop_savepoint: str | None
    exit_code: int
    """What `sluice run` would have exited with: 0 FINISHED, 1 FAILED or CANCELED, 3 SUSPENDED."""


Pipeline = str | Path | Callable[[StreamEnvironment], None]
"""A pipeline file, an importable module with `build(env)`, or a `build(env)` function itself."""

_pipeline_numbers = itertools.count()


@contextlib.contextmanager
def _pipeline_name(pipeline: Pipeline) -> Iterator[str]:
    """What `sluice run` takes for `pipeline`: a `build` function is offered as a module of its own,
    importable while the job graph is built (its functions travel to the TaskManagers by reference)."""
    if not callable(pipeline):
        yield str(pipeline)
        return
    name = f"sluice_testing_{getattr(pipeline, '__name__', 'pipeline')}_{next(_pipeline_numbers)}"
    if not name.isidentifier():
        name = f"sluice_testing_pipeline_{next(_pipeline_numbers)}"
    module = types.ModuleType(name)
    module.build = pipeline  # type: ignore[attr-defined]
    sys.modules[name] = module
    try:
        yield name
    finally:
        del sys.modules[name]


def _given(option: str, options: Sequence[str]) -> bool:
    return any(given == option or given.startswith(f"{option}=") for given in options)


class LocalJob:
    """A running job of this process (see `start_job`); a context manager that cancels it on exit."""

    def __init__(self, pipeline: Pipeline, options: Sequence[str], host: TaskManagerHost | None) -> None:
        self._own_dir: Path | None = None
        arguments = list(options)
        if not _given("--checkpoint-dir", options):
            self._own_dir = Path(tempfile.mkdtemp(prefix="sluice-testing-"))
            arguments += ["--checkpoint-dir", f"file://{self._own_dir / 'checkpoints'}"]
        if not _given("--rest-port", options):
            arguments += ["--rest-port", "-1"]  # no REST API unless asked for: nothing listens needlessly
        self.host = host or ThreadHost()
        try:
            with _pipeline_name(pipeline) as name:
                self.background: BackgroundJob = start_background_job(
                    [name, *arguments], self.host, default_checkpoint_dir=str(self._own_dir)
                )
        except BaseException:
            self._remove_own_dir()
            raise

    @property
    def job_id(self) -> str:
        return self.background.job_id

    @property
    def checkpoint_dir(self) -> str:
        return self.background.job.config.checkpoint_dir

    def completed_checkpoints(self) -> int:
        """Checkpoints completed so far, over every attempt (savepoints included)."""
        return self.background.job.checkpoints.counts["completed"]

    def wait_checkpoints(self, count: int, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Waits until `count` checkpoints have completed; raises if the job ends or time runs out first."""
        deadline = time.monotonic() + timeout
        while self.completed_checkpoints() < count:
            if self.background.done():
                raise RuntimeError(f"job {self.job_id} ended before {count} completed checkpoints")
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"job {self.job_id}: {count} completed checkpoints not within {timeout}s "
                    f"({self.completed_checkpoints()} completed; {self._in_flight()})"
                )
            time.sleep(0.02)

    def _in_flight(self) -> str:
        """What the job's pending checkpoints wait for, read on the job's event loop (where the job
        master changes them), for a timeout's message."""

        async def describe(job: Any) -> list[str]:
            return list(job.checkpoints.describe_pending())

        try:
            pending = self.background.call(describe, 5.0)
        except (RuntimeError, TimeoutError) as err:
            # The job ended meanwhile, or its loop does not answer: said, not raised over the timeout.
            return f"its pending checkpoints could not be read: {type(err).__name__}: {err}"
        return "; ".join(pending) if pending else "no checkpoint is pending"

    def savepoint(self, target_dir: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> str:
        """Takes a savepoint while the job keeps running; returns its path (a `file://` or `s3://` URL).

        Without `target_dir` it goes to the job's `--savepoint-dir`."""

        async def take(job: Any) -> str:
            return str((await job.savepoints.take(target_dir)).path)

        return self.background.call(take, timeout)

    def stop(
        self, drain: bool = False, target_dir: str | None = None, timeout: float = DEFAULT_TIMEOUT_S
    ) -> str:
        """Stop with savepoint (FLIP-34): with `drain` the sources end and every window fires (TERMINATE),
        without it the tasks end where they are (SUSPEND). Returns the savepoint's path; `wait()` then
        gives the job's end."""

        async def stop(job: Any) -> str:
            return str((await job.savepoints.stop(StopMode.of_drain(drain), target_dir)).path)

        return self.background.call(stop, timeout)

    def cancel(self) -> None:
        """Cancels the job (as `sluice cancel` does); `wait()` then gives the job's end."""
        self.background.cancel()

    def wait(self, timeout: float = DEFAULT_TIMEOUT_S) -> JobOutcome:
        """Waits for the job to end; raises TimeoutError if it has not within `timeout` seconds."""
        result = self.background.wait(timeout)
        return JobOutcome(
            job_id=str(result["jobId"]),
            state=str(result["state"]),
            error=result.get("error"),
            last_checkpoint=result.get("lastCheckpoint"),
            last_savepoint=result.get("lastSavepoint"),
            stop_savepoint=result.get("stopSavepoint"),
            exit_code=self.background.exit_code(0),
        )

    def close(self) -> None:
        """Cancels the job if it still runs, waits for its end, and removes the checkpoint directory
        the harness made for it."""
        try:
            if not self.background.done():
                self.background.cancel()
                self.background.wait(DEFAULT_TIMEOUT_S)
        finally:
            self._remove_own_dir()

    def _remove_own_dir(self) -> None:
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)

    def __enter__(self) -> LocalJob:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def start_job(pipeline: Pipeline, *options: str, host: TaskManagerHost | None = None) -> LocalJob:
    """Starts the job `sluice run PIPELINE OPTIONS...` would run, in this process; returns at once.

    `pipeline` may also be a `build(env)` function: its sinks and sources can then be the test's own
    objects (a `CollectingSink` the test reads afterwards).

    TaskManagers run on threads (`ThreadHost`) unless `host` is another host (a `SparkHost` of a test's
    SparkContext, say). Raises `sluice._runner.UsageError` where `sluice run` would refuse to start.
    """
    return LocalJob(pipeline, options, host)


def run_job(
    pipeline: Pipeline,
    *options: str,
    host: TaskManagerHost | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> JobOutcome:
    """Runs a job to its end in this process and returns how it ended; its checkpoint directory (unless
    `--checkpoint-dir` names one) is removed afterwards."""
    with start_job(pipeline, *options, host=host) as job:
        return job.wait(timeout)

"""Running a job inside this process, on a background event loop, with a host the caller provides.

`sluice run` owns its process: it starts a Spark JVM, runs one job and exits. Tests and benchmarks
want many jobs against one SparkContext (a JVM start costs seconds), so this runs the same job master
and REST API as `sluice run` on an event loop in a background thread and hands back a handle.

    job = start_job(["pipeline.py", "--arg", "n=10", "--rest-port", "0"], SparkHost(context))
    requests.get(job.rest_url() + "/v1/job"); job.wait()

The REST token is made and stored as `sluice run` does (unless the arguments or SLUICE_REST_TOKEN give
one), so the CLI of the same user finds it; `BackgroundJob.token` hands it to the caller directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from sluice._runner import EXIT_USAGE, RestSettings, exit_code, job_from_args, rest_settings, serve_job
from sluice.cli import parser
from sluice.coordinator.jobmaster import JobMaster
from sluice.coordinator.validation import RestoreRefused
from sluice.hosts.base import TaskManagerHost

T = TypeVar("T")


class BackgroundJob:
    """A job running on its own event loop thread; thread-safe to query and to cancel."""

    def __init__(self, job: JobMaster, rest: RestSettings) -> None:
        self.job = job
        self._rest = rest
        self._url: str | None = None
        self._listening = threading.Event()
        # Set once the job's event loop runs (or the thread has ended): a cancel or call arriving
        # earlier waits for it instead of being lost.
        self._loop_ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._result: dict[str, Any] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._main, name=f"sluice-job-{job.config.job_id}", daemon=True
        )

    @property
    def job_id(self) -> str:
        return self.job.config.job_id

    @property
    def token(self) -> str:
        """The bearer token the job's REST API asks for (`Authorization: Bearer <token>`)."""
        return self._rest.auth.token

    def start(self) -> BackgroundJob:
        self._thread.start()
        return self

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as err:  # handed to whoever waits for the result
            self._error = err
        finally:
            self._listening.set()
            self._loop_ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_ready.set()

        def listening(url: str) -> None:
            self._url = url
            self._listening.set()

        if self._rest.port < 0:
            self._listening.set()
        self._result = (await serve_job(self.job, self._rest, listening)).to_json()

    def rest_url(self, timeout: float = 60.0) -> str:
        """The REST API's base URL, once it listens."""
        self._listening.wait(timeout)
        if self._url is None:
            raise RuntimeError(f"the job's REST API did not start: {self._error or 'not within the timeout'}")
        return self._url

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Waits for the job to end and returns its result (as stored in the job result store)."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"job {self.job_id} still running after {timeout}s")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def exit_code(self, timeout: float | None = None) -> int:
        """What `sluice run` would exit with: 0 FINISHED, 1 FAILED or CANCELED, 2 refused to start,
        3 SUSPENDED."""
        try:
            return exit_code(str(self.wait(timeout)["state"]))
        except (RestoreRefused, FileNotFoundError):
            return EXIT_USAGE

    def call(self, action: Callable[[JobMaster], Coroutine[Any, Any, T]], timeout: float | None = None) -> T:
        """Runs `action(job)` on the job's event loop (where the job master lives) and returns its result;
        how the REST API's handlers act on the job, without the HTTP."""
        self._loop_ready.wait(timeout)
        loop = self._loop
        if loop is None or self.done():
            raise RuntimeError(f"job {self.job_id} is not running")
        return asyncio.run_coroutine_threadsafe(action(self.job), loop).result(timeout)

    def cancel(self) -> None:
        """Cancels the job (as `sluice cancel` does; SIGTERM suspends instead); returns at once."""
        self._loop_ready.wait()
        loop = self._loop
        if loop is not None and not self.done():
            with contextlib.suppress(RuntimeError):  # the loop closed in between: the job has ended
                loop.call_soon_threadsafe(self.job.cancel)


def start_job(run_args: Sequence[str], host: TaskManagerHost, default_checkpoint_dir: str) -> BackgroundJob:
    """Starts the job that `sluice run RUN_ARGS...` describes, on `host`.

    `--host`, `--master` and `--spark-conf` in `run_args` are ignored: the host is the caller's. Raises
    `sluice._runner.UsageError` for a pipeline or arguments `sluice run` would refuse.
    """
    args = parser().parse_args(["run", *run_args])
    graph, config = job_from_args(args, default_checkpoint_dir, say=lambda message: None)
    rest = rest_settings(args, config)
    return BackgroundJob(JobMaster(graph, config, host), rest).start()

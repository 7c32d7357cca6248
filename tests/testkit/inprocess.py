"""Jobs whose job master runs in the test process, seen through their REST API like `SluiceJob`.

`InProcessJob` runs what `sluice run PIPELINE OPTIONS...` runs (`sluice._inprocess`) with a host the
test chooses: `ThreadJob` with TaskManagers on threads (`sluice.testing.ThreadHost`), the harness for
engine semantics that do not depend on hosting; `testkit.spark.SparkJob` with Spark barrier tasks.
No interpreter or JVM is started, so a job starts in a fraction of a second; what needs a real
process (SIGKILL of a TaskManager, the CLI's own output, leftover processes) stays with `SluiceJob`.
"""

from __future__ import annotations

import logging
import subprocess
import tempfile
from pathlib import Path

from sluice._inprocess import BackgroundJob, start_job
from sluice._runner import EXIT_USAGE, UsageError
from sluice.coordinator.validation import RestoreRefused
from sluice.hosts.base import TaskManagerHost
from sluice.testing import ThreadHost
from testkit.jobs import RestJob


class _Lines(logging.Handler):
    """The job master's log lines, as `sluice run` would print them on stderr."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter("sluice: %(levelname)s %(name)s: %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record) + "\n")


class InProcessJob(RestJob):
    """A job coordinated in this process, its TaskManagers on `host`."""

    def __init__(
        self,
        pipeline: str | Path,
        *options: str,
        host: TaskManagerHost,
        env: dict[str, str] | None = None,
    ) -> None:
        if env:
            raise ValueError("an in-process job shares the test's environment; it takes no env")
        self.host = host
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
            if result is None:
                try:
                    self.handle.wait(0)
                    outcome = f"job {self.handle.job_id} without a result"
                except (RestoreRefused, FileNotFoundError) as err:  # what `sluice run` says and exits 2 for
                    outcome = f"error: {err}"
                self._log.lines.append(f"sluice: {outcome}\n")
            else:
                self._log.lines.append(f"sluice: job {self.handle.job_id} {result.state}: {result.error}\n")
            self._detach()
        return code

    def kill(self) -> None:
        if not self.handle.done():
            self.handle.cancel()
        try:
            self.handle.exit_code(60)
        finally:
            self._detach()


class ThreadJob(InProcessJob):
    """A job coordinated in this process, its TaskManagers on threads of it (`sluice.testing`)."""

    def __init__(self, pipeline: str | Path, *options: str, env: dict[str, str] | None = None) -> None:
        super().__init__(pipeline, *options, host=ThreadHost(), env=env)

    def taskmanager_pids(self) -> list[int]:
        # Every TaskManager reports this process's pid: signalling it would end the test run itself.
        raise AssertionError("a ThreadJob's TaskManagers are threads of the test: use SluiceJob to kill one")


def run_in_process(
    pipeline: str | Path, *options: str, host: TaskManagerHost, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Runs a job on `host` to its end; the result looks like `testkit.jobs.run_job`'s finished process."""
    command = [str(pipeline), *options]
    try:
        job = InProcessJob(pipeline, *options, host=host)
    except UsageError as err:
        return subprocess.CompletedProcess(command, EXIT_USAGE, "", f"sluice: error: {err}\n")
    code = job.wait(timeout)
    return subprocess.CompletedProcess(command, code, "", job.stderr)


def run_thread_job(
    pipeline: str | Path, *options: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """`run_in_process` with TaskManagers on threads."""
    return run_in_process(pipeline, *options, host=ThreadHost(), timeout=timeout)

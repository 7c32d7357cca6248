"""TaskManagers as one Spark barrier stage: one long-running task per TaskManager, one stage per attempt.

The coordinator stays in this process, the Spark driver. For every attempt the host submits, from a
background thread, `parallelize([], n).barrier().mapPartitions(...)` under a job group of its
own; each task runs a TaskManager that registers with the coordinator at the address carried in the
task's closure. Barrier mode gang-schedules the tasks (all start together or none) and fails the whole
stage when one fails; the Spark settings in `_settings.py` keep Spark from retrying anything, so the
coordinator's restart strategy alone decides what happens next.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError, Py4JJavaError

from sluice._waiting import within
from sluice.hosts.spark._failure import describe_failure
from sluice.hosts.spark._launch_file import LaunchFiles
from sluice.hosts.spark._sealed_launch import can_seal, seal, secret_files
from sluice.hosts.spark._settings import is_local
from sluice.hosts.spark._task import run_barrier_task, run_barrier_task_from_file, run_barrier_task_sealed
from sluice.hosts.spark._warm_up import start_worker_daemon
from sluice.transport.secret import TaskManagerLaunch

log = logging.getLogger(__name__)


@dataclass
class _Stage:
    """The barrier stage of one attempt, as seen from the event loop."""

    group: str
    count: int
    done: asyncio.Future[str | None]
    """Resolves when the Spark job ends: None when every TaskManager exited normally, else why not."""
    stopping: bool = False
    thread: threading.Thread | None = field(default=None, repr=False)


class SparkHost:
    """Runs the TaskManagers of a job in a SparkContext that the caller owns (and stops)."""

    name = "spark"

    def __init__(
        self,
        context: Any,
        *,
        control_host: str = "127.0.0.1",
        taskmanager_bind_host: str = "127.0.0.1",
        stop_timeout_s: float = 60.0,
        warm_up: bool = False,
    ) -> None:
        """`control_host`: where the coordinator listens, reachable from every executor (127.0.0.1 in
        local mode, the pod IP on Kubernetes). `taskmanager_bind_host`: the data address of a
        TaskManager where its executor does not say (on Kubernetes the executor pod IP wins).
        `warm_up`: start PySpark's worker daemon now with an empty task (`_warm_up.py`); the first
        TaskManager stage is submitted once that task has ended."""
        self.context = context
        self.control_host = control_host
        self.taskmanager_bind_host = taskmanager_bind_host
        self.stop_timeout_s = stop_timeout_s
        self._id = uuid.uuid4().hex[:8]
        self._stage: _Stage | None = None
        # Spark ships a task's closure as a broadcast block: the job secret must not be readable in it.
        # On this machine it goes by file; elsewhere sealed under Spark's own secret file, if any.
        local = is_local(str(context.master))
        self._launch_files = LaunchFiles() if local else None
        self._secret_files = None if local or not can_seal() else secret_files(context.getConf())
        self._warm_up = start_worker_daemon(context) if warm_up else None

    def control_bind_host(self) -> str:
        return self.control_host

    def job_group(self, attempt: int) -> str:
        return f"sluice-{self._id}-attempt-{attempt}"

    async def start(self, count: int, launch: TaskManagerLaunch, attempt: int) -> None:
        if self._stage is not None:
            await self.stop()
        loop = asyncio.get_running_loop()
        stage = _Stage(self.job_group(attempt), count, loop.create_future())
        stage.thread = threading.Thread(
            target=self._run_stage,
            args=(stage, launch, attempt, loop),
            name=stage.group,
            daemon=True,
        )
        self._stage = stage
        stage.thread.start()

    def _run_stage(
        self, stage: _Stage, launch: TaskManagerLaunch, attempt: int, loop: asyncio.AbstractEventLoop
    ) -> None:
        """The background thread: blocks in `collect()` for as long as the TaskManagers run."""
        failure: str | None = None
        launch_file: str | None = None
        try:
            # Job groups are thread-local properties in PySpark's pinned-thread mode: set it here.
            self.context.setJobGroup(
                stage.group,
                f"Sluice: {stage.count} TaskManager(s), attempt {attempt}",
                interruptOnCancel=True,
            )
            self._wait_warm_up(stage)
            if stage.stopping:
                failure = "stopped before the stage was submitted"
            else:
                body, launch_file = self._task_body(launch, attempt)
                # n empty partitions: not `range(n)`, whose partitions PySpark reads to their end before
                # calling `body`, waiting for the JVM to send them (38 ms of a first stage's start).
                rdd = self.context.parallelize([], stage.count)
                rdd.barrier().mapPartitions(body).collect()
        except Exception as err:
            failure = describe_failure(err)
        finally:
            if launch_file is not None:
                # The stage has ended: none of its tasks reads the file any more.
                Path(launch_file).unlink(missing_ok=True)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting any more
            loop.call_soon_threadsafe(_settle, stage.done, failure)

    def _wait_warm_up(self, stage: _Stage) -> None:
        """Until the warm-up task has ended: submitted together, the TaskManagers' barrier stage could
        take every slot first and leave the warm-up task waiting until the job's end (seen)."""
        warm_up = self._warm_up
        while warm_up is not None and warm_up.is_alive() and not stage.stopping:
            warm_up.join(0.1)
        self._warm_up = None

    def _task_body(self, launch: TaskManagerLaunch, attempt: int) -> tuple[Any, str | None]:
        """The barrier task's function, and the launch file it reads (None: the settings are in it)."""
        if self._launch_files is not None:
            # Local workers are this user's processes: the closure holds only the path of a private
            # file with the launch settings, so a broadcast block read by anyone would hold no secret.
            path = self._launch_files.write(attempt, launch)
            return functools.partial(run_barrier_task_from_file, path, self.taskmanager_bind_host), path
        if self._secret_files is not None:
            # Executors in other pods, each with the job's Spark secret mounted (the operator's doing).
            driver_file, executor_file = self._secret_files
            sealed = seal(launch, driver_file)
            body = functools.partial(
                run_barrier_task_sealed, executor_file, sealed, self.taskmanager_bind_host
            )
            return body, None
        # No secret file to seal with (Spark drew its own secret): the launch settings travel inside
        # the task's closure, over Spark's own channel, authenticated (spark.authenticate) and possibly
        # encrypted (spark.network.crypto.enabled).
        return functools.partial(run_barrier_task, launch.encode(), self.taskmanager_bind_host), None

    async def wait_lost(self) -> str:
        stage = self._stage
        if stage is None:
            await asyncio.Event().wait()
        assert stage is not None
        failure = await asyncio.shield(stage.done)
        if stage.stopping:
            # Ended because the coordinator stopped it: that is not a lost TaskManager.
            await asyncio.Event().wait()
        if failure is None:
            return (
                f"the TaskManager stage {stage.group} ended while the job was running: "
                "every TaskManager task returned"
            )
        return f"the TaskManager stage {stage.group} failed: {failure}"

    async def stop(self, grace_s: float = 0.0) -> None:
        stage, self._stage = self._stage, None
        if stage is None:
            return
        stage.stopping = True
        if grace_s > 0:
            # TaskManagers that were told to shut down end their tasks, and the Spark job completes.
            with contextlib.suppress(TimeoutError):
                await within(asyncio.shield(stage.done), grace_s)
        deadline = time.monotonic() + self.stop_timeout_s
        try:
            while not stage.done.done() and time.monotonic() < deadline:
                # Repeated: the background thread may submit the job just after a first cancel.
                await asyncio.to_thread(self.context.cancelJobGroup, stage.group)
                with contextlib.suppress(TimeoutError):
                    await within(asyncio.shield(stage.done), 1.0)
            # The Spark job has ended, but killed tasks may still be winding down (Spark kills a Python
            # worker that ignores the interrupt after spark.python.task.killTimeout). Nothing may be
            # left running when stop() returns: the next attempt needs the slots, and a stale
            # TaskManager must not linger.
            # A job that succeeded had every task return: only a cancelled or failed one can leave tasks
            # that Spark's status store does not count yet (_status_current).
            succeeded = stage.done.done() and stage.done.result() is None
            left = await asyncio.to_thread(self._wait_tasks_ended, stage.group, deadline, not succeeded)
        except Py4JError as err:
            # The driver JVM is shutting down or gone (a pod's SIGTERM can reach it along with us): its
            # executors, and the TaskManagers in their Python workers, end with it.
            log.warning("the Spark driver is gone, its TaskManagers end with it: %s", _describe(err))
            return
        if not stage.done.done() or left:
            log.warning(
                "Spark job group %s did not end within %.0fs (%d task(s) still running)",
                stage.group,
                self.stop_timeout_s,
                left,
            )

    def _wait_tasks_ended(self, group: str, deadline: float, stale_low: bool) -> int:
        tracker = self.context.statusTracker()
        if stale_low:
            # Counts read before the status store has taken in the stage's end can be 0 while killed
            # tasks still wind down (_status_current says why). Once it has, the count is current and
            # its fall to 0 is written: one drain is enough.
            _status_current(self.context, deadline)
        while True:
            active = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job is not None else ():
                    info = tracker.getStageInfo(stage_id)
                    active += info.numActiveTasks if info is not None else 0
            if active == 0 or time.monotonic() >= deadline:
                return active
            time.sleep(0.1)


def _status_current(context: Any, deadline: float) -> None:
    """Waits, until `deadline` at most, for Spark's listener bus to hand every event posted so far to its
    listeners.

    `statusTracker()` reads a store that a listener writes on a thread of its own, and that listener
    writes a stage's count of running tasks at most once per `spark.ui.liveUpdate.period` (100 ms) as
    its tasks start: a stage whose tasks all started within that time of its submission is stored
    with 0 running until something forces a write. The stage's end forces one, with the true count; it
    was posted before the job's end reached this process, so once the bus has emptied the count is the
    current one, and it is written again when it falls to 0. Read before that, a cancelled stage whose
    tasks were still ending looked finished: stop() returned, and then the store counted running tasks
    (tests/integration/spark/test_spark_host.py, in a full run of the suite)."""
    remaining_ms = int((deadline - time.monotonic()) * 1000)
    # A TimeoutException (a Py4JJavaError) says events kept coming until the deadline: the caller then
    # reads what is stored and, past the deadline, reports what it still counts.
    with contextlib.suppress(Py4JJavaError):
        # Documented by Spark for tests; private to Spark's Scala code, public to the JVM and py4j.
        context._jsc.sc().listenerBus().waitUntilEmpty(max(remaining_ms, 1))


def _settle(future: asyncio.Future[str | None], failure: str | None) -> None:
    if not future.done():
        future.set_result(failure)


def _describe(err: BaseException) -> str:
    # No call into the JVM here: it may be the thing that is gone (py4j's str() can fail then too).
    try:
        text = str(err).strip()
    except Exception:
        text = ""
    return text.splitlines()[0] if text else type(err).__name__

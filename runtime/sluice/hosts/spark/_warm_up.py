"""PySpark's worker daemon started while the coordinator starts, not inside the job's first attempt.

Spark starts an executor's Python worker daemon (`_daemon.py`: an interpreter that imports PySpark's
worker and the TaskManager before it forks) on the first Python task the executor runs. Without a
warm-up that task is a TaskManager of the first attempt: the daemon's start lies between the
coordinator submitting the TaskManager stage and the first TaskManager registering, one start-up after
the JVM's, while the coordinator's own start (its REST API, the storage round trips) has the other core
of a small machine to itself. One empty task submitted as soon as the SparkContext exists starts the
daemon beside that work instead (bench/README.md, "Where the Spark host loses time").

Only for `local[N]`: its one executor is up with the SparkContext, so one task warms it. On a cluster
executors come and go and a task warms only the one it lands on. And only where the driver JVM has no
daemon zygote (`_zygote.py`, which `start_spark` starts for local masters): with one, the daemon starts
as a fork, and an empty task would only add a job to the attempt's start.

`SparkHost` submits its first TaskManager stage only once the task has ended: a barrier stage
submitted beside it may take every slot first and leave the task waiting, the daemon unstarted, until
the job ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from typing import Any

log = logging.getLogger(__name__)

JOB_GROUP = "sluice-warm-up"


def no_records(_partition: Iterable[int]) -> Iterator[int]:
    """The warm-up task's body: nothing. Importable, so its closure is a reference to this function."""
    return iter(())


def start_worker_daemon(context: Any) -> threading.Thread:
    """Submits the warm-up task from a background thread (returned, already started)."""
    thread = threading.Thread(target=_run, args=(context,), name=JOB_GROUP, daemon=True)
    thread.start()
    return thread


def _run(context: Any) -> None:
    try:
        # Job groups are thread-local properties in PySpark's pinned-thread mode: set it here.
        context.setJobGroup(JOB_GROUP, "Sluice: start the Python worker daemon", interruptOnCancel=True)
        context.parallelize([0], 1).mapPartitions(no_records).collect()
    except Exception as err:
        # Only a head start is lost: the TaskManager stage starts the daemon itself, and reports
        # whatever keeps it from starting. (The SparkContext stopped early, say, on a usage error.)
        log.debug("the warm-up task did not run: %s", err)

"""What runs inside a Spark barrier task: one TaskManager, from registration until the job ends.

This module is imported in Spark's Python workers (locally, and in executor pods on Kubernetes); it
needs only the TaskManager and PySpark's task context.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sluice.transport.secret import TaskManagerLaunch

# Spark's Kubernetes backend puts the executor pod's IP into the executor's environment; the Python
# worker inherits it. The TaskManager's data port listens there so that the other pods can reach it.
POD_IP_ENV = "SPARK_EXECUTOR_POD_IP"


class TaskManagerExited(RuntimeError):
    """A TaskManager ended without being told to: the barrier task fails, and with it the stage."""


def taskmanager_bind_host(default: str) -> str:
    return os.environ.get(POD_IP_ENV) or default


def run_barrier_task(launch_json: str, default_bind_host: str, partition: Iterable[object]) -> Iterator[int]:
    """The body of one barrier task: TaskManager number `partitionId()` until the coordinator ends it.

    The launch settings travel in the closure (executors elsewhere with no Spark secret file to seal
    them with, over Spark's authenticated channel)."""
    from sluice.transport.secret import TaskManagerLaunch

    return _run(TaskManagerLaunch.decode(launch_json), default_bind_host, partition)


def run_barrier_task_from_file(
    launch_file: str, default_bind_host: str, partition: Iterable[object]
) -> Iterator[int]:
    """`run_barrier_task` with the launch settings in a private file of this machine (`local[N]`)."""
    from sluice.hosts.spark._launch_file import read_launch_file

    return _run(read_launch_file(launch_file), default_bind_host, partition)


def run_barrier_task_sealed(
    secret_file: str, sealed: bytes, default_bind_host: str, partition: Iterable[object]
) -> Iterator[int]:
    """`run_barrier_task` with the launch settings sealed under the Spark secret file (Kubernetes)."""
    from sluice.hosts.spark._sealed_launch import unseal

    return _run(unseal(sealed, secret_file), default_bind_host, partition)


def _run(launch: TaskManagerLaunch, default_bind_host: str, partition: Iterable[object]) -> Iterator[int]:
    from pyspark import BarrierTaskContext

    from sluice.engine._collector import tune_for_records
    from sluice.engine.taskmanager import run_taskmanager
    from sluice.hosts.spark._worker_path import drop_spark_zips_from_environment

    # Only this worker's environment, which its TaskManager's children (compaction processes) inherit.
    drop_spark_zips_from_environment(os.environ, sys.path)
    # This Python worker was forked for this one task and ends with it (spark.python.worker.reuse=false):
    # the TaskManager's collector settings are its own.
    tune_for_records()
    index = BarrierTaskContext.get().partitionId()
    coordinator = launch.coordinator
    code = run_taskmanager(launch, index, taskmanager_bind_host(default_bind_host))
    if code != 0:
        # Failing the task fails the whole barrier stage at once: Spark kills the other TaskManagers
        # instead of leaving them waiting for a peer that is gone.
        raise TaskManagerExited(
            f"TaskManager {index} (pid {os.getpid()}) lost its connection to the coordinator at "
            f"{coordinator} (exit code {code})"
        )
    # The partition is empty, and the TaskManager started without waiting for the JVM to send it.
    # Read to its end now, as PySpark expects of a task that succeeded: the worker's protocol with
    # the JVM goes on after it.
    for _ in partition:
        pass
    yield code

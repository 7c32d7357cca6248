"""The host `sluice run` asks for: `--host processes`, or `--host spark` with its master and settings."""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sluice._private_dirs import PrivateDirectoryError, scratch_directory
from sluice.hosts.base import HostSetupError, TaskManagerHost
from sluice.hosts.processes import ProcessHost

# Where Spark's log goes unless --spark-log says otherwise: this user's scratch directory under $TMPDIR.
SPARK_LOG_DIR = "spark-logs"


@dataclass
class Hosting:
    host: TaskManagerHost
    close: Callable[[], None]
    """Releases what the host holds (the SparkContext) once the job has ended."""


def make_host(
    args: argparse.Namespace,
    taskmanagers: int,
    job_id: str,
    job_name: str,
    say: Callable[[str], None],
    process_host: ProcessHost | None = None,
) -> Hosting:
    """The host for `sluice run` arguments (`--host`, `--master`, `--spark-conf`, `--spark-log`).

    `process_host`, for `--host processes`: one whose first TaskManagers were started early.
    """
    if args.host == "processes":
        spark_only = (
            ("--master", args.master),
            ("--spark-conf", args.spark_conf),
            ("--spark-log", args.spark_log),
        )
        given = [flag for flag, value in spark_only if value]
        if given:
            raise HostSetupError(f"{' and '.join(given)} apply to --host spark only, not --host processes")
        host = process_host or ProcessHost()
        return Hosting(host, host.discard_early)
    return _spark_host(args, taskmanagers, job_id, job_name, say)


def _spark_host(
    args: argparse.Namespace, taskmanagers: int, job_id: str, job_name: str, say: Callable[[str], None]
) -> Hosting:
    from sluice.hosts import spark

    master = args.master or spark.local_master(taskmanagers)
    cluster: dict[str, str] | None = None
    control_host = taskmanager_host = "127.0.0.1"
    if master.startswith("k8s://"):
        pod = spark.coordinator_pod_from_env(os.environ)
        cluster = spark.kubernetes_conf(pod, taskmanagers)
        # TaskManagers in executor pods reach the coordinator at its pod IP; each listens on its own
        # pod IP (Spark tells the executor, see _task.py).
        control_host, taskmanager_host = pod.pod_ip, "0.0.0.0"
    elif not spark.is_local(master):
        overrides = dict(args.spark_conf)
        control_host = overrides.get("spark.driver.host") or socket.gethostbyname(socket.gethostname())
        taskmanager_host = "0.0.0.0"
    log = spark.SparkLog(Path(args.spark_log) if args.spark_log else _default_log_dir() / f"{job_id}.log")
    settings = spark.spark_settings(
        taskmanagers,
        master,
        f"sluice {job_name}",
        dict(args.spark_conf),
        log4j_file=str(log.config),
        cluster=cluster,
    )
    if master.startswith("k8s://") and "spark.kubernetes.container.image" not in settings:
        raise HostSetupError(
            "on Kubernetes Spark needs the TaskManager image: "
            "--spark-conf spark.kubernetes.container.image=IMAGE"
        )
    say(f"Spark {master}, {taskmanagers} TaskManager(s); Spark's log: {log.path}")
    context = spark.start_spark(settings, log)
    host = spark.SparkHost(
        context,
        control_host=control_host,
        taskmanager_bind_host=taskmanager_host,
        # A local JVM without a daemon zygote (_zygote.py) has no Python worker daemon yet: start it
        # now, beside the coordinator's start. With the zygote, the daemon costs a fork and an empty
        # task would only add a job to the attempt's start (bench/README.md, "The daemon zygote").
        warm_up=spark.is_local(master) and not spark.daemon_zygote_running(),
    )
    return Hosting(host, lambda: spark.stop_spark(context))


def _default_log_dir() -> Path:
    try:
        return scratch_directory(SPARK_LOG_DIR)
    except PrivateDirectoryError as err:
        raise HostSetupError(f"{err} (or give --spark-log FILE)") from err

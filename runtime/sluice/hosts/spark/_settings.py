"""The Spark configuration of a Sluice job: failover semantics, a quiet and quick local JVM, user overrides.

Every setting Sluice chooses is here with its reason. User settings (`--spark-conf`) are applied last,
except that the settings failover depends on cannot be weakened: they are checked, not just defaulted.
"""

from __future__ import annotations

import os
import re

from sluice.hosts.spark._errors import SparkSetupError

# Failover belongs to the coordinator (docs/architecture.md, "Failure and restart"): a failed TaskManager
# fails the barrier stage, the job master stops the attempt and submits a new stage restoring the latest
# checkpoint. Spark must not retry anything on its own: a retried task or stage would start TaskManagers
# the coordinator does not expect, against an attempt it has already given up.
FAILOVER_SETTINGS: dict[str, str] = {
    # A failed TaskManager task is not re-run alone (the default is 4 attempts outside local mode).
    "spark.task.maxFailures": "1",
    # A failed barrier stage is aborted instead of resubmitted. Spark already aborts a failed barrier
    # *result* stage (which the TaskManager stage is) rather than resubmit it; any other failed stage
    # it resubmits up to maxConsecutiveAttempts times (default 4), bounded overall by maxAttempts.
    # Pinned to 1 so that no change of stage shape or Spark version can bring retries back.
    "spark.stage.maxConsecutiveAttempts": "1",
    "spark.stage.maxAttempts": "1",
    # No speculative second copy of a TaskManager; it would register twice.
    "spark.speculation": "false",
    # Barrier stages need a fixed set of slots; Spark refuses barrier jobs under dynamic allocation.
    "spark.dynamicAllocation.enabled": "false",
}


# Settings for how TaskManagers live inside Spark's Python workers.
WORKER_SETTINGS: dict[str, str] = {
    # A TaskManager's worker process ends with its task, so no process that held a TaskManager (its
    # memory, its sockets) outlives it in Spark's idle-worker pool.
    "spark.python.worker.reuse": "false",
    # Workers fork from a daemon that has the runtime imported already (see _daemon.py): a restart
    # does not pay the imports again.
    "spark.python.daemon.module": "sluice_spark_daemon",
    # Killing a task (cancel, or a failed peer) interrupts its thread, and a Python worker that does
    # not end by itself is killed this long after; TaskManagers are told to shut down first and
    # normally exit before that.
    "spark.python.task.killTimeout": "2s",
    # On a cluster, executors may still be starting when the stage is submitted: check for enough
    # slots every second (default 15 s) for up to 10 minutes instead of failing the job.
    "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "1s",
    "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "600",
}

# Spark's RPC and block transfer on `local[N]`: authenticated with a secret Spark draws for this run
# (it never leaves the driver JVM), and encrypted too. The local executor shares the driver JVM, so no
# job traffic crosses Spark's transport: neither costs W1 anything that could be measured
# (bench/README.md, "What Spark's authentication costs").
LOCAL_SECURITY_SETTINGS: dict[str, str] = {
    "spark.authenticate": "true",
    "spark.network.crypto.enabled": "true",
}

# A quiet JVM that starts as fast as Spark allows. There are no shuffle or SQL settings to shrink: the
# only job is the TaskManager stage, which shuffles nothing, and no SQL session is created at all
# (creating one costs seconds of class loading that the RDD API does not need).
STARTUP_SETTINGS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.eventLog.enabled": "false",
    # The driver only schedules; records never pass through the JVM.
    "spark.driver.memory": "512m",
}

# JVM flags for the driver: start-up time matters (the JVM only schedules one long stage), peak
# throughput of JIT-compiled code does not. C1 only and the serial collector start faster and use fewer
# threads on small machines. Measured on 2 cores, JVM and SparkContext ready: 3.9-5.5 s with Spark's
# defaults, 3.6 s with these flags, 1.6-1.7 s with these and the class-data archive (_class_data.py).
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# An executor's JVM does even less: it fetches one task per attempt, starts PySpark's worker daemon and
# sends heartbeats; records never pass through it. The driver's flags halve the CPU an executor pod
# burns starting up (bench/README.md, "Executor JVMs"). Local masters have no executor JVM of their own.
EXECUTOR_JAVA_OPTIONS = DRIVER_JAVA_OPTIONS

# Settings that hold lists: a user's value is added to Sluice's (separator given), not put in its place,
# so that --spark-conf can add JVM flags, a feature step or a class path entry without losing Sluice's
# (the quick-start flags and log configuration, the pod naming step and its jar).
LIST_SETTINGS: dict[str, str] = {
    "spark.driver.extraJavaOptions": " ",
    "spark.executor.extraJavaOptions": " ",
    "spark.kubernetes.executor.pod.featureSteps": ",",
    "spark.driver.extraClassPath": os.pathsep,
}

_LOCAL = re.compile(r"^local(?:\[(\*|\d+)(?:\s*,\s*\d+)?\])?$")


def local_master(taskmanagers: int) -> str:
    return f"local[{taskmanagers}]"


def is_local(master: str) -> bool:
    """Spark in this process (`local`, `local[N]`, `local[*]`, `local[N,F]`)."""
    return master == "local" or master.startswith("local[")


def is_kubernetes(master: str) -> bool:
    return master.startswith("k8s://")


def local_slots(master: str, cpu_count: int) -> int:
    """Task slots of a local master: `local` 1, `local[N]` N, `local[*]` the machine's cores."""
    match = _LOCAL.match(master.replace(" ", ""))
    if match is None:
        raise SparkSetupError(
            f"--master {master!r} is not a local master: write local, local[N], local[*] or local[N,F]"
        )
    count = match.group(1)
    if count is None:
        return 1
    return cpu_count if count == "*" else int(count)


def spark_settings(
    taskmanagers: int,
    master: str,
    app_name: str,
    overrides: dict[str, str] | None = None,
    log4j_file: str | None = None,
    cluster: dict[str, str] | None = None,
) -> dict[str, str]:
    """The whole Spark configuration of a job with `taskmanagers` TaskManagers on `master`.

    Layers, later ones winning: Sluice's settings, the cluster's (`kubernetes_conf`), `master`, then the
    user's `overrides` (added to, for the LIST_SETTINGS); the failover settings are checked afterwards.
    """
    settings = {"spark.app.name": app_name, **FAILOVER_SETTINGS, **WORKER_SETTINGS, **STARTUP_SETTINGS}
    if is_local(master):
        # Everything stays on the loopback interface: no interface scan, no warning about it, and no
        # port open to the network.
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    if is_local(master):
        settings.update(LOCAL_SECURITY_SETTINGS)
    settings.update(cluster or {})
    settings["spark.master"] = master
    # Any process that reaches the driver's ports could otherwise fetch blocks (the task closure among
    # them) or join the application: another local user on `local[N]`, any pod on Kubernetes.
    settings.setdefault("spark.authenticate", "true")
    java_options = [DRIVER_JAVA_OPTIONS]
    if log4j_file is not None:
        java_options.append(f"-Dlog4j2.configurationFile=file:{log4j_file}")
    settings["spark.driver.extraJavaOptions"] = " ".join(java_options)
    if not is_local(master):
        settings["spark.executor.extraJavaOptions"] = EXECUTOR_JAVA_OPTIONS
    user = dict(overrides or {})
    for key, separator in LIST_SETTINGS.items():
        if key in user and settings.get(key):
            user[key] = f"{settings[key]}{separator}{user[key]}"
    settings.update(user)
    if "spark.executor.cores" in settings and "spark.task.cpus" not in user:
        # A TaskManager claims its executor's every core, so that no executor hosts two of them.
        settings["spark.task.cpus"] = settings["spark.executor.cores"]
    _check(settings, taskmanagers)
    return settings


def _check(settings: dict[str, str], taskmanagers: int) -> None:
    for key, required in FAILOVER_SETTINGS.items():
        if settings[key] != required:
            raise SparkSetupError(
                f"--spark-conf {key}={settings[key]} is not allowed: Sluice needs {key}={required} "
                "(failover is the coordinator's: Spark must not retry TaskManagers on its own)"
            )
    master = settings["spark.master"]
    if settings.get("spark.authenticate") != "true":
        who = "any pod" if is_kubernetes(master) else "any process (another user's, too)"
        raise SparkSetupError(
            f"--spark-conf spark.authenticate={settings.get('spark.authenticate')} is not allowed: "
            f"without it {who} that reaches the coordinator's Spark ports could fetch the job's blocks "
            "or join the job and run code in it. Leave spark.authenticate on "
            "(spark.network.crypto.enabled=true also encrypts the traffic)"
        )
    task_cpus = _whole(settings, "spark.task.cpus", "1")
    if is_local(master):
        slots = local_slots(master, os.cpu_count() or 1) // task_cpus
        if slots < taskmanagers:
            raise SparkSetupError(
                f"--master {master} has {slots} task slot(s) but the job needs {taskmanagers} TaskManagers "
                f"running at once (one barrier task each): use --master local[{taskmanagers * task_cpus}] "
                "or fewer --taskmanagers"
            )
    elif "spark.executor.instances" in settings:
        per_executor = _whole(settings, "spark.executor.cores", "1") // task_cpus
        slots = per_executor * _whole(settings, "spark.executor.instances", "1")
        if slots < taskmanagers:
            raise SparkSetupError(
                f"spark.executor.instances={settings['spark.executor.instances']} with {per_executor} task "
                f"slot(s) each cannot run {taskmanagers} TaskManagers at once: give at least "
                f"{taskmanagers} executor instances"
            )


def _whole(settings: dict[str, str], key: str, default: str) -> int:
    value = settings.get(key, default)
    try:
        number = int(value)
    except ValueError:
        raise SparkSetupError(f"{key}={value!r} is not a whole number") from None
    if number < 1:
        raise SparkSetupError(f"{key}={value!r} must be at least 1")
    return number

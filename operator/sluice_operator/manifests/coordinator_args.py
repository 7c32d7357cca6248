"""The one place that knows how the coordinator container calls the runtime.

The container runs the image entrypoint in `coordinator` mode, which runs `sluice run` with the rest of
the arguments (docs/reference/cli.md). Pod-dependent values use Kubernetes' `$(VAR)` expansion of
container args, which the kubelet resolves from the container's environment (POD_NAME and POD_IP come
from the downward API, KUBERNETES_SERVICE_HOST/PORT from the kubelet itself).
"""

from __future__ import annotations

import math
import re

from sluice_operator.models import Resources

from ._common import rest_service_name, taskmanager_prefix
from .hardening import SPARK_LOCAL_DIR
from .run import Run
from .secret import REST_TOKEN_FILE, SPARK_SECRET_FILE, STATE_KEY_FILE

TASKMANAGER_TEMPLATE_DIR = "/etc/sluice"
TASKMANAGER_TEMPLATE_FILE = "taskmanager-pod.yaml"
TASKMANAGER_TEMPLATE_PATH = f"{TASKMANAGER_TEMPLATE_DIR}/{TASKMANAGER_TEMPLATE_FILE}"
TASKMANAGER_CONTAINER = "taskmanager"
COORDINATOR_CONTAINER = "coordinator"
DRIVER_PORT = 7078
BLOCK_MANAGER_PORT = 7079

# Spark settings the operator owns: a StreamJob's sparkConf may not override them.
OPERATOR_SPARK_KEYS = frozenset(
    {
        "spark.master",
        "spark.submit.deployMode",
        "spark.kubernetes.namespace",
        "spark.kubernetes.driver.pod.name",
        "spark.driver.host",
        "spark.driver.bindAddress",
        "spark.driver.port",
        "spark.blockManager.port",
        "spark.kubernetes.executor.podNamePrefix",
        "spark.kubernetes.executor.podTemplateFile",
        "spark.kubernetes.executor.podTemplateContainerName",
        "spark.kubernetes.container.image",
        "spark.executor.instances",
        "spark.dynamicAllocation.enabled",
        # Spark's RPC authentication: the secret is the job's Secret, mounted as a file in every pod.
        *(
            "spark.authenticate.secret",
            "spark.authenticate.secret.file",
            "spark.authenticate.secret.driver.file",
            "spark.authenticate.secret.executor.file",
        ),
    }
)
# A sparkConf may repeat this value, never change it.
SPARK_AUTH_KEY = "spark.authenticate"

# Every REST call needs the token, reads too: job state and checkpoint paths are the operator's business.
REST_AUTH = "all"

_MEMORY_UNITS = {
    "": 1 / 2**20,
    "k": 1e3 / 2**20,
    "M": 1e6 / 2**20,
    "G": 1e9 / 2**20,
    "T": 1e12 / 2**20,
    "Ki": 1 / 1024,
    "Mi": 1,
    "Gi": 1024,
    "Ti": 1024**2,
}
_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")


def _rest_service_names(run: Run) -> list[str]:
    service, namespace = rest_service_name(run.owner.name), run.owner.namespace
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def sluice_run_args(run: Run) -> list[str]:
    """Arguments after the entrypoint mode: `coordinator <these>` becomes `sluice run <these>`."""
    spec = run.spec
    pipeline = spec.pipeline.file if spec.pipeline.file is not None else spec.pipeline.module
    assert pipeline is not None  # the model requires one of them
    args = [pipeline]
    for key, value in spec.pipeline.args.items():
        args += ["--arg", f"{key}={run.expand(value)}"]
    args += [
        "--job-id",
        run.job_id,
        "--parallelism",
        str(spec.parallelism),
        "--taskmanagers",
        str(spec.task_managers.replicas),
        "--checkpoint-dir",
        run.checkpoint_dir,
        "--checkpoint-interval",
        spec.checkpoints.interval,
        "--checkpoint-timeout",
        spec.checkpoints.timeout,
        "--checkpoints-retained",
        str(spec.checkpoints.retained),
        "--min-pause",
        spec.checkpoints.min_pause,
        "--restart-strategy",
        spec.restart_strategy.kind.value,
        "--restart-delay",
        spec.restart_strategy.delay,
        "--restart-max-delay",
        spec.restart_strategy.max_delay,
        "--max-restarts",
        str(spec.restart_strategy.max_restarts),
        "--restart-reset-after",
        spec.restart_strategy.reset_after,
        "--state-backend",
        spec.state_backend.value,
        "--heartbeat-timeout",
        spec.failure_detection.heartbeat_timeout,
        "--tolerable-checkpoint-failures",
        "unlimited"
        if spec.failure_detection.tolerable_checkpoint_failures is None
        else str(spec.failure_detection.tolerable_checkpoint_failures),
        "--savepoint-dir",
        run.savepoint_dir,
        # The job's savepoint and checkpoint directories are allowed by default; these are the others.
        *(a for prefix in run.config.allowed_savepoint_prefixes for a in ("--savepoint-dir-allow", prefix)),
        "--rest-port",
        str(run.config.coordinator_rest_port),
        "--rest-host",
        "0.0.0.0",
        "--rest-token-file",
        REST_TOKEN_FILE,
        "--rest-auth",
        REST_AUTH,
        # The names the operator (and anyone in the cluster) calls the REST Service by; a Host header
        # naming anything else is refused (DNS rebinding).
        *(a for name in _rest_service_names(run) for a in ("--rest-allowed-host", name)),
        "--state-key-file",
        STATE_KEY_FILE,
        "--host",
        "spark",
        "--master",
        "k8s://https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)",
    ]
    if run.restore_from is not None:
        args += ["--from-savepoint", run.restore_from]
        if spec.allow_non_restored_state:
            args.append("--allow-non-restored-state")
        if spec.trust_savepoint:
            args.append("--trust-savepoint")
    if not spec.checkpoints.after_tasks_finish:
        args.append("--no-checkpoints-after-tasks-finish")
    for key, value in spark_conf(run).items():
        args += ["--spark-conf", f"{key}={value}"]
    return args


def spark_conf(run: Run) -> dict[str, str]:
    """Spark settings for Spark-on-Kubernetes client mode, the driver being the coordinator pod."""
    spec = run.spec
    conf = executor_resources(spec.task_managers.resources)
    conf.update(spec.spark_conf)
    conf.update(
        {
            "spark.kubernetes.namespace": run.owner.namespace,
            "spark.kubernetes.driver.pod.name": "$(POD_NAME)",
            "spark.driver.host": "$(POD_IP)",
            # Spark >= 4.1 gives executors the bind address as the driver's address: the pod IP.
            "spark.driver.bindAddress": "$(POD_IP)",
            "spark.driver.port": str(DRIVER_PORT),
            "spark.blockManager.port": str(BLOCK_MANAGER_PORT),
            "spark.kubernetes.executor.podNamePrefix": taskmanager_prefix(run.owner.name),
            "spark.kubernetes.executor.podTemplateFile": TASKMANAGER_TEMPLATE_PATH,
            "spark.kubernetes.executor.podTemplateContainerName": TASKMANAGER_CONTAINER,
            "spark.kubernetes.container.image": spec.image,
            "spark.executor.instances": str(spec.task_managers.replicas),
            "spark.dynamicAllocation.enabled": "false",
            # Only pods holding the job's secret join its Spark application. The executor file being
            # set is also what keeps Spark from putting the secret into executor pods as a literal
            # SPARK_AUTHENTICATE_SECRET env value; the generic file is what an executor reads while it
            # fetches the driver's settings, before it knows it is an executor.
            SPARK_AUTH_KEY: "true",
            "spark.authenticate.secret.file": SPARK_SECRET_FILE,
            "spark.authenticate.secret.driver.file": SPARK_SECRET_FILE,
            "spark.authenticate.secret.executor.file": SPARK_SECRET_FILE,
        }
    )
    # The root file system is read-only; Spark also gives each executor an emptyDir at this path.
    conf.setdefault("spark.local.dir", SPARK_LOCAL_DIR)
    pull_policy = spec.image_pull_policy or run.config.image_pull_policy
    if pull_policy is not None:
        conf.setdefault("spark.kubernetes.container.image.pullPolicy", pull_policy)
    return conf


# The executor JVM only hosts the TaskManager's Python process (records and state live in Python), so its
# heap stays small and the rest of the pod's memory is Spark's "overhead", where the Python worker lives.
_EXECUTOR_HEAP_MIB = 512
_SMALL_EXECUTOR_HEAP_MIB = 256  # for pods under 1Gi
_MIN_TASKMANAGER_MIB = 512


def executor_resources(resources: Resources | None) -> dict[str, str]:
    """Spark's executor sizing from Kubernetes-style TaskManager resources.

    Spark sizes executor pods itself (memory = heap + overhead), overriding the pod template, so the
    pod's memory is split into a small JVM heap and an explicit overhead that holds the Python
    TaskManager; the pod then comes out at exactly the memory asked for.
    """
    if resources is None:
        return {}
    conf: dict[str, str] = {}
    requests = resources.requests or {}
    limits = resources.limits or {}
    cpu = requests.get("cpu", limits.get("cpu"))
    if cpu is not None:
        conf["spark.kubernetes.executor.request.cores"] = str(cpu)
        conf["spark.executor.cores"] = str(max(1, math.ceil(cpu_cores(cpu))))
    if "cpu" in limits:
        conf["spark.kubernetes.executor.limit.cores"] = str(limits["cpu"])
    memory = limits.get("memory", requests.get("memory"))
    if memory is not None:
        total = int(memory_mib(memory))
        if total < _MIN_TASKMANAGER_MIB:
            raise ValueError(
                f"taskManagers.resources memory {memory} is too small: a TaskManager needs at least "
                f"{_MIN_TASKMANAGER_MIB}Mi ({_SMALL_EXECUTOR_HEAP_MIB}Mi for the Spark executor's JVM heap, "
                "the rest for the Python TaskManager)"
            )
        heap = _EXECUTOR_HEAP_MIB if total >= 1024 else _SMALL_EXECUTOR_HEAP_MIB
        conf["spark.executor.memory"] = f"{heap}m"
        conf["spark.executor.memoryOverhead"] = f"{total - heap}m"
    return conf


def cpu_cores(quantity: int | str) -> float:
    text = str(quantity)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


def memory_mib(quantity: int | str) -> float:
    match = _QUANTITY.match(str(quantity))
    if match is None or match.group(2) not in _MEMORY_UNITS:
        raise ValueError(f"{quantity!r} is not a memory quantity such as 512Mi, 2Gi or 1G")
    return float(match.group(1)) * _MEMORY_UNITS[match.group(2)]

"""Spark-on-Kubernetes settings for a coordinator that is a client-mode Spark driver inside its own pod.

The coordinator pod runs `sluice run --host spark --master k8s://...`; Spark's Kubernetes backend then
creates one executor pod per TaskManager from a pod template and makes the driver pod, named by
`spark.kubernetes.driver.pod.name`, their owner, so that deleting the coordinator pod deletes its
TaskManagers. The pods are named `<job>-taskmanager-<executor id>` (ids count up from 1 and a replaced
executor gets a new one): Spark itself would name them `<podNamePrefix>-exec-<id>` and has no setting
for that, so a small executor feature step of ours, `_jvm/.../TaskManagerPodName.java`, renames them.
It is loaded by the driver JVM from the jar `scripts/build-jvm.sh` builds next to its sources.

Credentials: Spark's Kubernetes client takes the pod's service account token by itself, but in client
mode it does not trust the cluster's CA unless `spark.kubernetes.authenticate.caCertFile` names it (the
TLS handshake with the API server fails otherwise), so the mounted `ca.crt` is passed on explicitly.

Spark's RPC is authenticated (`spark.authenticate`): only processes holding the application's secret
join it. Without secret files Spark draws the secret itself and hands it to executors as an env value
in their pod spec; the operator mounts a secret file into every pod instead
(`spark.authenticate.secret.file`). An executor reads that file only where `spark.master` says
Kubernetes, and its first connection (fetching the driver's settings) runs with nothing but its JVM
flags, which do not carry the master and may not (Spark refuses `-Dspark.*` in
spark.executor.extraJavaOptions): the image's entrypoint adds it (docker/entrypoint.sh, `executor`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sluice.hosts.spark._errors import SparkSetupError

JOB_LABEL = "sluice.dev/job"
ROLE_LABEL = "sluice.dev/role"
TASKMANAGER_ROLE = "taskmanager"
COORDINATOR_SUFFIX = "-coordinator"
# The downward-API variables the operator gives the coordinator container, and the kubelet's own.
POD_ENV = ("POD_NAME", "POD_NAMESPACE", "POD_IP")
API_ENV = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
# Where the kubelet mounts the pod's service account token and the cluster's CA certificate.
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")

# The executor feature step that renames TaskManager pods, and the jar it is in.
POD_NAME_STEP = "dev.sluice.spark.TaskManagerPodName"
EXTENSION_JAR = Path(__file__).parent / "_jvm" / "sluice-spark-kubernetes.jar"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Room for "-taskmanager-exec-" and an executor id within a 63-character DNS label: Spark checks the
# name it builds (before our step shortens it), and the pod name is also the executor's host name.
_MAX_JOB_NAME = 63 - len("-taskmanager-exec-") - 4


@dataclass(frozen=True)
class CoordinatorPod:
    """What the Spark driver needs to know about the pod it runs in, and about the job's TaskManagers."""

    job: str
    """The StreamJob's name: executor pods are `<job>-taskmanager-<n>`, labelled with it."""
    namespace: str
    pod_name: str
    pod_ip: str
    api_host: str
    api_port: str
    image: str | None = None
    service_account: str | None = None
    pod_template_file: str | None = None
    template_container: str = "taskmanager"
    ca_cert_file: str | None = None
    """The cluster's CA certificate (the service account's `ca.crt`), when the pod has one mounted."""


def api_server_master(host: str, port: str) -> str:
    return f"k8s://https://{f'[{host}]' if ':' in host else host}:{port}"


def kubernetes_conf(
    pod: CoordinatorPod, taskmanagers: int, extension_jar: Path | None = None
) -> dict[str, str]:
    """Spark settings for client mode on Kubernetes: one single-core executor pod per TaskManager.

    `extension_jar` is the jar with the pod naming step, EXTENSION_JAR unless given.
    """
    extension_jar = EXTENSION_JAR if extension_jar is None else extension_jar
    if not _DNS_LABEL.match(pod.job) or len(pod.job) > _MAX_JOB_NAME:
        raise SparkSetupError(
            f"job name {pod.job!r} cannot name TaskManager pods: use at most {_MAX_JOB_NAME} lowercase "
            "letters, digits and '-', starting and ending with a letter or digit"
        )
    if not extension_jar.is_file():
        raise SparkSetupError(
            f"{extension_jar} is missing: it names the TaskManager pods on Kubernetes. In a source "
            "checkout run scripts/build-jvm.sh (needs a JDK 17+); an installed Sluice should have it, "
            "reinstall it from a wheel built after scripts/build-jvm.sh"
        )
    conf = {
        "spark.master": api_server_master(pod.api_host, pod.api_port),
        "spark.submit.deployMode": "client",
        "spark.kubernetes.namespace": pod.namespace,
        # Executors connect back to the driver at the pod's IP. Since Spark 4.1 they are given the
        # driver's bind address, not spark.driver.host (spark.kubernetes.executor.useDriverPodIP), so
        # the driver binds the pod IP: 0.0.0.0 would send every executor to its own pod.
        "spark.driver.host": pod.pod_ip,
        "spark.driver.bindAddress": pod.pod_ip,
        # Makes the coordinator pod the owner of every executor pod (garbage collection with it).
        "spark.kubernetes.driver.pod.name": pod.pod_name,
        "spark.kubernetes.executor.podNamePrefix": f"{pod.job}-{TASKMANAGER_ROLE}",
        f"spark.kubernetes.executor.label.{JOB_LABEL}": pod.job,
        f"spark.kubernetes.executor.label.{ROLE_LABEL}": TASKMANAGER_ROLE,
        # Renames the executor pods <job>-taskmanager-<n>; feature steps run in the driver JVM.
        "spark.kubernetes.executor.pod.featureSteps": POD_NAME_STEP,
        "spark.driver.extraClassPath": str(extension_jar),
        # One TaskManager per executor pod: as many executors as TaskManagers, one task slot each.
        "spark.executor.instances": str(taskmanagers),
        "spark.executor.cores": "1",
        "spark.task.cpus": "1",
        "spark.dynamicAllocation.enabled": "false",
        "spark.authenticate": "true",
    }
    if pod.image is not None:
        conf["spark.kubernetes.container.image"] = pod.image
    if pod.service_account is not None:
        conf["spark.kubernetes.authenticate.executor.serviceAccountName"] = pod.service_account
    if pod.pod_template_file is not None:
        conf["spark.kubernetes.executor.podTemplateFile"] = pod.pod_template_file
        conf["spark.kubernetes.executor.podTemplateContainerName"] = pod.template_container
    if pod.ca_cert_file is not None:
        conf["spark.kubernetes.authenticate.caCertFile"] = pod.ca_cert_file
    return conf


def coordinator_pod_from_env(
    env: Mapping[str, str], job: str | None = None, service_account_dir: Path = SERVICE_ACCOUNT_DIR
) -> CoordinatorPod:
    """The coordinator pod as its environment describes it (downward API and the kubelet's variables).

    The job name is `job` if given, else the pod name without its `-coordinator` suffix (the operator
    names the pod `<job>-coordinator`). The CA certificate is the one in `service_account_dir`, if any.
    """
    missing = [name for name in (*POD_ENV, *API_ENV) if not env.get(name)]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise SparkSetupError(
            "--master k8s://... runs the coordinator as a Spark driver inside a pod, but "
            f"{', '.join(missing)} {verb} not set: give the coordinator container POD_NAME, POD_NAMESPACE "
            "and POD_IP from the downward API (metadata.name, metadata.namespace, status.podIP)"
        )
    pod_name = env["POD_NAME"]
    ca_cert = service_account_dir / "ca.crt"
    return CoordinatorPod(
        job=job or pod_name.removesuffix(COORDINATOR_SUFFIX),
        namespace=env["POD_NAMESPACE"],
        pod_name=pod_name,
        pod_ip=env["POD_IP"],
        api_host=env["KUBERNETES_SERVICE_HOST"],
        api_port=env["KUBERNETES_SERVICE_PORT"],
        ca_cert_file=str(ca_cert) if ca_cert.is_file() else None,
    )

"""The operator's own configuration (environment variables, set by the Helm chart or a test)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ._base import URI_RE, duration_ms
from .constants import REST_PORT

ENV_STORAGE = "SLUICE_OPERATOR_STORAGE"
ENV_STORAGE_SECRET = "SLUICE_OPERATOR_STORAGE_SECRET"
ENV_JOB_ENV = "SLUICE_OPERATOR_JOB_ENV_"
ENV_RECONCILE_INTERVAL = "SLUICE_OPERATOR_RECONCILE_INTERVAL"
ENV_IMAGE_PULL_POLICY = "SLUICE_OPERATOR_IMAGE_PULL_POLICY"
ENV_ALLOW_PRIVILEGED = "SLUICE_OPERATOR_ALLOW_PRIVILEGED_PODS"
ENV_NETWORK_POLICIES = "SLUICE_OPERATOR_NETWORK_POLICIES"
ENV_POD_NAMESPACE = "SLUICE_OPERATOR_POD_NAMESPACE"
ENV_POD_LABELS = "SLUICE_OPERATOR_POD_LABELS"
ENV_SAVEPOINT_PREFIXES = "SLUICE_OPERATOR_ALLOWED_SAVEPOINT_PREFIXES"
ENV_POD_MONITOR = "SLUICE_OPERATOR_POD_MONITOR"
ENV_POD_MONITOR_LABELS = "SLUICE_OPERATOR_POD_MONITOR_LABELS"
ENV_POD_MONITOR_INTERVAL = "SLUICE_OPERATOR_POD_MONITOR_INTERVAL"
ENV_SCRAPER_NAMESPACE = "SLUICE_OPERATOR_SCRAPER_NAMESPACE"
ENV_SCRAPER_POD_LABELS = "SLUICE_OPERATOR_SCRAPER_POD_LABELS"
ENV_COORDINATOR_REST_PORT = "SLUICE_OPERATOR_COORDINATOR_REST_PORT"

# Prometheus' duration format (what a PodMonitor's `interval` takes): 30s, 1m30s, 500ms.
_PROMETHEUS_DURATION = re.compile(r"^((\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?|0)$")


@dataclass(frozen=True)
class PodMonitorConfig:
    """A prometheus-operator PodMonitor per StreamJob (`metrics.jobs.podMonitor` in the chart).

    `labels` go on each PodMonitor (what a Prometheus' `podMonitorSelector` matches); `interval` is its
    scrape interval, None for Prometheus' own default.
    """

    labels: Mapping[str, str] = field(default_factory=dict)
    interval: str | None = None


@dataclass(frozen=True)
class ScraperConfig:
    """Prometheus' pods, which the per-job NetworkPolicies let reach the REST port (`metrics.jobs.scraper`).

    `namespace` None: pods with `pod_labels` in any namespace.
    """

    pod_labels: Mapping[str, str]
    namespace: str | None = None


class ConfigError(ValueError):
    """The operator's configuration is wrong; the operator refuses to start and says why."""


@dataclass(frozen=True)
class OperatorConfig:
    """Defaults the operator applies to every StreamJob that leaves them out.

    `storage` is the root under which checkpoints and savepoints of jobs without explicit directories
    go (`<storage>/checkpoints/<namespace>/<name>`), and what `$(SLUICE_STORAGE)` in pipeline args
    means. Tests and clusters point it at their object storage without editing any StreamJob. It has no
    default: a local path would be a directory in each pod that nothing keeps, so checkpoints would not
    survive the pod, and the operator could not read them.
    `job_env` is added to the environment of every job pod (e.g. AWS_ENDPOINT_URL of a test S3 server).
    `allow_privileged_pods` lets pod templates and Spark settings escalate (host namespaces, hostPath,
    privileged containers, ...), which the operator otherwise refuses. With `network_policies` each job
    gets a NetworkPolicy: its pods reach each other, and its REST port is reached by the operator's pods
    only, which are those with `operator_pod_labels` in `operator_namespace` (any namespace if None).
    `coordinator_rest_port` is the port the coordinators of new runs serve their REST API on, inside
    their pods. A pod has its own network on a real cluster, so the default fits every job there; on a
    node whose pods share one network (the tests' process kubelet) each operator needs its own.
    """

    # None: no default; every StreamJob must then name its own checkpoint and savepoint directories.
    storage: str | None = None
    storage_secret: str | None = None
    job_env: Mapping[str, str] = field(default_factory=dict)
    reconcile_interval_s: float = 5.0
    image_pull_policy: str | None = None
    allow_privileged_pods: bool = False
    network_policies: bool = False
    operator_namespace: str | None = None
    operator_pod_labels: Mapping[str, str] = field(default_factory=dict)
    # Savepoint target directories allowed besides each job's own savepoint and checkpoint directories.
    allowed_savepoint_prefixes: tuple[str, ...] = ()
    # None: no PodMonitors (the default; the CRD is prometheus-operator's and may not be installed).
    pod_monitor: PodMonitorConfig | None = None
    scraper: ScraperConfig | None = None
    coordinator_rest_port: int = REST_PORT

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OperatorConfig:
        env = os.environ if environ is None else environ
        storage = env.get(ENV_STORAGE, "").strip().rstrip("/") or None
        if storage is not None and not URI_RE.match(storage):
            raise ConfigError(
                f"{ENV_STORAGE}={storage!r} is not an absolute path or a URI such as s3://bucket/prefix"
            )
        interval = env.get(ENV_RECONCILE_INTERVAL, "5s")
        try:
            interval_s = duration_ms(interval) / 1000
        except ValueError as error:
            raise ConfigError(f"{ENV_RECONCILE_INTERVAL}: {error}") from None
        allow = _flag(env, ENV_ALLOW_PRIVILEGED)
        policies = _flag(env, ENV_NETWORK_POLICIES)
        labels = _labels(env.get(ENV_POD_LABELS, ""), ENV_POD_LABELS)
        if policies and not labels:
            raise ConfigError(
                f"{ENV_NETWORK_POLICIES}=true needs {ENV_POD_LABELS} (k=v,...): the labels of the operator's "
                "pods, the only pods the NetworkPolicies let call a coordinator's REST API"
            )
        listed = env.get(ENV_SAVEPOINT_PREFIXES, "").split(",")
        prefixes = tuple(p.strip().rstrip("/") for p in listed if p.strip())
        for prefix in prefixes:
            if not URI_RE.match(prefix):
                raise ConfigError(
                    f"{ENV_SAVEPOINT_PREFIXES}: {prefix!r} is not an absolute path or a URI such as "
                    "s3://bucket/savepoints (write a comma-separated list)"
                )
        pod_monitor = _pod_monitor(env)
        scraper = _scraper(env)
        if pod_monitor is not None and policies and scraper is None:
            raise ConfigError(
                f"{ENV_POD_MONITOR}=true with {ENV_NETWORK_POLICIES}=true needs {ENV_SCRAPER_POD_LABELS} "
                f"(k=v,...) and, best, {ENV_SCRAPER_NAMESPACE}: the labels and namespace of Prometheus' "
                "pods, which the per-job NetworkPolicies must let reach the coordinators' REST port "
                "(chart: metrics.jobs.scraper.podLabels and .namespace)"
            )
        job_env = {k[len(ENV_JOB_ENV) :]: v for k, v in env.items() if k.startswith(ENV_JOB_ENV) and v}
        return cls(
            storage=storage,
            storage_secret=env.get(ENV_STORAGE_SECRET) or None,
            job_env=job_env,
            reconcile_interval_s=max(interval_s, 0.2),
            image_pull_policy=env.get(ENV_IMAGE_PULL_POLICY) or None,
            allow_privileged_pods=allow,
            network_policies=policies,
            operator_namespace=env.get(ENV_POD_NAMESPACE) or None,
            operator_pod_labels=labels,
            allowed_savepoint_prefixes=prefixes,
            pod_monitor=pod_monitor,
            scraper=scraper,
            coordinator_rest_port=_port(env, ENV_COORDINATOR_REST_PORT, REST_PORT),
        )


def _flag(env: Mapping[str, str], name: str) -> bool:
    value = env.get(name, "false").strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{name}={value!r}: write true or false")
    return value == "true"


def _port(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ConfigError(f"{name}={text!r}: write a TCP port number from 1 to 65535")
    return int(text)


def _pod_monitor(env: Mapping[str, str]) -> PodMonitorConfig | None:
    if not _flag(env, ENV_POD_MONITOR):
        return None
    interval = env.get(ENV_POD_MONITOR_INTERVAL, "").strip() or None
    if interval is not None and not _PROMETHEUS_DURATION.match(interval):
        raise ConfigError(
            f"{ENV_POD_MONITOR_INTERVAL}={interval!r} is not a Prometheus duration such as 15s, 1m or 1m30s"
        )
    return PodMonitorConfig(_labels(env.get(ENV_POD_MONITOR_LABELS, ""), ENV_POD_MONITOR_LABELS), interval)


def _scraper(env: Mapping[str, str]) -> ScraperConfig | None:
    labels = _labels(env.get(ENV_SCRAPER_POD_LABELS, ""), ENV_SCRAPER_POD_LABELS)
    namespace = env.get(ENV_SCRAPER_NAMESPACE, "").strip() or None
    if not labels:
        if namespace is not None:
            raise ConfigError(
                f"{ENV_SCRAPER_NAMESPACE} needs {ENV_SCRAPER_POD_LABELS} (k=v,...): the labels of "
                "Prometheus' pods in that namespace"
            )
        return None
    return ScraperConfig(labels, namespace)


def _labels(text: str, name: str) -> dict[str, str]:
    labels = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{name}: {item!r} is not a label key=value")
        labels[key] = value
    return labels

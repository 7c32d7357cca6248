"""The job's prometheus-operator PodMonitor: Prometheus scrapes the coordinator's `GET /metrics`.

One per job rather than one for the chart: the coordinator asks for the job's own REST token
(`--rest-auth all`), and a PodMonitor can only name one Secret to take it from.
"""

from __future__ import annotations

from typing import Any

from sluice_operator.models import PodMonitorConfig
from sluice_operator.models import constants as c

from ._common import Manifest, Owner, metadata
from .secret import REST_TOKEN_KEY, job_secret_name

POD_MONITOR_GROUP = "monitoring.coreos.com"
POD_MONITOR_VERSION = "v1"
POD_MONITOR_PLURAL = "podmonitors"
POD_MONITOR_KIND = "PodMonitor"
POD_MONITOR_CRD = f"{POD_MONITOR_PLURAL}.{POD_MONITOR_GROUP}"
POD_MONITOR_PATH = "/metrics"


def pod_monitor_name(job: str) -> str:
    return f"{job}-coordinator"


def pod_monitor(owner: Owner, config: PodMonitorConfig) -> Manifest:
    """Owned by the StreamJob, so Kubernetes deletes it with the job.

    It selects the coordinator pod of this job in the job's namespace (a PodMonitor's default), whatever
    run it belongs to: the labels are the same for every run, so a new run needs no new PodMonitor.
    """
    endpoint: dict[str, Any] = {
        "port": c.REST_PORT_NAME,
        "path": POD_MONITOR_PATH,
        "authorization": {
            "type": "Bearer",
            "credentials": {"name": job_secret_name(owner.name), "key": REST_TOKEN_KEY},
        },
    }
    if config.interval is not None:
        endpoint["interval"] = config.interval
    meta = metadata(owner, pod_monitor_name(owner.name), c.ROLE_COORDINATOR)
    # The operator's labels win: they are what finds the PodMonitor again.
    meta["labels"] = {**config.labels, **meta["labels"]}
    return {
        "apiVersion": f"{POD_MONITOR_GROUP}/{POD_MONITOR_VERSION}",
        "kind": POD_MONITOR_KIND,
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": {c.LABEL_JOB: owner.name, c.LABEL_ROLE: c.ROLE_COORDINATOR}},
            "podMetricsEndpoints": [endpoint],
        },
    }


__all__ = [
    "POD_MONITOR_CRD",
    "POD_MONITOR_GROUP",
    "POD_MONITOR_KIND",
    "POD_MONITOR_PATH",
    "POD_MONITOR_PLURAL",
    "POD_MONITOR_VERSION",
    "pod_monitor",
    "pod_monitor_name",
]

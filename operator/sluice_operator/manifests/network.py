"""The NetworkPolicy of a job: its pods talk to each other, and only the operator calls its REST API.

Kubernetes cannot say "pods with the same job label as mine" in one policy for all jobs, hence one per
job. Ports are ranges around the REST port: the coordinator's Spark ports, the TaskManagers' control
and data ports (chosen at run time) are open to the job's own pods, the REST port is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice_operator.models import REST_PORT, ScraperConfig
from sluice_operator.models import constants as c

from ._common import Manifest, Owner, metadata

_NAMESPACE_LABEL = "kubernetes.io/metadata.name"


def network_policy_name(job: str) -> str:
    return f"{job}-network"


def _peer(namespace: str | None, pod_labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "podSelector": {"matchLabels": dict(pod_labels)},
        "namespaceSelector": {"matchLabels": {_NAMESPACE_LABEL: namespace}} if namespace else {},
    }


def network_policy(
    owner: Owner,
    operator_namespace: str | None,
    operator_labels: Mapping[str, str],
    scraper: ScraperConfig | None = None,
    rest_port: int = REST_PORT,
) -> Manifest:
    """`operator_namespace` None: the operator's pods are matched by their labels in any namespace.

    `scraper`: Prometheus' pods may reach the REST port too (for `GET /metrics`, which asks for the
    job's token like every other read, so they see nothing more without it).
    """
    job_pods = {"podSelector": {"matchLabels": {c.LABEL_JOB: owner.name}}}
    rest_from = [_peer(operator_namespace, operator_labels)]
    if scraper is not None:
        rest_from.append(_peer(scraper.namespace, scraper.pod_labels))
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(owner, network_policy_name(owner.name)),
        "spec": {
            "podSelector": {"matchLabels": {c.LABEL_JOB: owner.name}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [job_pods],
                    "ports": [
                        {"protocol": "TCP", "port": 1, "endPort": rest_port - 1},
                        {"protocol": "TCP", "port": rest_port + 1, "endPort": 65535},
                    ],
                },
                {"from": rest_from, "ports": [{"protocol": "TCP", "port": rest_port}]},
            ],
        },
    }

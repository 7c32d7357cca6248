"""A job's NetworkPolicy: its own pods on every port but REST, the operator's pods on REST only."""

from __future__ import annotations

import pytest

from sluice_operator import manifests as m
from sluice_operator.models import ConfigError, OperatorConfig

from ._fixtures import OWNER


def test_job_pods_reach_each_other_and_only_the_operator_reaches_rest() -> None:
    policy = m.network_policy(OWNER, "sluice-system", {"app.kubernetes.io/name": "sluice-operator"})
    assert policy["metadata"]["name"] == "counts-network"
    assert policy["metadata"]["ownerReferences"][0]["uid"] == OWNER.uid
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": {"sluice.dev/job": "counts"}}
    assert spec["policyTypes"] == ["Ingress"]
    own, operator = spec["ingress"]
    assert own["from"] == [{"podSelector": {"matchLabels": {"sluice.dev/job": "counts"}}}]
    ranges = [(p["port"], p["endPort"]) for p in own["ports"]]
    assert ranges == [(1, 8080), (8082, 65535)], "every port of the job's pods except the REST port"
    assert operator == {
        "from": [
            {
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "sluice-operator"}},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "sluice-system"}},
            }
        ],
        "ports": [{"protocol": "TCP", "port": 8081}],
    }


def test_without_the_operators_namespace_its_labels_match_in_any_namespace() -> None:
    policy = m.network_policy(OWNER, None, {"app": "op"})
    (peer,) = policy["spec"]["ingress"][1]["from"]
    assert peer["namespaceSelector"] == {}


def test_network_policies_are_configured_with_the_operators_pod_labels() -> None:
    config = OperatorConfig.from_env(
        {
            "SLUICE_OPERATOR_NETWORK_POLICIES": "true",
            "SLUICE_OPERATOR_POD_NAMESPACE": "sluice-system",
            "SLUICE_OPERATOR_POD_LABELS": "app.kubernetes.io/name=sluice-operator, tier=x",
        }
    )
    assert config.network_policies and config.operator_namespace == "sluice-system"
    assert config.operator_pod_labels == {
        "app.kubernetes.io/name": "sluice-operator",
        "tier": "x",
    }
    assert OperatorConfig.from_env({}).network_policies is False
    with pytest.raises(ConfigError, match="needs SLUICE_OPERATOR_POD_LABELS"):
        OperatorConfig.from_env({"SLUICE_OPERATOR_NETWORK_POLICIES": "true"})
    with pytest.raises(ConfigError, match="not a label key=value"):
        OperatorConfig.from_env({"SLUICE_OPERATOR_POD_LABELS": "app"})

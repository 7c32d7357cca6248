"""The coordinators' REST port: the operator's setting, the manifests that use it, and how the operator
finds the port of a pod made earlier (possibly under another setting)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from sluice_operator import manifests as m
from sluice_operator.models import ConfigError, OperatorConfig
from sluice_operator.services.observe.job import pod_view

from ._fixtures import CONFIG, OWNER, spec

PORT = 23456


def _run(config: OperatorConfig) -> m.Run:
    return m.Run(owner=OWNER, spec=spec(), config=config, job_id="a" * 32)


def _coordinator_container(pod: dict[str, Any]) -> dict[str, Any]:
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "coordinator"]
    assert isinstance(container, dict)
    return container


def test_the_port_is_8081_unless_configured() -> None:
    assert OperatorConfig.from_env({}).coordinator_rest_port == 8081
    env = {"SLUICE_OPERATOR_COORDINATOR_REST_PORT": f" {PORT} "}
    assert OperatorConfig.from_env(env).coordinator_rest_port == PORT


@pytest.mark.parametrize("value", ["0", "65536", "http", "-1", "80.5"])
def test_a_port_that_is_not_one_is_explained(value: str) -> None:
    with pytest.raises(ConfigError, match=f"SLUICE_OPERATOR_COORDINATOR_REST_PORT='{value}'.*1 to 65535"):
        OperatorConfig.from_env({"SLUICE_OPERATOR_COORDINATOR_REST_PORT": value})


def test_the_coordinator_serves_on_the_configured_port_and_the_service_keeps_8081() -> None:
    run = _run(dataclasses.replace(CONFIG, coordinator_rest_port=PORT))
    container = _coordinator_container(m.coordinator_pod(run))
    args = container["args"]
    assert args[args.index("--rest-port") + 1] == str(PORT)
    assert {"name": "rest", "containerPort": PORT} in container["ports"]
    assert container["readinessProbe"]["httpGet"]["port"] == "rest"
    (service_port,) = m.rest_service(run)["spec"]["ports"]
    assert (service_port["port"], service_port["targetPort"]) == (8081, "rest")
    assert m.dashboard_url(OWNER).endswith(":8081/")


def test_the_network_policy_opens_the_configured_port_to_the_operator_only() -> None:
    policy = m.network_policy(OWNER, None, {"app": "op"}, None, PORT)
    own, operator = policy["spec"]["ingress"]
    assert [(p["port"], p["endPort"]) for p in own["ports"]] == [(1, PORT - 1), (PORT + 1, 65535)]
    assert operator["ports"] == [{"protocol": "TCP", "port": PORT}]


def test_the_operator_calls_a_pod_on_the_port_it_was_made_with() -> None:
    made_earlier = m.coordinator_pod(_run(dataclasses.replace(CONFIG, coordinator_rest_port=PORT)))
    made_earlier["status"] = {"phase": "Running", "podIP": "10.0.0.7"}
    assert pod_view(made_earlier).rest_port == PORT
    default = m.coordinator_pod(_run(CONFIG))
    assert pod_view(default).rest_port == 8081
    # A pod without the named port (a hand-made one, say) is called on the default.
    _coordinator_container(default)["ports"] = []
    assert pod_view(default).rest_port == 8081

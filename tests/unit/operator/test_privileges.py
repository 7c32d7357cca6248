"""Pod templates and Spark settings that escalate are refused, naming the field, unless allowed."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_operator.models import OperatorConfig
from sluice_operator.services.observe.privileges import escalations
from sluice_operator.services.observe.validate import InvalidSpecError, refuse_escalations, streamjob_spec

from ._fixtures import spec


def _coordinator(pod_spec: dict[str, Any]) -> dict[str, Any]:
    return {"coordinator": {"podTemplate": {"spec": pod_spec}}}


def _taskmanagers(pod_spec: dict[str, Any]) -> dict[str, Any]:
    return {"taskManagers": {"replicas": 2, "podTemplate": {"spec": pod_spec}}}


def _container(context: dict[str, Any]) -> dict[str, Any]:
    return {"containers": [{"name": "sidecar"}, {"name": "coordinator", "securityContext": context}]}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (_coordinator({"hostNetwork": True}), "spec.coordinator.podTemplate.spec.hostNetwork"),
        (_taskmanagers({"hostPID": True}), "spec.taskManagers.podTemplate.spec.hostPID"),
        (_coordinator({"hostIPC": True}), "spec.coordinator.podTemplate.spec.hostIPC"),
        (
            _coordinator(
                {"volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "hostPath": {"path": "/"}}]}
            ),
            "spec.coordinator.podTemplate.spec.volumes[1].hostPath",
        ),
        (
            _taskmanagers({"serviceAccountName": "admin"}),
            "spec.taskManagers.podTemplate.spec.serviceAccountName",
        ),
        (_coordinator({"serviceAccount": "admin"}), "spec.coordinator.podTemplate.spec.serviceAccount"),
        (
            _coordinator(_container({"privileged": True})),
            "spec.coordinator.podTemplate.spec.containers[1].securityContext.privileged",
        ),
        (
            _coordinator(_container({"allowPrivilegeEscalation": True})),
            "spec.coordinator.podTemplate.spec.containers[1].securityContext.allowPrivilegeEscalation",
        ),
        (
            _taskmanagers(
                {
                    "initContainers": [
                        {"name": "i", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}
                    ]
                }
            ),
            "spec.taskManagers.podTemplate.spec.initContainers[0].securityContext.capabilities.add",
        ),
        (
            _coordinator({"securityContext": {"runAsNonRoot": False}}),
            "spec.coordinator.podTemplate.spec.securityContext.runAsNonRoot",
        ),
        (
            _coordinator(_container({"runAsUser": 0})),
            "spec.coordinator.podTemplate.spec.containers[1].securityContext.runAsUser",
        ),
        (
            {"sparkConf": {"spark.kubernetes.executor.volumes.hostPath.data.mount.path": "/data"}},
            "spec.sparkConf[spark.kubernetes.executor.volumes.hostPath.data.mount.path]",
        ),
        (
            {"sparkConf": {"spark.kubernetes.driver.volumes.hostPath.x.options.path": "/"}},
            "spec.sparkConf[spark.kubernetes.driver.volumes.hostPath.x.options.path]",
        ),
        (
            {"sparkConf": {"spark.kubernetes.authenticate.executor.serviceAccountName": "admin"}},
            "spec.sparkConf[spark.kubernetes.authenticate.executor.serviceAccountName]",
        ),
    ],
)
def test_each_escalating_field_is_named(overrides: dict[str, Any], field: str) -> None:
    job = spec(**overrides)
    (found,) = escalations(job)
    assert found.startswith(f"{field}: ")
    with pytest.raises(InvalidSpecError) as caught:
        refuse_escalations(job, allowed=False)
    message = str(caught.value)
    assert field in message and "SLUICE_OPERATOR_ALLOW_PRIVILEGED_PODS=true" in message
    refuse_escalations(job, allowed=True)  # the operator's configuration lets it through


def test_what_the_restricted_standard_allows_passes() -> None:
    job = spec(
        coordinator={
            "podTemplate": {
                "spec": {
                    "securityContext": {"runAsUser": 1001, "fsGroup": 2000},
                    "volumes": [{"name": "scratch", "emptyDir": {}}],
                    "containers": [
                        {"name": "coordinator", "securityContext": {"capabilities": {"drop": ["ALL"]}}}
                    ],
                    "nodeSelector": {"pool": "streaming"},
                }
            }
        },
        sparkConf={"spark.kubernetes.executor.volumes.persistentVolumeClaim.data.mount.path": "/data"},
        serviceAccount="sluice-job",
    )
    assert escalations(job) == []


def test_the_switch_comes_from_the_operators_environment() -> None:
    assert OperatorConfig.from_env({}).allow_privileged_pods is False
    assert OperatorConfig.from_env({"SLUICE_OPERATOR_ALLOW_PRIVILEGED_PODS": "true"}).allow_privileged_pods


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"spark.authenticate": "false"}, "spec.sparkConf: spark.authenticate=false is not allowed"),
        (
            {"spark.authenticate.secret": "mine"},
            "spec.sparkConf: spark.authenticate.secret is set by the operator: Spark's secret is generated",
        ),
        (
            {"spark.authenticate.secret.executor.file": "/x", "spark.authenticate.secret.driver.file": "/x"},
            "spark.authenticate.secret.driver.file, spark.authenticate.secret.executor.file are set by the "
            "operator",
        ),
    ],
)
def test_spark_authentication_cannot_be_turned_off_or_given_another_secret(
    conf: dict[str, str], message: str
) -> None:
    raw = {"image": "sluice:dev", "pipeline": {"file": "p.py"}, "sparkConf": conf}
    with pytest.raises(InvalidSpecError) as caught:
        streamjob_spec(raw)
    assert message in str(caught.value)


def test_spark_authentication_may_be_repeated_and_encryption_turned_on() -> None:
    conf = {"spark.authenticate": "true", "spark.network.crypto.enabled": "true"}
    raw = {"image": "sluice:dev", "pipeline": {"file": "p.py"}, "sparkConf": conf}
    assert streamjob_spec(raw).spark_conf == conf

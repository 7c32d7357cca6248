"""The PodMonitor option: its configuration, the per-job manifest, the NetworkPolicy and the condition."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from sluice_operator import manifests as m
from sluice_operator.kube import Kube, Refused
from sluice_operator.models import (
    Condition,
    ConfigError,
    MonitorReason,
    OperatorConfig,
    PodMonitorConfig,
    ScraperConfig,
)
from sluice_operator.services.act.monitoring import ensure_pod_monitor
from sluice_operator.services.act.record import monitor_condition
from sluice_operator.services.common.acted import MonitorState

from ._fixtures import OWNER, run


def test_the_pod_monitor_scrapes_the_coordinators_metrics_with_the_jobs_token() -> None:
    monitor = m.pod_monitor(OWNER, PodMonitorConfig(labels={"release": "prometheus"}, interval="15s"))
    assert (monitor["apiVersion"], monitor["kind"]) == ("monitoring.coreos.com/v1", "PodMonitor")
    meta = monitor["metadata"]
    assert (meta["name"], meta["namespace"]) == ("counts-coordinator", "jobs")
    (ref,) = meta["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"]) == ("StreamJob", "counts", OWNER.uid)
    assert ref["controller"] is True
    assert meta["labels"]["release"] == "prometheus"  # what a Prometheus' podMonitorSelector matches
    assert meta["labels"]["sluice.dev/job"] == "counts"
    spec = monitor["spec"]
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint == {
        "port": "rest",
        "path": "/metrics",
        "interval": "15s",
        "authorization": {"type": "Bearer", "credentials": {"name": "counts-auth", "key": "rest-token"}},
    }
    # Exactly the coordinator pod of this job: the labels every run's coordinator pod carries.
    selector = spec["selector"]["matchLabels"]
    pod = m.coordinator_pod(run())
    assert selector == {"sluice.dev/job": "counts", "sluice.dev/role": "coordinator"}
    assert selector.items() <= pod["metadata"]["labels"].items()
    rest = next(p for p in pod["spec"]["containers"][0]["ports"] if p["name"] == endpoint["port"])
    assert rest["containerPort"] == 8081
    secret = m.job_secret(OWNER, "t", "s")
    assert secret["metadata"]["name"] == "counts-auth" and "rest-token" in secret["stringData"]
    assert "namespaceSelector" not in spec, "a PodMonitor's default is its own namespace: the job's"


def test_without_an_interval_prometheus_decides_and_labels_cannot_hide_the_jobs() -> None:
    monitor = m.pod_monitor(OWNER, PodMonitorConfig(labels={"sluice.dev/job": "other"}))
    assert "interval" not in monitor["spec"]["podMetricsEndpoints"][0]
    assert monitor["metadata"]["labels"]["sluice.dev/job"] == "counts"


def test_the_option_from_the_environment() -> None:
    config = OperatorConfig.from_env(
        {
            "SLUICE_OPERATOR_POD_MONITOR": "true",
            "SLUICE_OPERATOR_POD_MONITOR_LABELS": "release=prometheus,team=data",
            "SLUICE_OPERATOR_POD_MONITOR_INTERVAL": "1m30s",
        }
    )
    assert config.pod_monitor == PodMonitorConfig({"release": "prometheus", "team": "data"}, "1m30s")
    assert OperatorConfig.from_env({}).pod_monitor is None, "off unless asked for"
    assert OperatorConfig.from_env({"SLUICE_OPERATOR_POD_MONITOR": "false"}).pod_monitor is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"SLUICE_OPERATOR_POD_MONITOR": "yes"},
            "SLUICE_OPERATOR_POD_MONITOR='yes': write true or false",
        ),
        (
            {"SLUICE_OPERATOR_POD_MONITOR": "true", "SLUICE_OPERATOR_POD_MONITOR_INTERVAL": "30 seconds"},
            "is not a Prometheus duration such as 15s",
        ),
        (
            {"SLUICE_OPERATOR_POD_MONITOR": "true", "SLUICE_OPERATOR_POD_MONITOR_LABELS": "release"},
            "SLUICE_OPERATOR_POD_MONITOR_LABELS: 'release' is not a label key=value",
        ),
        (
            {
                "SLUICE_OPERATOR_POD_MONITOR": "true",
                "SLUICE_OPERATOR_NETWORK_POLICIES": "true",
                "SLUICE_OPERATOR_POD_LABELS": "app=op",
            },
            "needs SLUICE_OPERATOR_SCRAPER_POD_LABELS",
        ),
        ({"SLUICE_OPERATOR_SCRAPER_NAMESPACE": "monitoring"}, "needs SLUICE_OPERATOR_SCRAPER_POD_LABELS"),
    ],
)
def test_a_bad_option_is_explained(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        OperatorConfig.from_env(env)


def test_prometheus_pods_may_reach_the_rest_port_through_the_network_policy() -> None:
    config = OperatorConfig.from_env(
        {
            "SLUICE_OPERATOR_POD_MONITOR": "true",
            "SLUICE_OPERATOR_NETWORK_POLICIES": "true",
            "SLUICE_OPERATOR_POD_LABELS": "app=op",
            "SLUICE_OPERATOR_SCRAPER_POD_LABELS": "app.kubernetes.io/name=prometheus",
            "SLUICE_OPERATOR_SCRAPER_NAMESPACE": "monitoring",
        }
    )
    assert config.scraper == ScraperConfig({"app.kubernetes.io/name": "prometheus"}, "monitoring")
    policy = m.network_policy(OWNER, "sluice-system", {"app": "op"}, config.scraper)
    own, rest = policy["spec"]["ingress"]
    assert rest["ports"] == [{"protocol": "TCP", "port": 8081}]
    assert rest["from"][1] == {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
    }
    assert [(p["port"], p["endPort"]) for p in own["ports"]] == [(1, 8080), (8082, 65535)]
    unscraped = m.network_policy(OWNER, "sluice-system", {"app": "op"})
    assert len(unscraped["spec"]["ingress"][1]["from"]) == 1, "only the operator without the option"


_MISSING = MonitorState(False, MonitorReason.CRD_MISSING, "the CRD podmonitors.monitoring.coreos.com ...")
_CREATED = MonitorState(True, MonitorReason.CREATED, "PodMonitor counts-coordinator scrapes /metrics")
_READY = MonitorState(True, MonitorReason.READY, "PodMonitor counts-coordinator scrapes /metrics")


def _monitored(conditions: list[Condition]) -> Condition:
    return next(c for c in conditions if c.type == "Monitored")


def test_a_missing_crd_is_reported_once_and_recovery_once() -> None:
    ready = Condition(type="Ready", status="True", reason="Running")
    conditions, events = monitor_condition([ready], _MISSING, generation=1, now_ms=1_000)
    assert [(e.type, e.reason) for e in events] == [("Warning", "PodMonitorCRDMissing")]
    condition = _monitored(conditions)
    assert (condition.status, condition.reason) == ("False", "PodMonitorCRDMissing")
    assert ready in conditions, "the job's own conditions stay"
    for now in (2_000, 3_000):  # later reconciles: the condition stays, nothing more is posted
        conditions, events = monitor_condition(conditions, _MISSING, generation=1, now_ms=now)
        assert events == []
    assert _monitored(conditions).last_transition_time == "1970-01-01T00:00:01Z"
    conditions, events = monitor_condition(conditions, _CREATED, generation=1, now_ms=4_000)
    assert [(e.type, e.reason) for e in events] == [("Normal", "PodMonitorCreated")]
    conditions, events = monitor_condition(conditions, _READY, generation=1, now_ms=5_000)
    assert events == []
    assert _monitored(conditions).status == "True"


def test_with_the_option_off_there_is_no_monitored_condition() -> None:
    conditions, _ = monitor_condition([], _READY, generation=1, now_ms=1_000)
    assert [c.type for c in conditions] == ["Monitored"]
    assert monitor_condition(conditions, None, generation=1, now_ms=2_000) == ([], [])


class _Refusing:
    """A Kube whose PodMonitor calls are refused: rights and CRD versions this test cannot provoke."""

    def __init__(self, status: int, message: str) -> None:
        self.refusal = Refused(status, message)

    async def get_object(self, *_: Any) -> None:
        raise self.refusal


@pytest.mark.parametrize(
    ("status", "reason", "words"),
    [
        (403, "PodMonitorForbidden", ["may not manage podmonitors.monitoring.coreos.com", "forbidden here"]),
        (422, "PodMonitorInvalid", ["refused by the API server: spec.x: Invalid value", "upgrade"]),
    ],
)
def test_refused_calls_become_a_condition_not_an_error(status: int, reason: str, words: list[str]) -> None:
    kube = _Refusing(status, "forbidden here" if status == 403 else "spec.x: Invalid value")
    state = asyncio.run(ensure_pod_monitor(cast(Kube, kube), OWNER, PodMonitorConfig()))
    assert (state.ok, state.reason) == (False, reason)
    for word in words:
        assert word in state.message
    assert "metrics.jobs.podMonitor.enabled" in state.message and "the job runs either way" in state.message

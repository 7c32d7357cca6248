"""The PodMonitor option against a real kube-apiserver: with prometheus-operator's CRD and without it.

The CRD is a minimal stand-in (podmonitor_crd/); it prunes fields it does not know, so what the test
reads back is what prometheus-operator would see. No pod runs here: the coordinator stays Pending, which
is enough to see that the PodMonitor selects it and that a job without the CRD goes on as usual.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice_operator.services.act import monitoring
from testkit.kube import KubeEnv, streamjob_manifest

pytestmark = pytest.mark.kube

CRD_DIR = Path(__file__).parent / "podmonitor_crd"
CRD = "podmonitors.monitoring.coreos.com"
OPTION = {
    "SLUICE_OPERATOR_POD_MONITOR": "true",
    "SLUICE_OPERATOR_POD_MONITOR_LABELS": "release=prometheus",
    "SLUICE_OPERATOR_POD_MONITOR_INTERVAL": "15s",
    "SLUICE_OPERATOR_SCRAPER_POD_LABELS": "app.kubernetes.io/name=prometheus",
    "SLUICE_OPERATOR_SCRAPER_NAMESPACE": "monitoring",
}


def _monitored(job: dict[str, Any]) -> dict[str, Any] | None:
    conditions = job.get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == "Monitored"), None)


def _reasons(kube_env: KubeEnv, namespace: str, name: str) -> list[str]:
    items = kube_env.kubectl_json("get", "events", namespace=namespace)["items"]
    return [e["reason"] for e in items if e["involvedObject"]["name"] == name]


def _wait_reason(kube_env: KubeEnv, namespace: str, name: str, reason: str) -> None:
    # Kopf posts events from a queue of its own: they may land a moment after the status.
    deadline = time.monotonic() + 20
    while reason not in _reasons(kube_env, namespace, name):
        assert time.monotonic() < deadline, f"no {reason} event: {_reasons(kube_env, namespace, name)}"
        time.sleep(0.3)


def _remove_crd(kube_env: KubeEnv) -> None:
    kube_env.kubectl("delete", "crd", CRD, "--ignore-not-found", "--wait=true", timeout=120)


@pytest.fixture
def without_crd(kube_env: KubeEnv) -> Iterator[None]:
    _remove_crd(kube_env)
    try:
        yield
    finally:
        _remove_crd(kube_env)  # other tests of the session must not find it


@pytest.mark.parametrize("operator", [OPTION], indirect=True)
def test_without_the_crd_the_job_runs_and_says_so_once_then_gets_its_monitor_once_installed(
    kube_env: KubeEnv,
    kube_namespace: str,
    without_crd: None,
    operator: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The operator runs on a thread of this test: it looks for a missing CRD again after 5 s, not 30.
    monkeypatch.setattr(monitoring, "CRD_RECHECK_S", 5.0)
    ns = kube_namespace
    kube_env.kubectl("apply", "-f", "-", input=streamjob_manifest("plain", parallelism=1), namespace=ns)
    job = kube_env.wait_for("streamjob plain", _monitored, namespace=ns, timeout=60)
    monitored = _monitored(job)
    assert monitored is not None
    assert (monitored["status"], monitored["reason"]) == ("False", "PodMonitorCRDMissing")
    assert CRD in monitored["message"] and "metrics.jobs.podMonitor.enabled" in monitored["message"]
    # The job goes on as without the option: its coordinator pod is made, nothing is Degraded.
    pod = kube_env.wait_for("pod plain-coordinator", bool, namespace=ns, timeout=30)
    assert pod["metadata"]["labels"]["sluice.dev/role"] == "coordinator"
    job = kube_env.kubectl_json("get", "streamjob", "plain", namespace=ns)
    assert job["status"]["lifecycleState"] == "Deploying"
    degraded = next(c for c in job["status"]["conditions"] if c["type"] == "Degraded")
    assert degraded["status"] == "False" and not job["status"].get("error")
    _wait_reason(kube_env, ns, "plain", "PodMonitorCRDMissing")
    time.sleep(4)  # several reconciles at the test operator's 1 s interval
    assert _reasons(kube_env, ns, "plain").count("PodMonitorCRDMissing") == 1, "said once, not per reconcile"
    assert "ReconcileError" not in _reasons(kube_env, ns, "plain")

    # Installing prometheus-operator's CRD later is enough: no restart of the operator or the job.
    kube_env.apply_crds(CRD_DIR)
    # A missing CRD is looked for again CRD_RECHECK_S later.
    monitor = kube_env.wait_for("podmonitor plain-coordinator", bool, namespace=ns, timeout=60)
    assert monitor["spec"]["selector"]["matchLabels"] == {
        "sluice.dev/job": "plain",
        "sluice.dev/role": "coordinator",
    }
    job = kube_env.wait_for(
        "streamjob plain", lambda o: (_monitored(o) or {}).get("status") == "True", namespace=ns, timeout=30
    )
    assert (
        pod["metadata"]["uid"]
        == kube_env.kubectl_json("get", "pod", "plain-coordinator", namespace=ns)["metadata"]["uid"]
    ), "the running coordinator was left alone"
    _wait_reason(kube_env, ns, "plain", "PodMonitorCreated")


@pytest.fixture
def with_crd(kube_env: KubeEnv) -> Iterator[None]:
    kube_env.apply_crds(CRD_DIR)
    try:
        yield
    finally:
        _remove_crd(kube_env)


@pytest.mark.parametrize("operator", [OPTION], indirect=True)
def test_each_job_gets_a_pod_monitor_that_scrapes_its_coordinator_with_its_token(
    kube_env: KubeEnv, kube_namespace: str, with_crd: None, operator: Any
) -> None:
    ns = kube_namespace
    kube_env.kubectl("apply", "-f", "-", input=streamjob_manifest("counts", parallelism=1), namespace=ns)
    monitor = kube_env.wait_for("podmonitor counts-coordinator", bool, namespace=ns, timeout=60)
    job = kube_env.kubectl_json("get", "streamjob", "counts", namespace=ns)
    (ref,) = monitor["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
        "StreamJob",
        "counts",
        job["metadata"]["uid"],
        True,
    )
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint == {
        "port": "rest",
        "path": "/metrics",
        "interval": "15s",
        "authorization": {"type": "Bearer", "credentials": {"name": "counts-auth", "key": "rest-token"}},
    }
    # What it names exists: the coordinator pod it selects, with that port, and the job's token.
    pod = kube_env.wait_for("pod counts-coordinator", bool, namespace=ns, timeout=30)
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert ports["rest"] == 8081
    secret = kube_env.kubectl_json("get", "secret", "counts-auth", namespace=ns)
    token = base64.b64decode(secret["data"]["rest-token"]).decode()
    assert "--rest-auth" in pod["spec"]["containers"][0]["args"] and len(token) >= 32
    # Prometheus' pods may reach the REST port through the job's NetworkPolicy.
    policy = kube_env.kubectl_json("get", "networkpolicy", "counts-network", namespace=ns)
    rest_rule = policy["spec"]["ingress"][1]
    assert {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
    } in rest_rule["from"]
    job = kube_env.wait_for(
        "streamjob counts", lambda o: (_monitored(o) or {}).get("status") == "True", namespace=ns, timeout=30
    )

    # Someone edits it: the operator puts its fields back.
    kube_env.kubectl(
        "patch", "podmonitor", "counts-coordinator", "--type=json",
        "-p", '[{"op": "replace", "path": "/spec/podMetricsEndpoints/0/path", "value": "/other"}]',
        namespace=ns,
    )  # fmt: skip
    kube_env.wait_for(
        "podmonitor counts-coordinator",
        lambda o: o["spec"]["podMetricsEndpoints"][0]["path"] == "/metrics",
        namespace=ns,
        timeout=30,
    )

    # It goes with the job.
    kube_env.kubectl("delete", "streamjob", "counts", "--wait=false", namespace=ns)
    kube_env.wait_for(
        "podmonitors", lambda o: not any(i["metadata"]["name"] == "counts-coordinator" for i in o["items"]),
        namespace=ns, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("operator", [OPTION], indirect=True)
def test_a_pod_monitor_the_job_does_not_own_is_left_alone_and_reported(
    kube_env: KubeEnv, kube_namespace: str, with_crd: None, operator: Any
) -> None:
    ns = kube_namespace
    theirs = """\
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata: {name: mine-coordinator}
spec:
  selector: {matchLabels: {app: something-else}}
  podMetricsEndpoints: [{port: web, path: /stats}]
"""
    kube_env.kubectl("apply", "-f", "-", input=theirs, namespace=ns)
    kube_env.kubectl("apply", "-f", "-", input=streamjob_manifest("mine", parallelism=1), namespace=ns)
    job = kube_env.wait_for("streamjob mine", _monitored, namespace=ns, timeout=60)
    monitored = _monitored(job)
    assert monitored is not None
    assert (monitored["status"], monitored["reason"]) == ("False", "PodMonitorConflict")
    assert "does not belong to StreamJob mine" in monitored["message"]
    kube_env.wait_for("pod mine-coordinator", bool, namespace=ns, timeout=30)  # the job goes on
    time.sleep(2)
    monitor = kube_env.kubectl_json("get", "podmonitor", "mine-coordinator", namespace=ns)
    assert monitor["spec"]["podMetricsEndpoints"] == [{"port": "web", "path": "/stats"}]
    assert not monitor["metadata"].get("ownerReferences")
    # Deleting the job leaves it too.
    kube_env.kubectl("delete", "streamjob", "mine", "--wait=true", namespace=ns, timeout=90)
    assert kube_env.kubectl_json("get", "podmonitor", "mine-coordinator", namespace=ns)["spec"]["selector"]

"""The chart's `metrics.jobs` values: the PodMonitor option reaches the operator, with the rights it needs.

Needs the `helm` binary of the Kubernetes test binaries (scripts/k8s-binaries.sh), like test_chart.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice_operator.models import OperatorConfig, PodMonitorConfig, ScraperConfig
from testkit.kube import k8s_bin_dir

CHART = Path(__file__).resolve().parents[3] / "charts" / "sluice-operator"

ENABLED = (
    "metrics.jobs.podMonitor.enabled=true",
    "metrics.jobs.podMonitor.labels.release=prometheus",
    "metrics.jobs.podMonitor.interval=30s",
    "metrics.jobs.scraper.podLabels.app\\.kubernetes\\.io/name=prometheus",
    "metrics.jobs.scraper.namespace=monitoring",
    "watchNamespaces={jobs}",
)


@pytest.fixture(scope="module")
def helm() -> Path:
    return k8s_bin_dir() / "helm"


def _run_helm(helm: Path, *args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {f"HELM_{kind}_HOME": str(tmp / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")}
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, env={**env, "PATH": "/usr/bin:/bin"},
        timeout=120, check=False,
    )  # fmt: skip


def _render(helm: Path, tmp: Path, *sets: str) -> list[dict[str, Any]]:
    args = ["template", "sluice", str(CHART), "--namespace", "sluice-system"]
    for value in sets:
        args += ["--set", value]
    result = _run_helm(helm, *args, tmp=tmp)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def _find(docs: list[dict[str, Any]], kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
    return [
        d
        for d in docs
        if d["kind"] == kind and (namespace is None or d["metadata"].get("namespace") == namespace)
    ]


def _env(docs: list[dict[str, Any]]) -> dict[str, str]:
    (deployment,) = _find(docs, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def _operator_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (role,) = [r for r in _find(docs, "Role", "jobs") if r["metadata"]["name"] == "sluice-sluice-operator"]
    return list(role["rules"])


def test_the_option_reaches_the_operator_with_rights_to_podmonitors(helm: Path, tmp_path: Path) -> None:
    docs = _render(helm, tmp_path, *ENABLED)
    config = OperatorConfig.from_env(_env(docs))
    assert config.pod_monitor == PodMonitorConfig({"release": "prometheus"}, "30s")
    assert config.scraper == ScraperConfig({"app.kubernetes.io/name": "prometheus"}, "monitoring")
    (rule,) = [r for r in _operator_rules(docs) if "podmonitors" in r["resources"]]
    assert rule == {
        "apiGroups": ["monitoring.coreos.com"],
        "resources": ["podmonitors"],
        "verbs": ["get", "create", "patch", "delete"],
    }
    args = ["lint", "--strict", str(CHART)]
    for value in ENABLED:
        args += ["--set", value]
    linted = _run_helm(helm, *args, tmp=tmp_path)
    assert "0 chart(s) failed" in linted.stdout, linted.stdout + linted.stderr


def test_off_by_default_and_then_no_rights_to_podmonitors(helm: Path, tmp_path: Path) -> None:
    docs = _render(helm, tmp_path, "watchNamespaces={jobs}")
    env = _env(docs)
    assert "SLUICE_OPERATOR_POD_MONITOR" not in env
    assert OperatorConfig.from_env(env).pod_monitor is None
    assert not any("podmonitors" in r["resources"] for r in _operator_rules(docs))


def test_with_network_policies_prometheus_pods_must_be_named(helm: Path, tmp_path: Path) -> None:
    result = _run_helm(
        helm, "template", "sluice", str(CHART), "--set", "metrics.jobs.podMonitor.enabled=true", tmp=tmp_path
    )
    assert result.returncode != 0
    assert "needs metrics.jobs.scraper.podLabels" in result.stderr, result.stderr
    # Without NetworkPolicies nothing stands between Prometheus and the REST port.
    docs = _render(helm, tmp_path, "metrics.jobs.podMonitor.enabled=true", "networkPolicy.enabled=false")
    assert OperatorConfig.from_env(_env(docs)).pod_monitor == PodMonitorConfig({}, None)

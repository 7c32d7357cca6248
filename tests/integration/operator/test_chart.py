"""The Helm chart lints and renders least-privilege RBAC, the CRDs and the operator Deployment.

Needs the `helm` binary of the Kubernetes test binaries (scripts/k8s-binaries.sh); without it these
tests fail and say how to build it, rather than being skipped.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice_operator.__main__ import parse
from sluice_operator.models import OperatorConfig
from testkit.kube import k8s_bin_dir

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "sluice-operator"


@pytest.fixture(scope="module")
def helm() -> Path:
    return k8s_bin_dir() / "helm"


def _helm(helm: Path, *args: str, tmp: Path) -> str:
    result = _run_helm(helm, *args, tmp=tmp)
    assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _run_helm(helm: Path, *args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "HELM_CACHE_HOME": str(tmp / "cache"),
        "HELM_CONFIG_HOME": str(tmp / "config"),
        "HELM_DATA_HOME": str(tmp / "data"),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def _render(helm: Path, tmp: Path, *sets: str) -> list[dict[str, Any]]:
    args = ["template", "sluice", str(CHART), "--namespace", "sluice-system", "--include-crds"]
    for value in sets:
        args += ["--set", value]
    return [doc for doc in yaml.safe_load_all(_helm(helm, *args, tmp=tmp)) if doc]


def _find(docs: list[dict[str, Any]], kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
    return [
        d
        for d in docs
        if d["kind"] == kind and (namespace is None or d["metadata"].get("namespace") == namespace)
    ]


@pytest.mark.parametrize(
    "sets",
    [(), ("rbac.clusterWide=true",), ("leaderElection.enabled=false",), ("replicas=2",)],
)
def test_helm_lint(helm: Path, tmp_path: Path, sets: tuple[str, ...]) -> None:
    args = ["lint", "--strict", str(CHART)]
    for value in sets:
        args += ["--set", value]
    assert "0 chart(s) failed" in _helm(helm, *args, tmp=tmp_path)


def test_default_install_is_namespaced_and_least_privilege(helm: Path, tmp_path: Path) -> None:
    docs = _render(helm, tmp_path)
    crds = {d["metadata"]["name"] for d in _find(docs, "CustomResourceDefinition")}
    assert {"streamjobs.sluice.dev", "savepoints.sluice.dev", "kopfpeerings.kopf.dev"} <= crds
    (role,) = [
        r for r in _find(docs, "Role", "sluice-system") if r["metadata"]["name"] == "sluice-sluice-operator"
    ]
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"], rule
        if "secrets" in rule["resources"]:
            # Storage credentials are read; a job's own Secret is created once and deleted with the job.
            assert rule["verbs"] == ["get", "create", "delete"]
    (cluster_role,) = _find(docs, "ClusterRole")
    assert [r["resources"] for r in cluster_role["rules"]] == [["customresourcedefinitions"]]
    (deployment,) = _find(docs, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:4] == [
        "operator",
        "--namespace=sluice-system",
        "--peering=sluice-operator",
        "--peering-lifetime=60",
    ]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert "SLUICE_OPERATOR_STORAGE" not in env  # no default storage: jobs name theirs or are Degraded
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert [p["metadata"]["namespace"] for p in _find(docs, "KopfPeering")] == ["sluice-system"]


def test_watched_namespaces_get_roles_job_accounts_and_peerings(helm: Path, tmp_path: Path) -> None:
    docs = _render(
        helm,
        tmp_path,
        "watchNamespaces={jobs-a,jobs-b}",
        "operator.storage=s3://bucket/sluice",
        "operator.jobEnv.AWS_ENDPOINT_URL=http://s3:9000",
        "operator.allowedSavepointPrefixes={s3://backups/a,s3://backups/b}",
    )
    for ns in ("jobs-a", "jobs-b"):
        names = {r["metadata"]["name"] for r in _find(docs, "Role", ns)}
        assert names == {"sluice-sluice-operator", "sluice-job"}
        (account,) = _find(docs, "ServiceAccount", ns)
        assert account["metadata"]["name"] == "sluice-job"
        driver = next(r for r in _find(docs, "Role", ns) if r["metadata"]["name"] == "sluice-job")
        assert set(driver["rules"][0]["resources"]) == {
            "pods",
            "services",
            "configmaps",
            "persistentvolumeclaims",
        }
    container = _find(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    assert "--namespace=jobs-a" in container["args"] and "--namespace=jobs-b" in container["args"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["SLUICE_OPERATOR_STORAGE"] == "s3://bucket/sluice"
    assert env["SLUICE_OPERATOR_JOB_ENV_AWS_ENDPOINT_URL"] == "http://s3:9000"
    assert env["SLUICE_OPERATOR_ALLOWED_SAVEPOINT_PREFIXES"] == "s3://backups/a,s3://backups/b"


def test_cluster_wide_rbac(helm: Path, tmp_path: Path) -> None:
    docs = _render(helm, tmp_path, "rbac.clusterWide=true")
    assert _find(docs, "Role", "sluice-system") == [
        r for r in _find(docs, "Role", "sluice-system") if r["metadata"]["name"] == "sluice-job"
    ]
    (cluster_role,) = _find(docs, "ClusterRole")
    resources = {res for rule in cluster_role["rules"] for res in rule["resources"]}
    assert {"streamjobs", "pods", "namespaces", "clusterkopfpeerings"} <= resources
    container = _find(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    assert "--all-namespaces" in container["args"]
    assert len(_find(docs, "ClusterKopfPeering")) == 1


def test_without_leader_election_the_operator_runs_standalone(helm: Path, tmp_path: Path) -> None:
    docs = _render(helm, tmp_path, "leaderElection.enabled=false")
    deployment = _find(docs, "Deployment")[0]
    assert "--standalone" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert _find(docs, "KopfPeering") == []


def test_chart_crds_are_the_generated_ones() -> None:
    for path in (ROOT / "crds").glob("*.yaml"):
        assert (CHART / "crds" / path.name).read_text() == path.read_text()


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = _find(docs, "Deployment")
    return dict(deployment["spec"]["template"]["spec"]["containers"][0])


def test_replicas_elect_a_leader_through_the_peering_object(
    helm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = _render(helm, tmp_path, "replicas=2", "leaderElection.lifetime=30", "watchNamespaces={jobs}")
    (deployment,) = _find(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert "strategy" not in deployment["spec"], "rolling updates are safe: the new pod joins as standby"
    container = _container(docs)
    env = {e["name"]: e for e in container["env"]}
    # Each replica names itself after its pod, in the peering object and in the events it posts.
    identity = env["SLUICE_OPERATOR_IDENTITY"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert identity == "metadata.name"
    assert [(p["metadata"]["name"], p["metadata"]["namespace"]) for p in _find(docs, "KopfPeering")] == [
        ("sluice-operator", "jobs")
    ]
    # The operator itself accepts the rendered arguments: peering on, no fixed priority (so the
    # replicas rank by start time and never share one), the lifetime asked for.
    monkeypatch.delenv("SLUICE_OPERATOR_PRIORITY", raising=False)
    args = parse(container["args"][1:])
    assert (args.peering, args.peering_lifetime, args.standalone) == ("sluice-operator", 30, False)
    assert args.namespace == ["jobs"]
    assert args.priority < 0
    time.sleep(0.002)
    assert parse(container["args"][1:]).priority < args.priority, "a replica started later ranks lower"


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (("replicas=2", "leaderElection.enabled=false"), "replicas > 1 needs leaderElection.enabled=true"),
        (("leaderElection.lifetime=10",), "leaderElection.lifetime must be at least 15"),
    ],
)
def test_unsafe_leader_election_values_are_refused(
    helm: Path, tmp_path: Path, sets: tuple[str, ...], message: str
) -> None:
    args = ["template", "sluice", str(CHART)]
    for value in sets:
        args += ["--set", value]
    result = _run_helm(helm, *args, tmp=tmp_path)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_operator_pod_meets_the_restricted_standard(helm: Path, tmp_path: Path) -> None:
    (deployment,) = _find(_render(helm, tmp_path), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = pod["containers"][0]
    context = container["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["readOnlyRootFilesystem"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    writable = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    assert set(writable) == {"/tmp", "/home/sluice"}
    assert all("emptyDir" in volume for volume in writable.values())


def test_network_policies_and_the_operators_identity_for_them(helm: Path, tmp_path: Path) -> None:
    docs = _render(helm, tmp_path, "watchNamespaces={jobs}")
    env = {e["name"]: e.get("value") for e in _container(docs)["env"]}
    assert env["SLUICE_OPERATOR_NETWORK_POLICIES"] == "true"
    assert env["SLUICE_OPERATOR_POD_NAMESPACE"] == "sluice-system"
    # The labels the per-job policies let through are exactly the Deployment's pod labels.
    (deployment,) = _find(docs, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    pairs = dict(item.split("=", 1) for item in env["SLUICE_OPERATOR_POD_LABELS"].split(","))
    assert pairs.items() <= pod_labels.items() and pairs
    (policy,) = _find(docs, "NetworkPolicy", "sluice-system")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert [p["port"] for p in policy["spec"]["ingress"][0]["ports"]] == [8080, 9090]
    (role,) = [r for r in _find(docs, "Role", "jobs") if r["metadata"]["name"] == "sluice-sluice-operator"]
    assert any("networkpolicies" in rule["resources"] for rule in role["rules"])
    # The operator itself accepts what the chart gives it.
    config = OperatorConfig.from_env({k: v for k, v in env.items() if v is not None})
    assert config.network_policies and config.operator_pod_labels == pairs


def test_network_policies_and_privileged_pods_are_values(helm: Path, tmp_path: Path) -> None:
    docs = _render(helm, tmp_path, "networkPolicy.enabled=false", "operator.allowPrivilegedPods=true")
    assert _find(docs, "NetworkPolicy") == []
    env = {e["name"]: e.get("value") for e in _container(docs)["env"]}
    assert env["SLUICE_OPERATOR_NETWORK_POLICIES"] == "false"
    assert env["SLUICE_OPERATOR_ALLOW_PRIVILEGED_PODS"] == "true"
    (role,) = [r for r in _find(docs, "Role") if r["metadata"]["name"] == "sluice-sluice-operator"]
    assert not any("networkpolicies" in rule["resources"] for rule in role["rules"])

"""The operator installed from the Helm chart, for clusters whose pod IPs this machine cannot reach (kind).

There the operator runs in the cluster, installed from charts/sluice-operator, and is restarted by
deleting its pod; its metrics are read through the API server's pod proxy.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from e2e._operator import (
    CHART,
    IMAGE_REPOSITORY,
    IMAGE_TAG,
    Metrics,
    coordinator_rest_port,
    free_port,
    scrape,
)
from e2e._storage import E2EStorage
from testkit.kube import KubeCommandError, KubeEnv
from testkit.kubelet import ProcessKubelet

_NODE_CONDITIONS = (
    "jsonpath={range .items[*]}{.metadata.name}: {range .status.conditions[*]}{.type}={.status} {end}"
    "taints={.spec.taints}{'\\n'}{end}"
)


@dataclass
class ChartOperator:
    """The operator installed from charts/sluice-operator: cluster-wide into a namespace of its own (for
    clusters whose pod IPs this machine cannot reach, kind), or watching its release namespace."""

    kube: KubeEnv
    storage: E2EStorage
    namespace: str = "sluice-e2e-operator"
    release: str = "sluice-e2e"
    cluster_wide: bool = True
    kubelet: ProcessKubelet | None = None
    """Where container logs come from under the process kubelet (it has no `kubectl logs`)."""
    metrics_port: int = field(default_factory=free_port)

    def values(self) -> dict[str, object]:
        # The process kubelet's pods share this machine's network: the coordinators get a port of their
        # own, as under a LocalOperator. A real cluster keeps the chart's default.
        rest_port = coordinator_rest_port() if self.kubelet is not None else None
        return helm_values(
            self.storage,
            cluster_wide=self.cluster_wide,
            metrics_port=self.metrics_port,
            coordinator_rest_port=rest_port,
        )

    def start(self, timeout: float = 180.0) -> None:
        try:
            self._install_or_scale_up(timeout)
        except KubeCommandError as error:
            # A CI run shows only the test's output: what the pods were doing is the only clue to why
            # the operator never became ready (image, admission, crash, probe).
            raise RuntimeError(f"{error}\n{self.diagnostics()}") from error

    def _install_or_scale_up(self, timeout: float) -> None:
        installed = self.kube.helm("status", self.release, namespace=self.namespace, check=False)
        if installed.returncode != 0:
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as values:
                yaml.safe_dump(self.values(), values)
            try:
                self.kube.helm(
                    "install",
                    self.release,
                    str(CHART),
                    "--namespace",
                    self.namespace,
                    "--create-namespace",
                    "--values",
                    values.name,
                    "--wait",
                    f"--timeout={int(timeout)}s",
                    timeout=timeout + 30,
                )
            finally:
                # It holds the test storage's credentials; every e2e run left one in $TMPDIR.
                Path(values.name).unlink(missing_ok=True)
        else:
            self.kube.kubectl("scale", "deployment", "--all", "--replicas=1", namespace=self.namespace)
        self.kube.kubectl(
            "rollout",
            "status",
            "deployment",
            f"--timeout={int(timeout)}s",
            namespace=self.namespace,
            timeout=timeout + 10,
        )

    def diagnostics(self) -> str:
        """The namespace's pods, their descriptions and events, and the operator's logs (also the
        previous container's): what a failed start leaves to read."""
        parts = []
        for title, args in (
            ("nodes", ("get", "nodes", "-o", _NODE_CONDITIONS)),
            ("deployments and replica sets", ("get", "deployments,replicasets", "-o", "wide")),
            ("pods", ("get", "pods", "-o", "wide")),
            ("pod descriptions", ("describe", "pods")),
            ("events", ("get", "events", "--sort-by=.lastTimestamp")),
            ("operator log", ("logs", "-l", "app.kubernetes.io/name=sluice-operator", "--tail=60")),
            ("previous operator log", ("logs", "-l", "app.kubernetes.io/name=sluice-operator", "--previous")),
        ):
            result = self.kube.kubectl(*args, namespace=self.namespace, check=False)
            parts.append(f"--- {title} in {self.namespace}:\n{(result.stdout or result.stderr).strip()}")
        return "\n".join(parts)

    def ensure_started(self) -> None:
        self.start()

    def crash(self) -> None:
        self.kube.kubectl("scale", "deployment", "--all", "--replicas=0", namespace=self.namespace)
        self.kube.kubectl(
            "delete", "pods", "--all", "--grace-period=0", "--force", namespace=self.namespace, check=False
        )
        self.kube.wait_for("pods", lambda pods: not pods["items"], namespace=self.namespace, timeout=60)

    def stop(self) -> None:
        self.uninstall()

    def uninstall(self) -> subprocess.CompletedProcess[str]:
        """`helm uninstall --wait` of the release; what helm said, whether it worked or not."""
        return self.kube.helm("uninstall", self.release, "--wait", namespace=self.namespace, check=False)

    def logs(self, lines: int = 80) -> str:
        if self.kubelet is not None:
            pods = self.kube.kubectl(
                "get",
                "pods",
                "-l",
                "app.kubernetes.io/name=sluice-operator",
                "-o",
                "jsonpath={.items[*].metadata.name}",
                namespace=self.namespace,
                check=False,
            ).stdout.split()
            texts = [self.kubelet.container_log(self.namespace, pod, "operator") for pod in pods]
            return "\n".join("\n".join(text.splitlines()[-lines:]) for text in texts) or "(no operator pod)"
        result = self.kube.kubectl(
            "logs",
            "deployment/" + self.deployment(),
            f"--tail={lines}",
            namespace=self.namespace,
            check=False,
        )
        return result.stdout or result.stderr

    def metrics(self) -> Metrics:
        pods = self.kube.kubectl_json(
            "get", "pods", "-l", "app.kubernetes.io/name=sluice-operator", namespace=self.namespace
        )["items"]
        running = [p for p in pods if p.get("status", {}).get("phase") == "Running"]
        if not running:
            raise RuntimeError(f"no running operator pod in {self.namespace}")
        pod = running[0]
        if self.kubelet is not None:  # pod IPs are loopback addresses of this machine
            return scrape(f"http://{pod['status']['podIP']}:{self.metrics_port}/metrics")
        name = pod["metadata"]["name"]
        raw = f"/api/v1/namespaces/{self.namespace}/pods/{name}:{self.metrics_port}/proxy/metrics"
        return Metrics.parse(self.kube.kubectl("get", "--raw", raw).stdout)

    def deployment(self) -> str:
        names = self.kube.kubectl(
            "get", "deployments", "-o", "jsonpath={.items[*].metadata.name}", namespace=self.namespace
        ).stdout.split()
        return names[0] if names else "sluice-operator"


def helm_values(
    storage: E2EStorage,
    *,
    cluster_wide: bool = False,
    namespaces: list[str] | None = None,
    metrics_port: int | None = None,
    coordinator_rest_port: int | None = None,
) -> dict[str, object]:
    """Chart values that point the operator and every job pod at the test storage; with
    `coordinator_rest_port`, the coordinators serve their REST API on that port (docs/operator.md)."""
    extra_env = [{"name": k, "value": v} for k, v in storage.env.items()]
    if coordinator_rest_port is not None:
        port = {"name": "SLUICE_OPERATOR_COORDINATOR_REST_PORT", "value": str(coordinator_rest_port)}
        extra_env.append(port)
    return {
        "image": {"repository": IMAGE_REPOSITORY, "tag": IMAGE_TAG, "pullPolicy": "IfNotPresent"},
        "watchNamespaces": namespaces or [],
        "rbac": {"clusterWide": cluster_wide},
        "operator": {
            "storage": storage.root,
            "reconcileInterval": "1s",
            "allowedSavepointPrefixes": storage.allowed_savepoint_prefixes,
            "jobEnv": dict(storage.env),
            "extraEnv": extra_env,
        },
        # The process kubelet runs pods in the host's network: keep off well-known ports.
        "metrics": {"port": metrics_port or free_port()},
    }

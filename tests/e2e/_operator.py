"""The operator under test: a local `sluice-operator` process (or two, under leader election).

With the process kubelet every pod IP is a loopback address of this machine, so an operator started here
reaches the coordinators' REST APIs just as one in the cluster would. On an external cluster (kind) pod
IPs are not routable from the test machine: there the operator runs in the cluster, installed from the
chart (_chart_operator.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from prometheus_client.parser import text_string_to_metric_families

from e2e._storage import E2EStorage
from testkit.kube import KubeEnv
from testkit.ports import free_loopback_port, free_server_port

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "sluice-operator"
# Test namespaces all start with this; the operator watches them as a kopf namespace pattern.
NAMESPACE_PREFIX = "e2e-"
IMAGE_REPOSITORY, IMAGE_TAG = "sluice", "dev"  # what examples/k8s/*.yaml name, and what kind/run.sh loads


def free_port() -> int:
    # Below the ephemeral range, checked free (testkit.ports): a port the kernel hands out for bind(0) can
    # be taken by any outgoing connection before the server binds it (seen: the operator's health port).
    return free_loopback_port()


def coordinator_rest_port() -> int:
    """A port no server of this machine holds on 0.0.0.0 now, for one operator's coordinators.

    Under the process kubelet pods share this machine's network, and each coordinator binds its REST
    port on 0.0.0.0: each operator of a test session (and of concurrent sessions) gets its own port, so
    jobs of different operators run at the same time. One operator runs its jobs one after another.
    Drawn below the ephemeral range (`testkit.ports`): a port picked once and then free between one job
    and the next could otherwise become the local port of an outgoing connection meanwhile.
    """
    return free_server_port("0.0.0.0")


class Operator(Protocol):
    def logs(self, lines: int = 80) -> str: ...

    def crash(self) -> None:
        """Kill the operator at once (no graceful shutdown), and leave it down."""

    def start(self) -> None:
        """Start it (again) and wait until it serves."""

    def stop(self) -> None: ...

    def ensure_started(self) -> None:
        """Start it if a test left it down."""

    def metrics(self) -> Metrics:
        """A scrape of the operator's Prometheus endpoint, /metrics."""


@dataclass(frozen=True)
class Metrics:
    """One scrape of /metrics, parsed as Prometheus text format."""

    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]

    @classmethod
    def parse(cls, text: str) -> Metrics:
        samples = {
            (sample.name, frozenset(sample.labels.items())): float(sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }
        return cls(samples)

    def value(self, name: str, **labels: str) -> float:
        """The sample with exactly these labels; 0 when the series was never exported."""
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def series(self, name: str) -> dict[frozenset[tuple[str, str]], float]:
        return {labels: v for (n, labels), v in self.samples.items() if n == name}


def scrape(url: str) -> Metrics:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return Metrics.parse(answer.read().decode())


def operator_env(storage: E2EStorage) -> dict[str, str]:
    """The operator's configuration (docs/operator.md): storage root, its credentials, job pod env."""
    env = {
        "SLUICE_OPERATOR_STORAGE": storage.root,
        # Quick reactions: the tests wait on what the operator observes.
        "SLUICE_OPERATOR_RECONCILE_INTERVAL": "1s",
        # As the chart configures it; the API server checks the policies even where nothing enforces them.
        "SLUICE_OPERATOR_NETWORK_POLICIES": "true",
        "SLUICE_OPERATOR_POD_LABELS": "app.kubernetes.io/name=sluice-operator",
        "SLUICE_OPERATOR_ALLOWED_SAVEPOINT_PREFIXES": ",".join(storage.allowed_savepoint_prefixes),
        **storage.env,
    }
    env.update({f"SLUICE_OPERATOR_JOB_ENV_{k}": v for k, v in storage.env.items()})
    return env


@dataclass
class LocalOperator:
    """`python -m sluice_operator` on this machine, by default watching every `e2e-*` namespace on its
    own (`--standalone`); with `peering`, one replica under leader election."""

    kube: KubeEnv
    storage: E2EStorage
    workdir: Path
    process: subprocess.Popen[bytes] | None = None
    metrics_port: int = 0
    runs: int = 0
    name: str = "operator"
    namespaces: tuple[str, ...] = (f"{NAMESPACE_PREFIX}*",)
    peering: str | None = None
    peering_lifetime: int = 20
    # Kept across restarts; a replica that takes over a job calls it on the port its pod was made with.
    rest_port: int = field(default_factory=coordinator_rest_port)
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.workdir / f"{self.name}.log"

    @property
    def identity(self) -> str:
        """Its name in the peering object and in the events it posts; new for every start."""
        return f"{self.name}-run{self.runs}"

    def command(self) -> list[str]:
        election = (
            ["--peering", self.peering, "--peering-lifetime", str(self.peering_lifetime)]
            if self.peering
            else ["--standalone"]
        )
        return [
            sys.executable,
            "-m",
            "sluice_operator",
            *(f"--namespace={ns}" for ns in self.namespaces),
            *election,
            "--identity",
            self.identity,
            "--liveness",
            f"http://127.0.0.1:{free_port()}/healthz",
        ]

    def start(self, timeout: float = 60.0) -> None:
        self.metrics_port = free_port()
        env = {
            **os.environ,
            **operator_env(self.storage),
            "KUBECONFIG": str(self.kube.kubeconfig),
            "SLUICE_OPERATOR_METRICS_PORT": str(self.metrics_port),
            "SLUICE_OPERATOR_COORDINATOR_REST_PORT": str(self.rest_port),
        }
        # This machine's own in-cluster variables (if any) must not win over the kubeconfig.
        env.pop("KUBERNETES_SERVICE_HOST", None)
        self.runs += 1
        with self.log.open("ab") as sink:
            sink.write(f"===== operator run {self.runs} =====\n".encode())
            sink.flush()
            self.process = subprocess.Popen(
                self.command(),
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the operator exited with {self.process.returncode}:\n{self.logs()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"the operator did not serve /metrics within {timeout:.0f}s:\n{self.logs()}")

    def ensure_started(self) -> None:
        if not self.alive():
            self.start()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def metrics(self) -> Metrics:
        return scrape(f"http://127.0.0.1:{self.metrics_port}/metrics")

    def crash(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def logs(self, lines: int = 80) -> str:
        if not self.log.exists():
            return "(no operator log)"
        text = self.log.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


@dataclass
class PeeredOperators:
    """Replicas of the operator under kopf peering (leader election) on the same exact namespaces.

    They are started one after another, each only once the previous one shows in the peering object,
    so the order of starts is the order of age, which is what ranks them (`--priority` by start time).
    `crash()` kills the leader, as a node failure would.
    """

    kube: KubeEnv
    replicas: list[LocalOperator]
    peering: str

    @property
    def namespace(self) -> str:
        return self.replicas[0].namespaces[0]

    def start(self) -> None:
        for replica in self.replicas:
            if not replica.alive():
                replica.start()
                self.wait_peer(replica)

    def ensure_started(self) -> None:
        self.start()

    def stop(self) -> None:
        for replica in self.replicas:
            replica.stop()

    def crash(self) -> None:
        self.leader().crash()

    def metrics(self) -> Metrics:
        return self.leader().metrics()

    def logs(self, lines: int = 80) -> str:
        return "\n".join(f"===== {r.name} ({r.identity}) =====\n{r.logs(lines)}" for r in self.replicas)

    def peers(self) -> dict[str, dict[str, Any]]:
        """The peering object's status: identity -> {priority, lifetime, lastseen}, as kopf keeps it."""
        body = self.kube.kubectl_json("get", "kopfpeering", self.peering, namespace=self.namespace)
        return dict(body.get("status") or {})

    def wait_peer(self, replica: LocalOperator, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            entry = self.peers().get(replica.identity)
            if entry is not None:
                return entry
            time.sleep(0.5)
        raise RuntimeError(f"{replica.identity} never showed in KopfPeering {self.peering}:\n{self.logs()}")

    def leader(self) -> LocalOperator:
        """The running replica with the highest priority among the peering object's entries."""
        peers = self.peers()
        alive = [r for r in self.replicas if r.alive() and r.identity in peers]
        if not alive:
            raise RuntimeError(f"no running replica in KopfPeering {self.peering}: {peers}")
        return max(alive, key=lambda r: int(peers[r.identity]["priority"]))

"""Fixtures: the Kubernetes test environment and a real `sluice-operator` process per test."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit.kube import KubeEnv, kube_env, kube_namespace, process_kubelet  # noqa: F401  (fixtures)

# What the per-job NetworkPolicies let call the REST API (the chart gives its pods' labels).
OPERATOR_LABELS = "app.kubernetes.io/name=sluice-operator"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class OperatorProcess:
    process: subprocess.Popen[bytes]
    log: Path
    metrics_port: int
    storage: Path

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as answer:
            return str(answer.read().decode())


@pytest.fixture
def operator(
    kube_env: KubeEnv,  # noqa: F811
    kube_namespace: str,  # noqa: F811
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[OperatorProcess]:
    """A test may change the operator's environment by indirect parametrization: {VAR: value or None}."""
    log = tmp_path / "operator.log"
    storage = tmp_path / "storage"
    storage.mkdir()
    port = _free_port()
    env = {
        **os.environ,
        "KUBECONFIG": str(kube_env.kubeconfig),
        "SLUICE_OPERATOR_STORAGE": f"file://{storage}",
        "SLUICE_OPERATOR_RECONCILE_INTERVAL": "1s",
        "SLUICE_OPERATOR_METRICS_PORT": str(port),
        "SLUICE_OPERATOR_NETWORK_POLICIES": "true",
        "SLUICE_OPERATOR_POD_LABELS": OPERATOR_LABELS,
    }
    env.pop("KUBERNETES_SERVICE_HOST", None)
    for key, value in getattr(request, "param", {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sluice_operator",
                "--namespace",
                kube_namespace,
                "--standalone",
                "--liveness",
                f"http://127.0.0.1:{_free_port()}/healthz",
                "--verbose",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    running = OperatorProcess(process, log, port, storage)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the operator exited with {process.returncode}:\n{running.logs()[-5000:]}")
        try:
            running.metrics()
            break
        except OSError:
            time.sleep(0.3)
    else:
        pytest.fail(f"the operator did not start in 60 s:\n{running.logs()[-5000:]}")
    try:
        yield running
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

"""Fixtures: the Kubernetes test environment and a `sluice-operator` per test.

`operator` runs the operator's own `main` on a thread of the test process, with the environment and
arguments the process would get, and stops it with kopf's stop flag: no interpreter start and no
import of kopf and the Kubernetes client per test. `operator_process` is a real `python -m
sluice_operator` process, for what only a process shows (its command line, its environment, exiting).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from testkit.kube import KubeEnv, kube_env, kube_namespace, process_kubelet  # noqa: F401  (fixtures)
from testkit.ports import free_loopback_port

# What the per-job NetworkPolicies let call the REST API (the chart gives its pods' labels).
OPERATOR_LABELS = "app.kubernetes.io/name=sluice-operator"
_START_TIMEOUT_S = 60


def _free_port() -> int:
    # Below the ephemeral range, checked free (testkit.ports): a port the kernel hands out for bind(0) can
    # be taken by any outgoing connection before the server binds it (seen: the operator's health port).
    return free_loopback_port()


@dataclass
class RunningOperator:
    log: Path
    metrics_port: int
    storage: Path
    running: Callable[[], bool]
    """Whether the operator is still running (its process or its thread)."""
    stop: Callable[[], None] = lambda: None
    """Stops the operator as its SIGTERM handler does and waits for its end (the thread's fixture)."""
    ended_with: list[BaseException] = field(default_factory=list)
    """What the operator's `main` raised on its way out (the thread's fixture): nothing, normally."""

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as answer:
            return str(answer.read().decode())

    def wait_started(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if not self.running():
                pytest.fail(f"the operator ended:\n{self.logs()[-5000:]}")
            try:
                self.metrics()
                return
            except OSError:
                time.sleep(0.1)
        pytest.fail(f"the operator did not start in {_START_TIMEOUT_S} s:\n{self.logs()[-5000:]}")


@pytest.fixture
def operator_settings() -> dict[str, str | None]:
    """More of the operator's settings, for a module to override with a fixture that needs other
    fixtures (a storage the pods can see: under the process kubelet every pod mounts an emptyDir over
    /tmp, where the file storage of `operator` lies by default)."""
    return {}


def _environment(
    kube_env: KubeEnv,  # noqa: F811
    storage: Path,
    metrics_port: int,
    request: pytest.FixtureRequest,
) -> dict[str, str | None]:
    """The operator's settings; a test may change them by indirect parametrization: {VAR: value or None},
    or with an `operator_settings` fixture of its own."""
    return {
        "KUBECONFIG": str(kube_env.kubeconfig),
        "SLUICE_OPERATOR_STORAGE": f"file://{storage}",
        "SLUICE_OPERATOR_RECONCILE_INTERVAL": "1s",
        "SLUICE_OPERATOR_METRICS_PORT": str(metrics_port),
        "SLUICE_OPERATOR_NETWORK_POLICIES": "true",
        "SLUICE_OPERATOR_POD_LABELS": OPERATOR_LABELS,
        "KUBERNETES_SERVICE_HOST": None,
        **request.getfixturevalue("operator_settings"),
        **getattr(request, "param", {}),
    }


def _arguments(namespace: str) -> list[str]:
    liveness = f"http://127.0.0.1:{_free_port()}/healthz"
    return ["--namespace", namespace, "--standalone", "--liveness", liveness, "--verbose"]


@pytest.fixture
def operator(
    kube_env: KubeEnv,  # noqa: F811
    kube_namespace: str,  # noqa: F811
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[RunningOperator]:
    """The operator on a thread of this process, logging (everything this process logs) to a file."""
    from kubernetes_asyncio.config import kube_config

    from sluice_operator.__main__ import main

    storage = tmp_path / "storage"
    storage.mkdir()
    port = _free_port()
    for name, value in _environment(kube_env, storage, port, request).items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    # kopf logs in through the Kubernetes client, which read $KUBECONFIG when this process imported it.
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kube_env.kubeconfig))
    log = tmp_path / "operator.log"
    handler = logging.FileHandler(log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)  # as --verbose does in the operator's process
    stop = threading.Event()
    ended = threading.Event()

    def run() -> None:
        try:
            main(_arguments(kube_namespace), stop_flag=stop)
        except BaseException as err:
            running.ended_with.append(err)
        finally:
            ended.set()

    def stop_and_wait() -> None:
        stop.set()
        thread.join(30)
        assert not thread.is_alive(), f"the operator did not stop in 30 s:\n{running.logs()[-5000:]}"

    thread = threading.Thread(target=run, name="sluice-operator", daemon=True)
    running = RunningOperator(log, port, storage, lambda: not ended.is_set(), stop_and_wait)
    thread.start()
    try:
        running.wait_started()
        yield running
    finally:
        try:
            stop_and_wait()
        finally:
            root.removeHandler(handler)
            root.setLevel(level)
            handler.close()
        # An exit with a traceback (a process would exit 1 on SIGTERM) fails whichever test saw it.
        assert not running.ended_with, running.ended_with


@pytest.fixture
def operator_process(
    kube_env: KubeEnv,  # noqa: F811
    kube_namespace: str,  # noqa: F811
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[RunningOperator]:
    """A real `python -m sluice_operator` process, stopped with SIGTERM as Kubernetes stops its pod."""
    storage = tmp_path / "storage"
    storage.mkdir()
    port = _free_port()
    env = dict(os.environ)
    for name, value in _environment(kube_env, storage, port, request).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    log = tmp_path / "operator.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "sluice_operator", *_arguments(kube_namespace)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    running = RunningOperator(log, port, storage, lambda: process.poll() is None)
    try:
        running.wait_started()
        yield running
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

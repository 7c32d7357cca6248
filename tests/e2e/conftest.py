"""Fixtures of the end-to-end tests: storage, the operator (one per module) and a namespace per test.

The control plane, the process kubelet and the S3 server come from the root conftest (one per session).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e._chart_operator import ChartOperator
from e2e._cluster import E2ECluster
from e2e._operator import NAMESPACE_PREFIX, LocalOperator, Operator
from e2e._storage import E2EStorage, external_endpoint
from testkit.kube import KubeEnv
from testkit.kubelet import ProcessKubelet


@pytest.fixture(scope="session")
def e2e_storage(request: pytest.FixtureRequest) -> E2EStorage:
    endpoint = external_endpoint()
    if endpoint is None:
        server = request.getfixturevalue("s3_server")
        endpoint = server.endpoint_url
    storage = E2EStorage(endpoint, f"e2e-{uuid.uuid4().hex[:12]}")
    storage.filesystem().mkdir(storage.bucket)
    return storage


@pytest.fixture(scope="module")
def operator(
    kube_env: KubeEnv,
    process_kubelet: ProcessKubelet | None,
    e2e_storage: E2EStorage,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operator]:
    """The operator for a test module: a local process, or the chart on an external cluster."""
    handle: Operator
    if process_kubelet is not None:
        handle = LocalOperator(kube_env, e2e_storage, tmp_path_factory.mktemp("operator"))
    else:
        handle = ChartOperator(kube_env, e2e_storage)  # real kubelets: `kubectl logs` works
    handle.start()
    try:
        yield handle
    finally:
        handle.stop()


def _namespace_name(test: str) -> str:
    stem = re.sub(r"[^a-z0-9]+", "-", test.lower()).strip("-")[:40].strip("-")
    return f"{NAMESPACE_PREFIX}{stem}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def e2e(
    kube_env: KubeEnv,
    process_kubelet: ProcessKubelet | None,
    operator: Operator,
    e2e_storage: E2EStorage,
    request: pytest.FixtureRequest,
) -> Iterator[E2ECluster]:
    """A fresh namespace that the operator watches; its jobs are deleted, and their pods gone, afterwards.

    Pods must be gone before the next test: under the process kubelet the coordinators of one operator
    all bind its REST port on 0.0.0.0, a port of this machine.
    """
    namespace = _namespace_name(request.node.name)
    kube_env.kubectl("create", "namespace", namespace)
    kube_env.wait_for("serviceaccount default", bool, namespace=namespace, timeout=30)
    cluster = E2ECluster(kube_env, process_kubelet, operator, e2e_storage, namespace)
    try:
        yield cluster
    finally:
        _clean_up(cluster)


def _clean_up(cluster: E2ECluster) -> None:
    cluster.operator.ensure_started()  # a test may have left it down; finalizers need it
    cluster.remove_jobs_and_pods()
    cluster.kube.kubectl("delete", "namespace", cluster.namespace, "--wait=false", check=False)


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "k8s"

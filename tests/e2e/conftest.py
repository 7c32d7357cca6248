"""Fixtures of the end-to-end tests: storage, the operator (one per session) and a namespace per test.

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
from e2e._real_node import real_node  # noqa: F401  (one session fixture for every real-node module)
from e2e._storage import E2EStorage, external_endpoint
from testkit.kube import KubeEnv
from testkit.kubelet import ProcessKubelet

_HERE = Path(__file__).resolve().parent


# First: pytest-xdist reads the groups in its own hook, which would otherwise run before this one
# when this conftest is loaded at start-up (`pytest tests/e2e`), and see none.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under `pytest -n N --dist loadgroup` every e2e test is a group of its own, so the workers share
    them out one by one: each worker has its own control plane, process kubelet and operator, and
    each operator's coordinators their own REST port, so tests of different workers run side by side.
    pytest-xdist joins every group name of a test, so the root conftest's `kube` group does not put
    them together: `e2e-<n>_kube` is a group of one test. The real node's tests stay
    together: its cluster is one per machine. (pytest hands a conftest every item of the session.)"""
    for index, item in enumerate(items):
        if not item.path.is_relative_to(_HERE):
            continue
        own = "real-node" if item.path.name.startswith("test_real_node") else f"e2e-{index}"
        item.add_marker(pytest.mark.xdist_group(own))


@pytest.fixture(scope="session")
def e2e_storage(request: pytest.FixtureRequest) -> E2EStorage:
    endpoint = external_endpoint()
    if endpoint is None:
        server = request.getfixturevalue("s3_server")
        endpoint = server.endpoint_url
    storage = E2EStorage(endpoint, f"e2e-{uuid.uuid4().hex[:12]}")
    storage.filesystem().mkdir(storage.bucket)
    return storage


@pytest.fixture(scope="session")
def operator(
    kube_env: KubeEnv,
    process_kubelet: ProcessKubelet | None,
    e2e_storage: E2EStorage,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operator]:
    """The operator of every test's namespace: a local process, or the chart on an external cluster.

    One per session (under pytest-xdist, per worker): starting it costs seconds, and each test has its
    own namespace. A test that crashes or stops it leaves it to `e2e`'s clean-up to start it again.
    """
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


EXAMPLES = _HERE.parents[1] / "examples" / "k8s"

"""`helm install` of charts/sluice-operator brings up the operator in the cluster, which runs a job.

The operator pod runs the image entrypoint's `operator` mode (under the process kubelet: the same
docker/entrypoint.sh on this machine), talks to the API server with its service account and the
chart's namespaced RBAC, and manages the bounded example job in its release namespace.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
import yaml

from e2e._chart_operator import ChartOperator
from e2e._cluster import EXAMPLES, E2ECluster
from e2e._operator import NAMESPACE_PREFIX
from e2e._storage import E2EStorage
from testkit.kube import KubeEnv
from testkit.kubelet import ProcessKubelet
from testkit.outputs import assert_same_output, read_output, w1_reference

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

BOUNDED = EXAMPLES / "streamjob-bounded.yaml"
RELEASE = "sluice"


@pytest.fixture
def helm_release(
    kube_env: KubeEnv, process_kubelet: ProcessKubelet | None, e2e_storage: E2EStorage
) -> Iterator[E2ECluster]:
    # Not an `e2e-*` namespace: no other operator of the test session watches it.
    namespace = f"helm-{uuid.uuid4().hex[:6]}"
    assert not namespace.startswith(NAMESPACE_PREFIX)
    kube_env.kubectl("create", "namespace", namespace)
    chart = ChartOperator(kube_env, e2e_storage, namespace, RELEASE, False, kubelet=process_kubelet)
    cluster = E2ECluster(kube_env, process_kubelet, chart, e2e_storage, namespace)
    try:
        yield cluster
    finally:
        cluster.kubectl("delete", "streamjobs", "--all", "--timeout=90s", check=False)
        chart.stop()
        kube_env.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.mark.timeout(420)
def test_helm_installed_operator_reconciles_a_job(helm_release: E2ECluster) -> None:
    e2e = helm_release
    e2e.operator.start()

    (pod,) = e2e.items("pods", "app.kubernetes.io/name=sluice-operator")
    assert pod["status"]["phase"] == "Running"
    container = pod["spec"]["containers"][0]
    assert container["args"][0] == "operator"
    assert f"--namespace={e2e.namespace}" in container["args"], container["args"]
    assert pod["spec"]["serviceAccountName"] == f"{RELEASE}-sluice-operator"

    manifest = yaml.safe_load(BOUNDED.read_text())
    name, records = manifest["metadata"]["name"], int(manifest["spec"]["pipeline"]["args"]["n"])
    e2e.apply(BOUNDED)
    job = e2e.wait_lifecycle(name, "Finished", timeout=240)

    assert job["status"]["lastCheckpoint"]["allOperatorsFinished"] is True, job["status"]
    output = read_output(e2e.storage.output_uri(e2e.namespace, name), e2e.storage.storage_options)
    assert_same_output(output, w1_reference(records))
    # The operator pod did the work, with the chart's least-privilege RBAC: nothing it was refused.
    logs = e2e.operator.logs(400)
    assert re.search(rf"{e2e.namespace}/{name}: start job", logs), logs
    assert "Forbidden" not in logs, logs

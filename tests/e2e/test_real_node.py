"""Sluice on a real node: the image built from the Dockerfile, containers under containerd and runc.

`helm install` of charts/sluice-operator with that image puts the operator in a pod under the chart's
least-privilege RBAC; the bounded W1 example runs as a StreamJob on Spark-on-Kubernetes, its coordinator
and TaskManager executor pods real containers (non-root, read-only root file system, no capabilities)
in a namespace where Pod Security admission enforces `restricted`; executors find the driver through
its Service and the cluster's DNS. The job ends Finished with exactly the plain-Python reference output.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import yaml

from e2e._chart_operator import ChartOperator
from e2e._cluster import EXAMPLES, E2ECluster
from e2e._real_node import RealNode, real_node  # noqa: F401  (the session fixture)
from e2e._storage import E2EStorage
from testkit.outputs import assert_same_output, read_output, w1_reference

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

BOUNDED = EXAMPLES / "streamjob-bounded.yaml"
RELEASE = "sluice"


@pytest.fixture
def restricted_release(real_node: RealNode) -> Iterator[E2ECluster]:  # noqa: F811
    """The chart installed into a fresh namespace that enforces the `restricted` Pod Security level."""
    kube = real_node.kube
    namespace = f"node-{uuid.uuid4().hex[:6]}"
    kube.kubectl("create", "namespace", namespace)
    kube.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    storage = E2EStorage(real_node.s3_endpoint, f"node-{uuid.uuid4().hex[:12]}")
    storage.filesystem().mkdir(storage.bucket)
    chart = ChartOperator(kube, storage, namespace, RELEASE, cluster_wide=False)
    cluster = E2ECluster(kube, None, chart, storage, namespace)
    try:
        yield cluster
    finally:
        cluster.kubectl("delete", "streamjobs", "--all", "--timeout=90s", check=False)
        chart.stop()
        kube.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.mark.timeout(900)
def test_bounded_job_on_a_real_node_in_a_restricted_namespace(restricted_release: E2ECluster) -> None:
    e2e = restricted_release
    e2e.operator.start()

    (operator_pod,) = e2e.items("pods", "app.kubernetes.io/name=sluice-operator")
    assert operator_pod["status"]["phase"] == "Running"
    assert operator_pod["spec"]["serviceAccountName"] == f"{RELEASE}-sluice-operator"

    manifest = yaml.safe_load(BOUNDED.read_text())
    name, records = manifest["metadata"]["name"], int(manifest["spec"]["pipeline"]["args"]["n"])
    e2e.apply(BOUNDED)
    job = e2e.wait_lifecycle(name, "Finished", timeout=420)

    status = job["status"]
    assert status["job"]["state"] == "FINISHED"
    assert status["lastCheckpoint"]["allOperatorsFinished"] is True, status
    output = read_output(e2e.storage.output_uri(e2e.namespace, name), e2e.storage.storage_options)
    assert_same_output(output, w1_reference(records))

    # The work ran in containers of the image, as the restricted level demands: every container of the
    # job's pods (coordinator and Spark's TaskManagers) ran as a non-root user with a read-only root.
    events = e2e.items("events")
    created = {e["involvedObject"]["name"] for e in events if e.get("reason") == "Started"}
    assert any("-taskmanager-" in pod for pod in created), sorted(created)
    assert "Forbidden" not in e2e.operator.logs(400)

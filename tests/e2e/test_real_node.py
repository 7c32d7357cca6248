"""Sluice on a real node: the image built from the Dockerfile, containers under containerd and runc.

`helm install` of charts/sluice-operator with that image puts the operator in a pod under the chart's
least-privilege RBAC; the bounded W1 example runs as a StreamJob on Spark-on-Kubernetes, its coordinator
and TaskManager executor pods real containers (non-root, read-only root file system, no capabilities)
in a namespace where Pod Security admission enforces `restricted`; executors find the driver through
its Service and the cluster's DNS. The job ends Finished with exactly the plain-Python reference output.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
import yaml

from e2e._cluster import EXAMPLES, JOB_LABEL, REST_PORT, E2ECluster
from e2e._operator import free_port
from e2e._outputs import assert_unbounded_exactly_once
from e2e._real_node import RELEASE, RealNode
from e2e._real_node import restricted_release as node_release
from testkit.outputs import assert_same_output, read_output, w1_reference

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

BOUNDED = EXAMPLES / "streamjob-bounded.yaml"
UNBOUNDED = EXAMPLES / "streamjob.yaml"
DNS_SERVICE = "10.96.0.10"
DRIVER_PORT = 7078
"""spark.driver.port of every coordinator (the operator sets it)."""

# A pod that tries to open TCP connections and says, per target, whether it could: "open", "refused"
# (something answered with a reset) or "timeout" (packets dropped, as a NetworkPolicy does). A target
# written "+host:port" is tried again for up to a minute until it opens: a firewall learns of a new
# pod's address only some time after the pod started, and until then treats it as a stranger.
_CONNECT = """
import socket, sys, time
def connect(host, port):
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        return "open"
    except ConnectionRefusedError:
        return "refused"
    except OSError:
        return "timeout"
for target in sys.argv[1:]:
    patient = target.startswith("+")
    host, port = target.lstrip("+").rsplit(":", 1)
    deadline = time.monotonic() + (60 if patient else 0)
    result = connect(host, port)
    while patient and result != "open" and time.monotonic() < deadline:
        time.sleep(1)
        result = connect(host, port)
    print(target.lstrip("+"), result, flush=True)
"""


@pytest.fixture
def restricted_release(real_node: RealNode) -> Iterator[E2ECluster]:
    with node_release(real_node) as cluster:
        yield cluster


# func_only: the session fixture's first, cold set-up (binaries, base, image: tens of minutes on 2
# cores) is bounded by its own subprocess timeouts, not by the test's.
@pytest.mark.timeout(900, func_only=True)
def test_bounded_job_on_a_real_node_in_a_restricted_namespace(restricted_release: E2ECluster) -> None:
    e2e = restricted_release
    e2e.operator.start()

    (operator_pod,) = e2e.items("pods", "app.kubernetes.io/name=sluice-operator")
    assert operator_pod["status"]["phase"] == "Running"
    release = operator_pod["metadata"]["labels"]["app.kubernetes.io/instance"]
    assert release.startswith(f"{RELEASE}-"), release
    assert operator_pod["spec"]["serviceAccountName"] == f"{release}-sluice-operator"

    manifest = yaml.safe_load(BOUNDED.read_text())
    name, records = manifest["metadata"]["name"], int(manifest["spec"]["pipeline"]["args"]["n"])
    e2e.apply(BOUNDED)
    job = e2e.wait_lifecycle(name, "Finished", timeout=420)

    status = job["status"]
    assert status["job"]["state"] == "FINISHED"
    assert status["lastCheckpoint"]["allOperatorsFinished"] is True, status
    output = read_output(e2e.storage.output_uri(e2e.namespace, name), e2e.storage.storage_options)
    assert_same_output(output, w1_reference(records))

    # Spark made TaskManager pods and the kubelet started their containers, which the restricted level
    # admitted (non-root, no capabilities, RuntimeDefault seccomp); the operator's RBAC sufficed.
    events = e2e.items("events")
    created = {e["involvedObject"]["name"] for e in events if e.get("reason") == "Started"}
    assert any("-taskmanager-" in pod for pod in created), sorted(created)
    assert "Forbidden" not in e2e.operator.logs(400)


def _connect_from(
    node: RealNode, namespace: str, targets: list[str], labels: dict[str, str] | None = None
) -> dict[str, str]:
    """What a (restricted-compliant) pod of `namespace` with `labels` gets when it connects."""
    kube = node.kube
    name = f"probe-{uuid.uuid4().hex[:6]}"
    hardened = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "probe",
                    "image": "sluice:dev",
                    "imagePullPolicy": "IfNotPresent",
                    "args": ["python3", "-c", _CONNECT, *targets],
                    "securityContext": hardened,
                }
            ],
        },
    }
    kube.kubectl("apply", "-f", "-", input=json.dumps(pod))
    kube.wait_for(
        f"pod {name}",
        lambda p: p.get("status", {}).get("phase") in ("Succeeded", "Failed"),
        namespace=namespace,
        timeout=120,
    )
    lines = kube.kubectl("logs", name, namespace=namespace).stdout.split()
    kube.kubectl("delete", "pod", name, "--wait=false", namespace=namespace)
    return dict(zip(lines[0::2], lines[1::2], strict=True))


@pytest.mark.timeout(900, func_only=True)
def test_network_policies_dashboard_port_forward_and_drain_on_a_real_node(
    restricted_release: E2ECluster,
    real_node: RealNode,
) -> None:
    e2e = restricted_release
    e2e.operator.start()
    manifest = yaml.safe_load(UNBOUNDED.read_text())
    name = manifest["metadata"]["name"]
    # One TaskManager (running both subtasks): the example's two do not fit next to the operator and
    # the coordinator on the node's 2 CPUs.
    manifest["spec"]["taskManagers"]["replicas"] = 1
    e2e.apply(yaml.safe_dump(manifest))
    e2e.wait_running_with_checkpoint(name, timeout=420)

    # The coordinator's driver JVM maps the class-data archive the image ships: a pod's HOME dies with
    # the pod, so without it every coordinator would start its JVM cold.
    mapped = e2e.kubectl(
        "exec",
        f"{name}-coordinator",
        "--",
        "sh",
        "-c",
        "grep -h /opt/sluice/class-data/ /proc/[0-9]*/maps || true",
    ).stdout
    assert ".jsa" in mapped, (
        f"no process of the coordinator pod maps an archive of /opt/sluice/class-data/: {mapped!r}"
    )

    # The job's NetworkPolicy, enforced by the node's firewall (kube-router, which rejects: "refused";
    # a dropping one gives "timeout"). A pod with the job's label reaches the Spark driver's port (so
    # the coordinator listens there, and a refusal below is the firewall's) but not the REST port,
    # which only the operator may call; a pod of another namespace reaches neither, yet it reaches the
    # cluster's DNS (so the probe itself works). The job got to Running only because its TaskManager
    # reached the driver and the operator the REST port.
    coordinator_ip = e2e.coordinator_pod(name)["status"]["podIP"]
    rest, driver = f"{coordinator_ip}:{REST_PORT}", f"{coordinator_ip}:{DRIVER_PORT}"
    dns = f"{DNS_SERVICE}:53"
    blocked = {"refused", "timeout"}
    insider = _connect_from(real_node, e2e.namespace, [f"+{driver}", rest], labels={JOB_LABEL: name})
    assert insider[driver] == "open" and insider[rest] in blocked, insider
    outsider = f"outsider-{uuid.uuid4().hex[:6]}"
    e2e.kube.kubectl("create", "namespace", outsider)
    try:
        seen = _connect_from(real_node, outsider, [rest, driver, dns])
        assert seen[rest] in blocked and seen[driver] in blocked and seen[dns] == "open", seen
    finally:
        e2e.kube.kubectl("delete", "namespace", outsider, "--wait=false", check=False)

    # `kubectl port-forward` goes through the API server and the kubelet, which the policy allows:
    # the dashboard page comes back on this machine's loopback.
    local = free_port()
    forward = subprocess.Popen(
        [
            str(e2e.kube.bin_dir / "kubectl"),
            "--kubeconfig",
            str(e2e.kube.kubeconfig),
            "--namespace",
            e2e.namespace,
            "port-forward",
            f"svc/{name}-rest",
            f"{local}:{REST_PORT}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        page = e2e.wait(
            "the dashboard through kubectl port-forward",
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=10).read().decode(),
            timeout=60,
        )
    finally:
        forward.terminate()
        forward.wait(timeout=30)
    assert "<html" in page.lower(), page[:500]

    # Drained: every record the job read is in the output exactly once.
    e2e.set_state(name, "finished")
    e2e.wait_lifecycle(name, "Finished", timeout=300)
    output = read_output(e2e.storage.output_uri(e2e.namespace, name), e2e.storage.storage_options)
    assert_unbounded_exactly_once(output, at_least=1)

"""An attacker's pod in the job's namespace gets nothing from a running job, and the job does not notice.

The attacker is a pod like any other (no job label, the default ServiceAccount), whose process runs
`testkit/probe.py` mounted from a ConfigMap. It sends every listening socket of the job's pods (the
coordinator's REST, control and Spark ports, every TaskManager's data port and Spark ports) a pickle
whose loading would create a marker file, one whose loading would end the process that loads it, random
bytes, half a frame, a 4 GiB length header, a forged handshake and silence; it calls every REST
mutation without a token and with a wrong one; and it starts a Spark executor of its own against the
job's driver without the job's secret.

The process kubelet enforces no NetworkPolicy and gives pods no network namespace: the attacker reaches
every port the job's pods bind (the policy the operator creates is checked as an object only). So what
this shows is that authentication holds on its own, without a NetworkPolicy in front of it: nothing
the attacker sent was decoded (no marker, no process ended: no restart, no new TaskManager), the job
kept checkpointing and, drained at the end, wrote every record exactly once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e._cluster import EXAMPLES, E2ECluster, rest_port_of
from e2e._outputs import assert_unbounded_exactly_once
from sluice_operator.manifests.coordinator_args import DRIVER_PORT
from testkit import probe
from testkit.outputs import read_output

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

UNBOUNDED = EXAMPLES / "streamjob.yaml"
JOB = yaml.safe_load(UNBOUNDED.read_text())["metadata"]["name"]
PROBE = Path(probe.__file__)
# Outside /tmp: the job's pods mount an emptyDir there, and the marker must be where this test looks.
MARKERS = Path(__file__).resolve().parents[2] / ".cache" / "e2e-attacks"
_REACHABLE_FROM_OTHER_PODS = {"0.0.0.0", "::"}


def _container_pids(pod: dict[str, Any]) -> list[int]:
    return [
        int(status["containerID"].removeprefix("process://"))
        for status in pod["status"].get("containerStatuses", [])
        if status.get("containerID", "").startswith("process://")
    ]


def _reachable_sockets(pod: dict[str, Any]) -> set[int]:
    """Ports of the pod's processes that another pod could reach: bound to the pod IP or every address."""
    ip = pod["status"]["podIP"]
    ports: set[int] = set()
    for pid in _container_pids(pod):
        for process in probe.descendants(pid):
            try:
                sockets = probe.listening_sockets(process)
            except OSError:  # the process ended while we looked
                continue
            ports |= {port for address, port in sockets if address in _REACHABLE_FROM_OTHER_PODS | {ip}}
    return ports


def _attacker_pod(e2e: E2ECluster, image: str, plan: dict[str, Any]) -> str:
    e2e.kubectl("create", "configmap", "attacker-probe", f"--from-file=probe.py={PROBE}", "-o", "name")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "attacker"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "attacker",
                    "image": image,
                    "args": ["python", "/attack/probe.py", json.dumps(plan)],
                    "volumeMounts": [{"name": "probe", "mountPath": "/attack", "readOnly": True}],
                }
            ],
            "volumes": [{"name": "probe", "configMap": {"name": "attacker-probe"}}],
        },
    }
    e2e.apply(yaml.safe_dump(pod))
    return "attacker"


def _attacker_report(e2e: E2ECluster, name: str) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        pod = e2e.get("pod", name) or {}
        phase = pod.get("status", {}).get("phase")
        return pod if phase in ("Succeeded", "Failed") else None

    pod = e2e.wait(f"attacker pod {name} done", finished, timeout=300, interval=2)
    if e2e.kubelet is not None:
        log = e2e.kubelet.container_log(e2e.namespace, name, "attacker")
    else:
        log = e2e.kubectl("logs", name).stdout
    lines = [line for line in log.splitlines() if line.startswith("ATTACK-REPORT ")]
    assert pod["status"]["phase"] == "Succeeded" and lines, f"the attacker's run failed:\n{log[-4000:]}"
    return dict(json.loads(lines[-1].removeprefix("ATTACK-REPORT ")))


def _restart_counts(e2e: E2ECluster) -> dict[str, int]:
    return {
        pod["metadata"]["name"]: sum(
            s.get("restartCount", 0) for s in pod["status"].get("containerStatuses", [])
        )
        for pod in e2e.job_pods(JOB)
    }


@pytest.mark.timeout(900)
def test_an_attackers_pod_gets_nothing_and_the_job_runs_on_exactly_once(e2e: E2ECluster) -> None:
    if e2e.kubelet is None:
        pytest.skip("finding a pod's listening sockets needs the process kubelet's shared /proc")
    e2e.apply(UNBOUNDED)  # unchanged: two TaskManagers, whose data ports carry records between them
    e2e.wait_running_with_checkpoint(JOB)
    before = e2e.coordinator(JOB, "/v1/job")
    pods_before = _restart_counts(e2e)

    coordinator = e2e.coordinator_pod(JOB)
    taskmanagers = e2e.taskmanager_pods(JOB)
    targets: dict[str, set[int]] = {coordinator["status"]["podIP"]: _reachable_sockets(coordinator)}
    for pod in taskmanagers:
        targets.setdefault(pod["status"]["podIP"], set()).update(_reachable_sockets(pod))
    coordinator_ip = coordinator["status"]["podIP"]
    rest_port = rest_port_of(coordinator)
    # What the attack must cover: the REST and Spark driver ports, the coordinator's control port (the
    # one port of the coordinator's own Python process besides REST), every TaskManager's data port.
    assert {rest_port, DRIVER_PORT} <= targets[coordinator_ip], targets
    for link in before["taskManagers"]:
        assert link["dataPort"] in targets[link["host"]], (link, targets)
    sluice_pid = next(
        pid
        for pid in probe.descendants(_container_pids(coordinator)[0])
        if rest_port in probe.listening_ports(pid)
    )
    control_ports = {
        port
        for address, port in probe.listening_sockets(sluice_pid)
        if address in _REACHABLE_FROM_OTHER_PODS | {coordinator_ip} and port != rest_port
    }
    assert control_ports and control_ports <= targets[coordinator_ip], (control_ports, targets)

    marker_dir = MARKERS / e2e.namespace
    marker_dir.mkdir(parents=True, exist_ok=True)  # present, so a loaded pickle could create the marker
    marker = marker_dir / "touched"
    plan: dict[str, Any] = {
        "sockets": [
            {"host": ip, "port": port} for ip, ports in sorted(targets.items()) for port in sorted(ports)
        ],
        "marker": str(marker),
        "rest": f"http://{coordinator_ip}:{rest_port}",
        "sparkDriver": {"host": coordinator_ip, "port": DRIVER_PORT},
    }
    image = e2e.get("streamjob", JOB)["spec"]["image"]  # type: ignore[index]
    report = _attacker_report(e2e, _attacker_pod(e2e, image, plan))

    # Every socket was reached (no NetworkPolicy here) and every payload sent.
    attacked = {(entry["host"], entry["port"]) for entry in report["sockets"] if "answered" in entry}
    assert attacked == {(t["host"], t["port"]) for t in plan["sockets"]}, report["sockets"]
    # Nothing was decoded: no marker, no process ended by the process-ending pickle.
    assert not marker.exists(), "a pickle from the attacker's pod was loaded"
    # REST: 401 without a token, 403 with a wrong one, for every mutation and for reads.
    assert report["rest"], report
    for call in report["rest"]:
        assert call["status"] == (403 if call["token"] else 401), call
    # Spark: the driver refuses an executor without the job's secret; it never joins.
    executor = report["sparkExecutor"]
    assert executor["exitCode"] not in (0, None), executor
    errors = "\n".join(executor["errors"])
    assert "Expected SaslMessage" in errors or "authenticat" in errors.lower(), errors

    after = e2e.coordinator(JOB, "/v1/job")
    assert after["state"] == "RUNNING" and after["lastSavepoint"] is None, after
    assert (after["restarts"], after["attempt"]) == (before["restarts"], before["attempt"]), after
    assert sorted(link["host"] for link in after["taskManagers"]) == sorted(
        link["host"] for link in before["taskManagers"]
    )
    assert _restart_counts(e2e) == pods_before, "no process of the job's pods ended"
    assert not e2e.items("savepoints"), "the attacker's savepoint requests made none"
    e2e.wait_checkpoints_after(JOB, int(e2e.get("streamjob", JOB)["status"]["lastCheckpoint"]["id"]))  # type: ignore[index]

    e2e.set_state(JOB, "finished")
    e2e.wait_lifecycle(JOB, "Finished")
    output = read_output(e2e.storage.output_uri(e2e.namespace, JOB), e2e.storage.storage_options)
    assert_unbounded_exactly_once(output, at_least=0)
    assert not marker.exists()
    os.rmdir(marker_dir)

"""Faults only a real node can make, each ending in exactly-once output (issue 25):

- the kubelet restarted, then containerd restarted, while a job runs: the containers are not theirs
  (each is a child of its runc shim), so the pods keep running and the job goes on, neither restarted
  nor failed over;
- the operator's pod killed while a savepoint is in progress: the new operator follows that savepoint to
  its end instead of abandoning it or taking another;
- the kube-apiserver restarted during an upgrade (a spec change, upgrade mode `savepoint`): the upgrade
  completes, once.

The tests share one namespace and operator (installed from the chart); each names its own job and
drains it at the end, then compares its whole output with the plain-Python reference.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

from e2e._cluster import EXAMPLES, E2ECluster
from e2e._real_node import RealNode, restricted_release
from e2e._real_node_jobs import (
    DEPLOY_TIMEOUT,
    apply_unbounded,
    containers,
    drain_and_check_output,
    last_checkpoint,
    patch_spec,
)

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

OPERATOR_PODS = "app.kubernetes.io/name=sluice-operator"


@pytest.fixture(scope="module")
def release(real_node: RealNode) -> Iterator[E2ECluster]:
    with restricted_release(real_node) as cluster:
        cluster.operator.start()
        yield cluster


@pytest.fixture(autouse=True)
def _no_job_outlives_its_test(release: E2ECluster) -> Iterator[None]:
    yield
    # One node's CPU: a job that a failed test left running keeps the next test's TaskManager Pending
    # ("Insufficient cpu"), and that test then fails for a reason of its own.
    release.kubectl("delete", "streamjobs", "--all", "--timeout=90s", check=False)


@pytest.mark.timeout(1200, func_only=True)
def test_kubelet_and_containerd_restarts_leave_the_pods_and_the_job_running(
    release: E2ECluster,
    real_node: RealNode,
) -> None:
    e2e, job = release, "node-restarts"
    apply_unbounded(e2e, job)
    e2e.wait_running_with_checkpoint(job, timeout=DEPLOY_TIMEOUT)
    run = e2e.coordinator(job, "/v1/job")
    pods = containers(e2e, job)
    assert len(pods) == 2, f"a coordinator and a TaskManager: {pods}"

    for component in ("kubelet", "containerd"):
        checkpoint = last_checkpoint(e2e, job)
        real_node.restart(component)
        # The restarted kubelet takes its running pods back within seconds; until it has, `kubectl
        # exec` answers "pod does not exist". Then the job checkpoints on, and exec (through the new
        # kubelet, into containerd) reaches the coordinator: the same run, never restarted, on the same
        # containers.
        e2e.wait(
            f"kubectl exec into the coordinator after the {component} restart",
            lambda: e2e.coordinator(job, "/v1/job"),
            timeout=180,
        )
        e2e.wait_checkpoints_after(job, checkpoint)
        now = e2e.coordinator(job, "/v1/job")
        assert (now["jobId"], now["restarts"], now["state"]) == (run["jobId"], 0, "RUNNING"), (component, now)
        assert now["subtasks"]["running"] == now["subtasks"]["total"], (component, now)
        assert containers(e2e, job) == pods, f"the {component} restart touched the job's containers"

    finished = drain_and_check_output(e2e, job)
    assert finished["status"]["job"]["restarts"] == 0


def _operator_pod(e2e: E2ECluster) -> dict[str, Any]:
    (pod,) = e2e.items("pods", OPERATOR_PODS)
    return pod


@pytest.mark.timeout(1200, func_only=True)
def test_an_operator_killed_during_a_savepoint_is_replaced_by_one_that_follows_it_to_the_end(
    release: E2ECluster,
) -> None:
    e2e, job = release, "operator-killed"
    # A long heartbeat timeout: the TaskManager frozen below must hold the savepoint, not be declared lost.
    apply_unbounded(e2e, job, failureDetection={"heartbeatTimeout": "10m"})
    e2e.wait_running_with_checkpoint(job, timeout=DEPLOY_TIMEOUT)
    taskmanager = e2e.coordinator(job, "/v1/job")["taskManagers"][0]
    tm_pod = e2e.taskmanager_pod_of(job, taskmanager["host"])
    savepoint = f"{job}-manual"
    manifest = (EXAMPLES / "savepoint.yaml").read_text()
    manifest = manifest.replace("unbounded-counts-manual", savepoint).replace("unbounded-counts", job)

    # A frozen TaskManager cannot acknowledge the savepoint's barrier: the savepoint stays in progress
    # (heartbeat and checkpoint timeouts: 10 minutes) for as long as the test needs.
    e2e.signal_process(tm_pod, taskmanager["pid"], signal.SIGSTOP)
    try:
        e2e.apply(manifest)

        def in_progress() -> dict[str, Any] | None:
            status = (e2e.get("savepoint", savepoint) or {}).get("status") or {}
            return status if status.get("state") == "InProgress" and status.get("triggerId") else None

        trigger = e2e.wait("the Savepoint InProgress", in_progress, timeout=120)["triggerId"]
        killed = _operator_pod(e2e)
        e2e.kubectl("delete", "pod", killed["metadata"]["name"], "--grace-period=0", "--force")
        # The Deployment's new pod runs and has reconciled each job a few times (every job has its own
        # timer, and the count is the pod's own): it found the savepoint in progress, and has neither
        # abandoned, failed nor triggered it again.
        jobs = len(e2e.items("streamjobs"))
        e2e.wait(
            "a new operator pod that reconciled every job three times",
            lambda: (
                _operator_pod(e2e)["metadata"]["uid"] != killed["metadata"]["uid"]
                and e2e.operator.metrics().value(
                    "sluice_operator_reconciles_total", resource="streamjob", outcome="ok"
                )
                >= 3 * jobs
            ),
            timeout=180,
        )
        status = e2e.get("savepoint", savepoint)["status"]  # type: ignore[index]
        assert (status["state"], status["triggerId"]) == ("InProgress", trigger), status
    finally:
        e2e.signal_process(tm_pod, taskmanager["pid"], signal.SIGCONT)

    status = e2e.wait_savepoint(savepoint, "Completed", timeout=180)["status"]
    answer = e2e.coordinator(job, f"/v1/savepoints/{trigger}")
    assert status["triggerId"] == trigger
    assert (status["path"], status["checkpointId"]) == (answer["path"], answer["checkpointId"]), answer
    history = e2e.coordinator(job, "/v1/checkpoints")["history"]
    taken = [h for h in history if h.get("kind") == "savepoint"]
    assert len(taken) == 1, f"the savepoint was triggered more than once: {taken}"

    drain_and_check_output(e2e, job)


@pytest.mark.timeout(1200, func_only=True)
def test_an_upgrade_through_a_kube_apiserver_restart_completes_once(
    release: E2ECluster,
    real_node: RealNode,
) -> None:
    e2e, job = release, "apiserver-restart"
    apply_unbounded(e2e, job, upgradeMode="savepoint")
    before = e2e.wait_running_with_checkpoint(job, timeout=DEPLOY_TIMEOUT)["status"]["job"]

    # A rescale 2 -> 1. The API server goes down once the operator has begun the upgrade (its
    # stop-with-savepoint exists) and comes back while the old run stops and the new one starts.
    generation = patch_spec(e2e, job, {"parallelism": 1})
    upgrade = f"{job}-upgrade-{generation}"
    e2e.wait(f"Savepoint {upgrade} created", lambda: e2e.get("savepoint", upgrade), timeout=120)
    real_node.restart("kube-apiserver")

    path = e2e.wait_savepoint(upgrade, "Completed", timeout=300)["status"]["path"]
    e2e.wait_streamjob(
        job,
        f"a run after {before['id']}",
        lambda sj: ((sj.get("status") or {}).get("job") or {}).get("id") not in (None, before["id"]),
        timeout=DEPLOY_TIMEOUT,
    )
    after = e2e.wait_running_with_checkpoint(job, timeout=DEPLOY_TIMEOUT)["status"]["job"]
    assert after["restoredFrom"] == path, after
    assert after["subtasks"]["total"] < before["subtasks"]["total"], (before, after)
    # Once: one upgrade savepoint, as an object and in storage, and one new coordinator started from it.
    upgrades = [s["metadata"]["name"] for s in e2e.items("savepoints") if s["spec"]["jobName"] == job]
    assert upgrades == [upgrade], upgrades
    stored = e2e.storage.filesystem().glob(
        f"{e2e.storage.root.removeprefix('s3://')}/savepoints/{e2e.namespace}/{job}/*/_metadata"
    )
    assert len(stored) == 1, stored
    args = e2e.coordinator_pod(job)["spec"]["containers"][0]["args"]
    assert args[args.index("--from-savepoint") + 1] == path, args

    drain_and_check_output(e2e, job)

"""Leader election: two operator replicas under kopf peering, one acting, the other taking over.

Both watch the same namespace, which holds the KopfPeering object the chart would create. The older
replica leads (priorities rank by start time); the younger one waits, with its reconcile counter at
zero. When the leader is SIGKILLed it cannot take its peering entry with it: the standby resumes once
that entry's lifetime has run out, keeps the running job going (same coordinator, new checkpoints
observed) and carries out a spec change. A replica started after that joins as a standby again, and
takes over at once when the leader stops normally (SIGTERM), since kopf then removes the leader's entry.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e._cluster import E2ECluster
from e2e._jobs import UNBOUNDED_NAME, unbounded_job, unbounded_manifest
from e2e._operator import NAMESPACE_PREFIX, LocalOperator, PeeredOperators
from e2e._storage import E2EStorage
from testkit.kube import KubeEnv
from testkit.kubelet import ProcessKubelet

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

JOB = UNBOUNDED_NAME  # on one TaskManager (_jobs.py)
PEERING = "sluice-operator"
LIFETIME = 20  # seconds; the chart's default is 60, shorter here to keep the test short
# The standby's: had its graceful stop left its entry to expire, the hand-back would take this long.
LONG_LIFETIME = 300
RECONCILES = "sluice_operator_reconciles_total"


def _own_namespace() -> str:
    """Not an `e2e-*` namespace: the session's operator, which watches those, must not act on its jobs."""
    namespace = f"ha-{uuid.uuid4().hex[:6]}"
    assert not namespace.startswith(NAMESPACE_PREFIX)
    return namespace


@pytest.fixture
def ha(
    kube_env: KubeEnv, process_kubelet: ProcessKubelet | None, e2e_storage: E2EStorage, tmp_path: Path
) -> Iterator[tuple[E2ECluster, PeeredOperators]]:
    if process_kubelet is None:
        pytest.skip("two local operator processes need the process kubelet's pod IPs, which they can reach")
    namespace = _own_namespace()
    kube_env.kubectl("create", "namespace", namespace)
    kube_env.wait_for("serviceaccount default", bool, namespace=namespace, timeout=30)
    peering = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": PEERING}}
    kube_env.kubectl("apply", "-f", "-", namespace=namespace, input=json.dumps(peering))
    replicas = [
        LocalOperator(
            kube_env,
            e2e_storage,
            tmp_path,
            name=name,
            namespaces=(namespace,),
            peering=PEERING,
            peering_lifetime=lifetime,
        )
        for name, lifetime in (("operator-a", LIFETIME), ("operator-b", LONG_LIFETIME))
    ]
    pair = PeeredOperators(kube_env, replicas, PEERING)
    cluster = E2ECluster(kube_env, process_kubelet, pair, e2e_storage, namespace)
    try:
        pair.start()
        yield cluster, pair
    finally:
        if not any(r.alive() for r in replicas):
            replicas[0].start()  # the finalizers need an operator
        cluster.remove_jobs_and_pods()
        pair.stop()
        kube_env.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def _reconciles(replica: LocalOperator) -> float:
    return replica.metrics().value(RECONCILES, resource="streamjob", outcome="ok")


def _managed(replica: LocalOperator) -> float:
    return replica.metrics().value("sluice_operator_managed_streamjobs")


def _reporters(e2e: E2ECluster, since: str = "") -> dict[str, set[str]]:
    """Reason -> the replicas (events' reportingInstance) that posted the job's events after `since`."""
    found: dict[str, set[str]] = {}
    for event in e2e.items("events"):
        if event["involvedObject"].get("kind") != "StreamJob":
            continue
        if (event.get("lastTimestamp") or event.get("eventTime") or "") < since:
            continue
        found.setdefault(event["reason"], set()).add(str(event.get("reportingInstance")))
    return found


def _now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@pytest.mark.timeout(420)
def test_one_replica_acts_and_the_standby_takes_over_when_it_is_killed(
    ha: tuple[E2ECluster, PeeredOperators],
) -> None:
    e2e, pair = ha
    first, second = pair.replicas
    peers = pair.peers()
    assert peers[first.identity]["priority"] > peers[second.identity]["priority"], peers
    lifetimes = (peers[first.identity]["lifetime"], peers[second.identity]["lifetime"])
    assert lifetimes == (LIFETIME, LONG_LIFETIME), peers
    assert pair.leader() is first

    e2e.apply(unbounded_job())
    e2e.wait_running_with_checkpoint(JOB)
    coordinator = e2e.coordinator_pod(JOB)["metadata"]["uid"]
    # Only the leader acted: the standby never reconciled, watches no job, posted no event.
    assert _reconciles(first) > 0 and _managed(first) == 1
    assert _reconciles(second) == 0 and _managed(second) == 0
    assert set().union(*_reporters(e2e).values()) == {first.identity}, _reporters(e2e)
    assert f"{e2e.namespace}/{JOB}: start job" in first.log.read_text()
    assert f"{e2e.namespace}/{JOB}" not in second.log.read_text()

    # The leader dies without a goodbye: its peering entry stays until its lifetime runs out.
    killed_at = time.monotonic()
    pair.crash()
    assert not first.alive()
    # The last checkpoint the dead leader recorded: any later one in the status is the survivor's doing.
    checkpoint = int(e2e.get("streamjob", JOB)["status"]["lastCheckpoint"]["id"])  # type: ignore[index]
    e2e.wait("the standby manages the job", lambda: _managed(second) == 1, timeout=LIFETIME + 60)
    took_over = time.monotonic() - killed_at
    assert took_over < LIFETIME + 20, f"the standby took {took_over:.0f}s to take over"
    # The job went on: the same coordinator, and the survivor observes its new checkpoints.
    e2e.wait_checkpoints_after(JOB, checkpoint, timeout=60)
    assert e2e.coordinator_pod(JOB)["metadata"]["uid"] == coordinator
    assert _reconciles(second) > 0
    e2e.wait("the dead leader's entry cleaned up", lambda: first.identity not in pair.peers(), timeout=30)

    # The killed replica comes back younger than the survivor: it waits, and does not take over.
    first.start()
    pair.wait_peer(first)
    assert pair.leader() is second

    # A spec change is carried out by the survivor alone.
    since = _now_rfc3339()
    e2e.set_state(JOB, "suspended")
    generation = int(e2e.get("streamjob", JOB)["metadata"]["generation"])  # type: ignore[index]
    e2e.wait_savepoint(f"{JOB}-suspend-{generation}", "Completed")
    e2e.wait_lifecycle(JOB, "Suspended")
    reporters = _reporters(e2e, since)
    assert reporters and set().union(*reporters.values()) == {second.identity}, reporters
    assert _reconciles(first) == 0 and _managed(first) == 0, "the restarted replica acted as well"
    second_run_log = first.log.read_text().split(f"===== operator run {first.runs} =====")[-1]
    assert f"{e2e.namespace}/{JOB}" not in second_run_log

    # A leader that stops normally takes its entry with it: the standby resumes at once, long before
    # the leader's entry (lifetime LONG_LIFETIME) would have expired.
    stopped_at = time.monotonic()
    second.stop()
    assert second.identity not in pair.peers()
    e2e.wait("the standby manages the job", lambda: _managed(first) == 1, timeout=60)
    handed_over = time.monotonic() - stopped_at
    assert handed_over < LONG_LIFETIME / 5, f"the hand-over took {handed_over:.0f}s"
    assert e2e.get("streamjob", JOB)["status"]["lifecycleState"] == "Suspended"  # type: ignore[index]
    print(f"failover after SIGKILL: {took_over:.1f}s; hand-over after SIGTERM: {handed_over:.1f}s")


@pytest.mark.timeout(180)
def test_a_replica_without_its_peering_object_says_so_and_waits_for_it(
    kube_env: KubeEnv, process_kubelet: ProcessKubelet | None, e2e_storage: E2EStorage, tmp_path: Path
) -> None:
    namespace = _own_namespace()
    kube_env.kubectl("create", "namespace", namespace)
    replica = LocalOperator(
        kube_env, e2e_storage, tmp_path, namespaces=(namespace,), peering=PEERING, peering_lifetime=LIFETIME
    )
    cluster = E2ECluster(kube_env, process_kubelet, replica, e2e_storage, namespace)
    try:
        job = unbounded_manifest()
        job["spec"]["state"] = "suspended"  # nothing to run: only the operator's status shows it acted
        cluster.apply(json.dumps(job))
        replica.start()
        warning = f"no KopfPeering '{PEERING}' in namespace '{namespace}'"
        cluster.wait("the missing peering object reported", lambda: warning in replica.log.read_text())
        time.sleep(3)  # a replica that was not paused would have reconciled the job by now
        assert (cluster.get("streamjob", JOB) or {}).get("status") is None
        assert _reconciles(replica) == 0

        peering = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": PEERING}}
        cluster.apply(json.dumps(peering))
        cluster.wait_lifecycle(JOB, "Suspended", timeout=60)
        assert _reconciles(replica) > 0 and _managed(replica) == 1
    finally:
        cluster.kubectl("delete", "streamjobs", "--all", "--timeout=60s", check=False)
        replica.stop()
        kube_env.kubectl("delete", "namespace", namespace, "--wait=false", check=False)

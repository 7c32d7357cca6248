"""An unbounded StreamJob (examples/k8s/streamjob.yaml) through stop-with-savepoint, savepoints and failures.

Every test ends the job with `spec.state: finished` (TERMINATE: drained, so every window fires) and then
checks the whole output of the job's history line by line (see _outputs.py).
"""

from __future__ import annotations

import signal
from typing import Any

import pytest
import yaml

from e2e._cluster import EXAMPLES, E2ECluster
from e2e._jobs import UNBOUNDED_NAME, unbounded_job
from e2e._outputs import assert_unbounded_exactly_once, generated_prefixes
from testkit.outputs import read_output

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

SAVEPOINT = EXAMPLES / "savepoint.yaml"
JOB = UNBOUNDED_NAME


def _committed_records(e2e: E2ECluster) -> int:
    """How many records the output committed so far covers (a lower bound for the final output)."""
    output = read_output(e2e.storage.output_uri(e2e.namespace, JOB), e2e.storage.storage_options)
    return sum(generated_prefixes(output).values()) if output else 0


def _generation(e2e: E2ECluster) -> int:
    job = e2e.get("streamjob", JOB)
    assert job is not None
    return int(job["metadata"]["generation"])


def _finish_and_check_output(e2e: E2ECluster) -> dict[str, Any]:
    """TERMINATE the job (drain), then compare its whole output with the reference."""
    before = _committed_records(e2e)
    e2e.set_state(JOB, "finished")
    savepoint = e2e.wait_savepoint(f"{JOB}-terminate-{_generation(e2e)}", "Completed")
    metadata = e2e.storage.read_json(f"{savepoint['status']['path']}/_metadata")
    assert (metadata["kind"], metadata["stopMode"]) == ("savepoint", "drain"), metadata
    job = e2e.wait_lifecycle(JOB, "Finished")
    assert job["status"]["job"]["state"] == "FINISHED"
    assert job["status"]["lastSavepoint"]["path"] == savepoint["status"]["path"]
    e2e.wait_pods_gone(JOB)
    output = read_output(e2e.storage.output_uri(e2e.namespace, JOB), e2e.storage.storage_options)
    assert_unbounded_exactly_once(output, at_least=before)
    return job


@pytest.mark.timeout(480)
def test_savepoint_of_a_running_job_leaves_it_running(e2e: E2ECluster) -> None:
    e2e.apply(unbounded_job())
    running = e2e.wait_running_with_checkpoint(JOB)["status"]
    run = running["job"]["id"]
    coordinator_uid = e2e.coordinator_pod(JOB)["metadata"]["uid"]
    # What `kubectl get -o wide` shows of a running job: records per second and the checkpoint's age;
    # and where its dashboard is.
    rated = e2e.wait_streamjob(
        JOB, "records/s measured", lambda sj: (sj["status"]["job"].get("recordsReadPerSecond") or 0) > 0
    )
    assert rated["status"]["dashboardUrl"] == f"http://{JOB}-rest.{e2e.namespace}.svc:8081/"
    wide = e2e.kubectl("get", "streamjob", JOB, "-o", "wide").stdout.splitlines()
    assert "RECORDS/S" in wide[0] and "CHECKPOINTED" in wide[0], wide

    e2e.apply(SAVEPOINT)
    name = yaml.safe_load(SAVEPOINT.read_text())["metadata"]["name"]
    savepoint = e2e.wait_savepoint(name, "Completed")

    status = savepoint["status"]
    metadata = e2e.storage.read_json(f"{status['path']}/_metadata")
    assert (metadata["kind"], metadata["stopMode"], metadata["jobId"]) == ("savepoint", None, run)
    assert metadata["checkpointId"] == status["checkpointId"]
    assert e2e.coordinator(JOB, "/v1/checkpoints")["latestSavepoint"]["path"] == status["path"]
    # The job went on: same run, same coordinator pod, still asked to run, and still checkpointing.
    job = e2e.get("streamjob", JOB)
    assert job is not None
    assert job["spec"]["state"] == "running"
    assert job["status"]["lifecycleState"] == "Running" and job["status"]["job"]["id"] == run
    assert e2e.coordinator_pod(JOB)["metadata"]["uid"] == coordinator_uid
    e2e.wait_checkpoints_after(JOB, int(status["checkpointId"]))

    _finish_and_check_output(e2e)


@pytest.mark.timeout(600)
def test_killed_taskmanagers_recover_from_the_checkpoint_exactly_once(e2e: E2ECluster) -> None:
    e2e.apply(unbounded_job(task_managers=2))  # one killed among others
    e2e.wait_running_with_checkpoint(JOB)
    job = e2e.coordinator(JOB, "/v1/job")

    # The Python TaskManager (a Spark Python worker in the executor pod) dies.
    victim = job["taskManagers"][0]
    pod = e2e.taskmanager_pod_of(JOB, victim["host"])
    checkpoint = int(e2e.get("streamjob", JOB)["status"]["lastCheckpoint"]["id"])  # type: ignore[index]
    e2e.signal_process(pod, victim["pid"], signal.SIGKILL)
    job = e2e.wait_restarted(JOB, 1, {tm["pid"] for tm in job["taskManagers"]})
    checkpoint = e2e.wait_checkpoints_after(JOB, checkpoint)

    # The executor JVM of a TaskManager pod dies: the pod fails and Spark asks for a new executor pod.
    # Pods are named <job>-taskmanager-<executor id> (Sluice's feature step; Spark alone would add
    # "-exec"), and Spark never reuses an id: the replacement is the third.
    pods_before = {p["metadata"]["name"] for p in e2e.taskmanager_pods(JOB)}
    assert pods_before == {f"{JOB}-taskmanager-1", f"{JOB}-taskmanager-2"}, pods_before
    e2e.kill_executor_jvm(e2e.taskmanager_pod_of(JOB, job["taskManagers"][0]["host"]))
    job = e2e.wait_restarted(JOB, 2, {tm["pid"] for tm in job["taskManagers"]})
    hosts = {e2e.taskmanager_pod_of(JOB, tm["host"]) for tm in job["taskManagers"]}
    assert hosts - pods_before == {f"{JOB}-taskmanager-3"}, f"{hosts} after {pods_before}"
    for tm_pod in e2e.taskmanager_pods(JOB):
        # The executor's host name follows the pod's name (Spark sets both to the same value).
        assert tm_pod["spec"]["hostname"] == tm_pod["metadata"]["name"], tm_pod["spec"]
    e2e.wait_checkpoints_after(JOB, checkpoint)

    finished = _finish_and_check_output(e2e)
    assert finished["status"]["job"]["restarts"] >= 2

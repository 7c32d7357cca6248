"""The unbounded example job on the real node: deploy it under a name of its own, watch its pods and runs,
drain it and check its whole output for exactly once (see _outputs.py).

The job is examples/k8s/streamjob.yaml with one TaskManager (running both subtasks): the example's two
do not fit next to the operator and the coordinator on the node's 2 CPUs. Several jobs of one test
module share a namespace and an operator, so each test names its job.

On the real node PIDs are per container: a replacement TaskManager may well have its predecessor's PID,
so a new TaskManager is told apart by its pod, not its PID.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import yaml

from e2e._cluster import EXAMPLES, E2ECluster
from e2e._outputs import assert_unbounded_exactly_once, generated_prefixes
from testkit.outputs import read_output

UNBOUNDED = EXAMPLES / "streamjob.yaml"
DEPLOY_TIMEOUT = 420.0
"""A first run on the node: Spark's driver and an executor JVM start on 2 CPUs shared with the suite."""


def apply_unbounded(e2e: E2ECluster, name: str, **spec: Any) -> None:
    """examples/k8s/streamjob.yaml as job `name`, one TaskManager, `spec` merged over its spec."""
    manifest = yaml.safe_load(UNBOUNDED.read_text())
    manifest["metadata"]["name"] = name
    manifest["spec"]["taskManagers"]["replicas"] = 1
    manifest["spec"].update(spec)
    e2e.apply(yaml.safe_dump(manifest))


def generation(e2e: E2ECluster, job: str) -> int:
    found = e2e.get("streamjob", job)
    assert found is not None, f"StreamJob {job} is gone"
    return int(found["metadata"]["generation"])


def patch_spec(e2e: E2ECluster, job: str, spec: dict[str, Any]) -> int:
    """Merge `spec` into the job's spec; returns the generation that change made."""
    e2e.kubectl("patch", "streamjob", job, "--type=merge", "-p", json.dumps({"spec": spec}))
    return generation(e2e, job)


def committed_records(e2e: E2ECluster, job: str) -> int:
    """How many records the committed output covers so far (a lower bound for the final output)."""
    output = read_output(e2e.storage.output_uri(e2e.namespace, job), e2e.storage.storage_options)
    return sum(generated_prefixes(output).values()) if output else 0


def last_checkpoint(e2e: E2ECluster, job: str) -> int:
    found = e2e.get("streamjob", job) or {}
    return int(((found.get("status") or {}).get("lastCheckpoint") or {}).get("id") or 0)


def containers(e2e: E2ECluster, job: str) -> dict[str, tuple[str, list[tuple[str, int]]]]:
    """Per pod of the job: its uid and, per container, the runtime's container id and restart count."""
    return {
        pod["metadata"]["name"]: (
            pod["metadata"]["uid"],
            sorted(
                (c.get("containerID", ""), int(c.get("restartCount", 0)))
                for c in pod.get("status", {}).get("containerStatuses") or []
            ),
        )
        for pod in e2e.job_pods(job)
    }


def wait_restarted_on_new_pods(e2e: E2ECluster, job: str, restarts: int, gone: Iterable[str]) -> Any:
    """Wait until the run (`GET /v1/job`) has restarted `restarts` times and runs every subtask on
    TaskManagers in pods none of which is in `gone`; returns that answer."""
    gone = set(gone)

    def restarted() -> Any:
        run = e2e.coordinator(job, "/v1/job")
        if run["state"] != "RUNNING" or run["restarts"] < restarts or not run["taskManagers"]:
            return None
        if run["subtasks"]["running"] != run["subtasks"]["total"]:
            return None
        by_ip = {p.get("status", {}).get("podIP"): p["metadata"]["name"] for p in e2e.taskmanager_pods(job)}
        pods = {by_ip.get(tm["host"]) for tm in run["taskManagers"]}
        # A host that is no pod's IP any more ran in a pod that is gone by now.
        return run if None not in pods and not pods & gone else None

    what = f"job {job} restarted ({restarts}) on TaskManagers outside {sorted(gone)}"
    return e2e.wait(what, restarted, timeout=240)


def drain_and_check_output(e2e: E2ECluster, job: str) -> dict[str, Any]:
    """TERMINATE the job (`spec.state: finished`, a drain), then compare its whole output, every run
    included, with the plain-Python reference; returns the finished StreamJob."""
    before = committed_records(e2e, job)
    e2e.set_state(job, "finished")
    savepoint = e2e.wait_savepoint(f"{job}-terminate-{generation(e2e, job)}", "Completed", timeout=300)
    metadata = e2e.storage.read_json(f"{savepoint['status']['path']}/_metadata")
    assert (metadata["kind"], metadata["stopMode"]) == ("savepoint", "drain"), metadata
    finished = e2e.wait_lifecycle(job, "Finished", timeout=180)
    assert finished["status"]["job"]["state"] == "FINISHED"
    e2e.wait_pods_gone(job)
    output = read_output(e2e.storage.output_uri(e2e.namespace, job), e2e.storage.storage_options)
    assert_unbounded_exactly_once(output, at_least=max(before, 1))
    return finished

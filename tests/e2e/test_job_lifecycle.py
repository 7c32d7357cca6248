"""Deleting a StreamJob, and StreamJobs that are invalid.

An operator restarted while a savepoint is in progress: test_real_node_faults.py, on the real node.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml

from e2e._cluster import EXAMPLES, JOB_LABEL, E2ECluster
from e2e._jobs import UNBOUNDED_NAME, unbounded_job, unbounded_manifest

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

SAVEPOINT = EXAMPLES / "savepoint.yaml"
JOB = UNBOUNDED_NAME  # on one TaskManager (_jobs.py)
USER_SAVEPOINT = yaml.safe_load(SAVEPOINT.read_text())["metadata"]["name"]
# What the operator creates for a job (docs/operator.md), and what Spark creates (executor pods).
OWNED_KINDS = (
    "pods",
    "services",
    "configmaps",
    "secrets",
    "serviceaccounts",
    "roles",
    "rolebindings",
    "savepoints",
)


def _owned(e2e: E2ECluster) -> dict[str, list[str]]:
    return {
        kind: sorted(obj["metadata"]["name"] for obj in e2e.items(kind, f"{JOB_LABEL}={JOB}"))
        for kind in OWNED_KINDS
    }


@pytest.mark.timeout(480)
def test_deleting_a_streamjob_removes_everything_it_owned(e2e: E2ECluster) -> None:
    e2e.apply(unbounded_job())
    e2e.wait_running_with_checkpoint(JOB)
    # One operator-made Savepoint (a suspend) and a user's own one, both of a running job.
    e2e.set_state(JOB, "suspended")
    e2e.wait_lifecycle(JOB, "Suspended")
    e2e.set_state(JOB, "running")
    e2e.wait_running_with_checkpoint(JOB)
    e2e.apply(SAVEPOINT)
    e2e.wait_savepoint(USER_SAVEPOINT, "Completed")

    owned = _owned(e2e)
    coordinator = e2e.coordinator_pod(JOB)
    taskmanagers = e2e.taskmanager_pods(JOB)
    assert len(taskmanagers) == 1 and owned["pods"] == sorted(
        [coordinator["metadata"]["name"], *(p["metadata"]["name"] for p in taskmanagers)]
    ), owned
    for kind in OWNED_KINDS[1:]:
        assert owned[kind], f"the job has no {kind} labelled {JOB_LABEL}={JOB}: {owned}"
    # Spark makes the coordinator pod the owner of the TaskManager pods; the operator owns the rest.
    for pod in taskmanagers:
        assert [o["uid"] for o in pod["metadata"]["ownerReferences"]] == [coordinator["metadata"]["uid"]]
    job_uid = e2e.get("streamjob", JOB)["metadata"]["uid"]  # type: ignore[index]
    assert [o["uid"] for o in coordinator["metadata"]["ownerReferences"]] == [job_uid]

    e2e.kubectl("delete", "streamjob", JOB, "--timeout=120s")

    e2e.wait(f"every object of {JOB} deleted", lambda: not any(_owned(e2e).values()), timeout=120)
    assert e2e.get("pod", f"{JOB}-coordinator") is None
    # A user's Savepoint is a restore point of its own: it outlives the job (docs/operator.md).
    assert (e2e.get("savepoint", USER_SAVEPOINT) or {}).get("status", {}).get("state") == "Completed"


def _variant(**spec_changes: Any) -> tuple[str, dict[str, Any]]:
    manifest = unbounded_manifest()
    for path, value in spec_changes.items():
        node = manifest["spec"]
        *parents, leaf = path.split("__")
        for key in parents:
            node = node[key]
        node[leaf] = value
    return manifest["metadata"]["name"], manifest


# One bad value each: the API server skips its CEL rules (the duration format) when a plain schema
# rule already failed.
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"checkpoints__interval": "10 seconds"},
            'spec.checkpoints.interval: Invalid value: "10 seconds": must be a duration such as 500ms',
        ),
        ({"state": "paused"}, 'spec.state: Unsupported value: "paused": supported values: "running"'),
        ({"parallelism": 0}, "spec.parallelism: Invalid value: 0: spec.parallelism in body should be"),
    ],
    ids=["duration", "state", "parallelism"],
)
def test_values_the_schema_can_check_are_rejected_by_the_api_server(
    e2e: E2ECluster, change: dict[str, Any], message: str
) -> None:
    name, manifest = _variant(**change)

    result = e2e.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest), check=False)

    assert result.returncode != 0, result.stdout
    assert message in result.stderr, result.stderr
    assert e2e.get("streamjob", name) is None


@pytest.mark.timeout(300)
def test_a_spec_only_the_operator_can_check_is_degraded_with_a_clear_message(e2e: E2ECluster) -> None:
    name, manifest = _variant(taskManagers__replicas=3)  # parallelism 2: one TaskManager would idle

    e2e.apply(yaml.safe_dump(manifest))

    def is_degraded(job: dict[str, Any]) -> bool:
        conditions = job.get("status", {}).get("conditions", [])
        return any(c["type"] == "Degraded" and c["status"] == "True" for c in conditions)

    degraded = e2e.wait_streamjob(name, "Degraded", is_degraded, timeout=60)
    error = degraded["status"]["error"]
    assert "spec.taskManagers.replicas (3) is more than spec.parallelism (2)" in error, error
    assert "lower the replicas" in error, error

    def warned() -> bool:
        return error in [e["message"] for e in e2e.items("events") if e["type"] == "Warning"]

    # The operator posts its events after the status patch, through kopf's queue: a reader that saw
    # the status can list the events before this one is in (one whole run did, 2026-11-27).
    e2e.wait("the Degraded warning event", warned, timeout=30)
    time.sleep(3)  # a few reconcile intervals: the operator must not act on the invalid spec
    assert e2e.job_pods(name) == []

    # Fixed, the same object runs: the operator never gave up on it.
    e2e.kubectl("patch", "streamjob", name, "--type=merge", "-p", '{"spec":{"taskManagers":{"replicas":1}}}')
    running = e2e.wait_lifecycle(name, "Running", timeout=180)
    conditions = {c["type"]: c["status"] for c in running["status"]["conditions"]}
    assert conditions["Degraded"] == "False" and not running["status"].get("error"), running["status"]

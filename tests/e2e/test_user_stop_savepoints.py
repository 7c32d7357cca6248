"""A user's `Savepoint` with `stop: suspend|terminate` stops the job; a stop that fails leaves it running.

The user creates the Savepoint (GitOps-style, with `kubectl apply`) instead of editing `spec.state`: the
operator records the request in the StreamJob (`spec.state`), so that the spec says what the job is,
and carries it out like a state change. A stop whose savepoint cannot be written fails before anything
stops: the Savepoint is Failed with the error, the job runs on, `Degraded` says so, and a Warning event
is posted; the operator does not retry it.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from e2e._cluster import E2ECluster
from e2e._jobs import UNBOUNDED_NAME, unbounded_job
from e2e._outputs import assert_unbounded_exactly_once
from testkit.outputs import read_output

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

JOB = UNBOUNDED_NAME  # on one TaskManager (_jobs.py)


def _stop_savepoint(name: str, stop: str, target: str | None = None) -> str:
    spec: dict[str, Any] = {"jobName": JOB, "stop": stop}
    if target is not None:
        spec["targetDirectory"] = target
    return yaml.safe_dump(
        {"apiVersion": "sluice.dev/v1alpha1", "kind": "Savepoint", "metadata": {"name": name}, "spec": spec}
    )


def _output(e2e: E2ECluster) -> Any:
    return read_output(e2e.storage.output_uri(e2e.namespace, JOB), e2e.storage.storage_options)


def _events(e2e: E2ECluster, reason: str) -> list[str]:
    return [str(e["message"]) for e in e2e.items("events") if e.get("reason") == reason]


def _stop_with(e2e: E2ECluster, name: str, stop: str, run: str) -> dict[str, Any]:
    """Apply a user's stop Savepoint to run `run` and check that it, and nothing of the operator's, stopped
    the job; returns the Completed Savepoint."""
    e2e.apply(_stop_savepoint(name, stop))
    savepoint = e2e.wait_savepoint(name, "Completed")
    metadata = e2e.storage.read_json(f"{savepoint['status']['path']}/_metadata")
    assert (metadata["jobId"], metadata["stopMode"]) == (run, "drain" if stop == "terminate" else "no-drain")
    state, lifecycle = ("finished", "Finished") if stop == "terminate" else ("suspended", "Suspended")
    job = e2e.wait_lifecycle(JOB, lifecycle)
    assert job["spec"]["state"] == state, "the operator records the user's stop in the StreamJob's spec"
    assert job["status"]["lastSavepoint"]["path"] == savepoint["status"]["path"]
    assert [m for m in _events(e2e, "StopRequested") if name in m], f"no StopRequested event for {name}"
    e2e.wait_pods_gone(JOB)
    return savepoint


@pytest.mark.timeout(600)
def test_a_users_stop_savepoints_suspend_and_then_terminate_the_job_and_set_its_state(
    e2e: E2ECluster,
) -> None:
    """`stop: suspend` on a running job, a resume from that savepoint, then `stop: terminate`: one job
    shows both stops (each its own run), and the output of both runs is exactly once."""
    e2e.apply(unbounded_job())
    run = e2e.wait_running_with_checkpoint(JOB)["status"]["job"]["id"]

    suspended = _stop_with(e2e, "suspend-it", "suspend", run)

    e2e.set_state(JOB, "running")
    resumed = e2e.wait_running_with_checkpoint(JOB)["status"]["job"]
    assert resumed["restoredFrom"] == suspended["status"]["path"]
    _stop_with(e2e, "terminate-it", "terminate", resumed["id"])

    # The user's Savepoints did the stops: the operator made no stop Savepoint of its own.
    names = {s["metadata"]["name"] for s in e2e.items("savepoints")}
    assert names == {"suspend-it", "terminate-it"}, names
    assert_unbounded_exactly_once(_output(e2e), at_least=1)


@pytest.mark.timeout(420)
def test_a_stop_that_fails_leaves_the_job_running_with_a_failed_savepoint_and_an_event(
    e2e: E2ECluster,
) -> None:
    e2e.apply(unbounded_job())
    running = e2e.wait_running_with_checkpoint(JOB)["status"]
    run, coordinator_uid = running["job"]["id"], e2e.coordinator_pod(JOB)["metadata"]["uid"]

    # A target outside the job's directories and the operator's allowed prefixes: the operator refuses
    # it, naming them, and nothing stops (spec.state stays running).
    outside = f"s3://{e2e.storage.bucket}/not-allowed/savepoints"
    e2e.apply(_stop_savepoint("stop-outside", "terminate", outside))
    refused = e2e.wait_savepoint("stop-outside", "Failed")["status"]
    assert "is not under an allowed savepoint location" in refused["error"], refused
    for prefix in [
        f"{e2e.storage.root}/savepoints/{e2e.namespace}/{JOB}",
        *e2e.storage.allowed_savepoint_prefixes,
    ]:
        assert prefix in refused["error"], refused
    assert refused.get("triggerId") is None and not refused.get("path"), refused
    assert e2e.get("streamjob", JOB)["spec"]["state"] == "running"  # type: ignore[index]
    e2e.kubectl("delete", "savepoint", "stop-outside")
    # Under an allowed prefix the coordinator takes it: the operator passed the prefix on.
    e2e.apply(_stop_savepoint("elsewhere", "none", f"{e2e.storage.allowed_savepoint_prefixes[0]}/one"))
    elsewhere = e2e.wait_savepoint("elsewhere", "Completed")["status"]
    assert elsewhere["path"].startswith(f"{e2e.storage.allowed_savepoint_prefixes[0]}/one/"), elsewhere
    assert e2e.storage.exists(f"{elsewhere['path']}/_metadata")
    e2e.kubectl("delete", "savepoint", "elsewhere")

    # A bucket that does not exist (an allowed prefix): the coordinator's check of the target fails
    # before any source stops.
    target = f"s3://{e2e.storage.bucket}-missing/savepoints"
    e2e.apply(_stop_savepoint("stop-nowhere", "suspend", target))
    failed = e2e.wait_savepoint("stop-nowhere", "Failed")["status"]
    assert failed.get("error"), failed
    assert "path" not in failed or not failed["path"], failed

    def degraded() -> dict[str, Any] | None:
        job = e2e.get("streamjob", JOB) or {}
        status = job.get("status") or {}
        conditions = {c["type"]: c for c in status.get("conditions", [])}
        is_degraded = conditions.get("Degraded", {}).get("status") == "True"
        return job if is_degraded and status.get("lifecycleState") == "Running" else None

    job = e2e.wait("the job Running and Degraded after the failed stop", degraded, timeout=120)
    assert "stop-nowhere" in job["status"]["error"], job["status"]
    assert job["status"]["job"]["id"] == run and job["status"]["job"]["state"] == "RUNNING"
    assert e2e.coordinator_pod(JOB)["metadata"]["uid"] == coordinator_uid
    assert [e for e in e2e.items("events") if e["type"] == "Warning" and "stop-nowhere" in e["message"]]
    # Not retried, and not replaced by an operator-made stop: the job keeps checkpointing as before.
    e2e.wait_checkpoints_after(JOB, int(running["lastCheckpoint"]["id"]))
    names = {s["metadata"]["name"] for s in e2e.items("savepoints")}
    assert names == {"stop-nowhere"}, names
    assert e2e.coordinator(JOB, "/v1/job")["state"] == "RUNNING"

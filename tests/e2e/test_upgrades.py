"""Spec changes of a running StreamJob under each upgrade mode, and `restartNonce` (docs/operator.md).

The job is examples/k8s/streamjob.yaml with `upgradeMode` set per test, on one TaskManager but for the
rescale (see _jobs.py). Where state must carry over
(`savepoint`, `last-state`), the test drains the job at the end and checks its whole output, across both
runs, for exactly once (see _outputs.py); for `stateless` it checks that the new run's output is
complete from record 0, which a run restored from any checkpoint could not write.
"""

from __future__ import annotations

import json
import os
import re
import signal
from typing import Any

import pytest
import yaml

from e2e._cluster import E2ECluster
from e2e._jobs import UNBOUNDED_NAME, unbounded_manifest
from e2e._outputs import assert_unbounded_exactly_once, generated_prefixes
from testkit.outputs import read_output

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

JOB = UNBOUNDED_NAME


# --- helpers ---------------------------------------------------------------------------------------------


def _apply(e2e: E2ECluster, upgrade_mode: str, task_managers: int = 1) -> None:
    manifest = unbounded_manifest(task_managers=task_managers)
    manifest["spec"]["upgradeMode"] = upgrade_mode
    e2e.apply(yaml.safe_dump(manifest))


def _patch_spec(e2e: E2ECluster, spec: dict[str, Any]) -> int:
    """Merge `spec` into the StreamJob's spec; returns the generation that change made."""
    e2e.kubectl("patch", "streamjob", JOB, "--type=merge", "-p", json.dumps({"spec": spec}))
    job = e2e.get("streamjob", JOB)
    assert job is not None
    return int(job["metadata"]["generation"])


def _generation(e2e: E2ECluster) -> int:
    job = e2e.get("streamjob", JOB)
    assert job is not None
    return int(job["metadata"]["generation"])


def _output(e2e: E2ECluster, job: str = JOB, out: str | None = None) -> Any:
    return read_output(out or e2e.storage.output_uri(e2e.namespace, job), e2e.storage.storage_options)


def _committed_records(e2e: E2ECluster) -> int:
    output = _output(e2e)
    return sum(generated_prefixes(output).values()) if output else 0


def _wait_new_run(e2e: E2ECluster, previous: str) -> dict[str, Any]:
    """Running again under a run id other than `previous`, with a checkpoint of its own; the status."""
    e2e.wait_streamjob(
        JOB,
        f"a run other than {previous}",
        lambda sj: ((sj.get("status") or {}).get("job") or {}).get("id") not in (None, previous),
        timeout=180,
    )
    return dict(e2e.wait_running_with_checkpoint(JOB)["status"])


def _coordinator_args(e2e: E2ECluster) -> list[str]:
    return list(e2e.coordinator_pod(JOB)["spec"]["containers"][0]["args"])


def _from_savepoint_arg(e2e: E2ECluster) -> str | None:
    args = _coordinator_args(e2e)
    return args[args.index("--from-savepoint") + 1] if "--from-savepoint" in args else None


def _lifecycle_events(e2e: E2ECluster) -> list[str]:
    """The StreamJob's lifecycle transitions the operator announced, e.g. 'lifecycle Running -> Upgrading'."""
    return [
        e["message"]
        for e in e2e.items("events")
        if e["involvedObject"].get("kind") == "StreamJob" and e["message"].startswith("lifecycle ")
    ]


def _spec_field(status: dict[str, Any], key: str, *path: str) -> Any:
    node = json.loads(status[key])
    for part in path:
        node = node[part]
    return node


def _checkpoints_of(e2e: E2ECluster, run: str) -> list[int]:
    """The completed checkpoints (a `_metadata` exists) of one run in storage, ascending."""
    root = f"{e2e.storage.root}/checkpoints/{e2e.namespace}/{JOB}/{run}"
    # One listing of every object below the run (`find`), not a glob: a glob lists the chk-* prefixes and
    # then looks into each, and the running job's retention may delete one in between (seen:
    # FileNotFoundError for a chk-5 removed meanwhile). A checkpoint deleted meanwhile is simply absent.
    found = e2e.storage.filesystem().find(root.removeprefix("s3://"))
    return sorted(
        int(match.group(1))
        for path in found
        if (match := re.search(r"/chk-(\d+)/_metadata$", path)) is not None
    )


def _finish_and_check_output(e2e: E2ECluster) -> dict[int, int]:
    """TERMINATE the job (drain), then compare its whole output, every run included, with the reference."""
    before = _committed_records(e2e)
    e2e.set_state(JOB, "finished")
    e2e.wait_savepoint(f"{JOB}-terminate-{_generation(e2e)}", "Completed")
    e2e.wait_lifecycle(JOB, "Finished")
    e2e.wait_pods_gone(JOB)
    return assert_unbounded_exactly_once(_output(e2e), at_least=before)


# --- the tests -------------------------------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_savepoint_mode_suspends_with_a_savepoint_and_starts_the_new_spec_from_it(e2e: E2ECluster) -> None:
    _apply(e2e, "savepoint", task_managers=2)
    before = e2e.wait_running_with_checkpoint(JOB)["status"]
    first_run = before["job"]["id"]
    assert _spec_field(before, "lastStableSpec", "parallelism") == 2
    committed = _committed_records(e2e)

    # A rescale, the upgrade Flink users make most: parallelism 2 -> 1, one TaskManager.
    generation = _patch_spec(e2e, {"parallelism": 1, "taskManagers": {"replicas": 1}})

    savepoint = e2e.wait_savepoint(f"{JOB}-upgrade-{generation}", "Completed")
    assert savepoint["spec"]["stop"] == "suspend"
    path = savepoint["status"]["path"]
    metadata = e2e.storage.read_json(f"{path}/_metadata")
    assert (metadata["kind"], metadata["stopMode"], metadata["jobId"]) == ("savepoint", "no-drain", first_run)
    result = e2e.storage.read_json(
        f"{e2e.storage.root}/checkpoints/{e2e.namespace}/{JOB}/{first_run}/job-result.json"
    )
    assert (result["state"], result["lastSavepoint"]) == ("FINISHED", path), result

    # While the new run deploys (Spark takes seconds to start), the old spec is the last stable one.
    deploying = e2e.wait_streamjob(
        JOB,
        "the new run deploying",
        lambda sj: (
            (sj.get("status") or {}).get("job", {}).get("id") not in (None, first_run)
            and sj["status"].get("lifecycleState") in ("Upgrading", "Deploying")
        ),
    )["status"]
    assert _spec_field(deploying, "lastReconciledSpec", "parallelism") == 1
    assert _spec_field(deploying, "lastStableSpec", "parallelism") == 2

    after = _wait_new_run(e2e, first_run)
    assert after["job"]["restoredFrom"] == path
    assert _from_savepoint_arg(e2e) == path
    assert after["job"]["subtasks"]["total"] < before["job"]["subtasks"]["total"], (before, after)
    assert len(e2e.taskmanager_pods(JOB)) == 1
    assert "lifecycle Running -> Upgrading" in _lifecycle_events(e2e)
    assert _spec_field(after, "lastReconciledSpec", "parallelism") == 1
    assert _spec_field(after, "lastStableSpec", "parallelism") == 1
    assert after["lastSavepoint"]["path"] == path
    # The first run's checkpoints can restore nothing any more (the new run started from the savepoint
    # and has a checkpoint of its own): the operator deletes that run's directory, and only that.
    second_run = after["job"]["id"]
    first_dir = f"{e2e.storage.root}/checkpoints/{e2e.namespace}/{JOB}/{first_run}"
    e2e.wait(
        "the first run's checkpoint directory deleted",
        lambda: (
            not _checkpoints_of(e2e, first_run) and not e2e.storage.exists(f"{first_dir}/job-result.json")
        ),
    )
    e2e.wait_streamjob(
        JOB, "only the current run recorded", lambda sj: sj["status"]["checkpointRuns"] == [second_run]
    )
    assert _checkpoints_of(e2e, second_run)
    assert [
        e for e in e2e.items("events") if e["reason"] == "CheckpointsDeleted" and first_run in e["message"]
    ]

    _finish_and_check_output(e2e)
    assert _committed_records(e2e) >= committed


@pytest.mark.timeout(600)
def test_last_state_mode_starts_the_new_spec_from_the_latest_checkpoint_also_with_the_coordinator_gone(
    e2e: E2ECluster,
) -> None:
    _apply(e2e, "last-state")
    first_run = e2e.wait_running_with_checkpoint(JOB)["status"]["job"]["id"]

    _patch_spec(e2e, {"pipeline": {"args": {"rate": "4000"}}})

    after = _wait_new_run(e2e, first_run)
    restored = after["job"]["restoredFrom"]
    checkpoints = _checkpoints_of(e2e, first_run)
    # The newest checkpoint the old run completed: nothing was taken after it (it was cancelled).
    assert restored == (
        f"{e2e.storage.root}/checkpoints/{e2e.namespace}/{JOB}/{first_run}/chk-{checkpoints[-1]}"
    ), (restored, checkpoints)
    assert _from_savepoint_arg(e2e) == restored
    assert e2e.items("savepoints") == [], "a last-state upgrade took a savepoint"
    assert "lifecycle Running -> Upgrading" in _lifecycle_events(e2e)
    assert _spec_field(after, "lastReconciledSpec", "pipeline", "args", "rate") == "4000"
    # The run restored from stays in storage while the new run lives, though the new run checkpoints.
    e2e.wait_checkpoints_after(JOB, int(after["lastCheckpoint"]["id"]))
    assert _checkpoints_of(e2e, first_run) == checkpoints
    second_run = after["job"]["id"]
    assert e2e.get("streamjob", JOB)["status"]["checkpointRuns"] == [first_run, second_run]  # type: ignore[index]

    # Upgraded again, now with no operator and no coordinator: only storage knows where the job got to.
    e2e.operator.crash()
    e2e.kubectl("delete", "pod", f"{JOB}-coordinator", "--timeout=90s")
    e2e.wait_pods_gone(JOB)
    checkpoints = _checkpoints_of(e2e, second_run)
    assert checkpoints, "the second run left no checkpoint in storage"
    _patch_spec(e2e, {"pipeline": {"args": {"rate": "3000"}}})
    e2e.operator.start()

    third = _wait_new_run(e2e, second_run)
    expected = f"{e2e.storage.root}/checkpoints/{e2e.namespace}/{JOB}/{second_run}/chk-{checkpoints[-1]}"
    assert third["job"]["restoredFrom"] == expected
    assert _from_savepoint_arg(e2e) == expected
    assert e2e.items("savepoints") == []
    assert _spec_field(third, "lastReconciledSpec", "pipeline", "args", "rate") == "3000"

    _finish_and_check_output(e2e)


@pytest.mark.timeout(600)
def test_stateless_mode_starts_the_new_spec_from_empty_state(e2e: E2ECluster) -> None:
    _apply(e2e, "stateless")
    first_run = e2e.wait_running_with_checkpoint(JOB)["status"]["job"]["id"]
    old_out = e2e.storage.output_uri(e2e.namespace, JOB)
    e2e.wait("the first run committed output", lambda: _committed_records(e2e) > 0, timeout=60)

    new_out = f"{old_out}-v2"
    _patch_spec(e2e, {"pipeline": {"args": {"out": new_out}}})

    after = _wait_new_run(e2e, first_run)
    assert "restoredFrom" not in after["job"], after["job"]
    assert "--from-savepoint" not in _coordinator_args(e2e)
    assert e2e.items("savepoints") == []
    assert "lifecycle Running -> Upgrading" in _lifecycle_events(e2e)

    e2e.set_state(JOB, "finished")
    e2e.wait_lifecycle(JOB, "Finished")
    # Complete from record 0 and exactly once: the generator's position was not carried over (a
    # restored run would resume past 0 and miss the first windows).
    output = _output(e2e, out=new_out)
    assert_unbounded_exactly_once(output, at_least=1)
    assert any(json.loads(line)[1] == 0 for line in output), "the new run did not start at record 0"


@pytest.mark.timeout(600)
def test_restart_nonce_restarts_an_unchanged_job_through_its_upgrade_mode(e2e: E2ECluster) -> None:
    _apply(e2e, "savepoint")
    first = e2e.wait_running_with_checkpoint(JOB)["status"]
    coordinator_uid = e2e.coordinator_pod(JOB)["metadata"]["uid"]

    generation = _patch_spec(e2e, {"restartNonce": 1})

    savepoint = e2e.wait_savepoint(f"{JOB}-upgrade-{generation}", "Completed")
    after = _wait_new_run(e2e, first["job"]["id"])
    assert after["job"]["restoredFrom"] == savepoint["status"]["path"]
    assert e2e.coordinator_pod(JOB)["metadata"]["uid"] != coordinator_uid
    assert _spec_field(after, "lastReconciledSpec", "restartNonce") == 1
    # Nothing else changed: the same job graph runs again.
    assert after["job"]["subtasks"]["total"] == first["job"]["subtasks"]["total"]

    # A spec change that does not shape the run (the savepoint policy) restarts nothing.
    _patch_spec(e2e, {"savepoints": {"historyMaxCount": 4}})
    checkpoint = int(after["lastCheckpoint"]["id"])
    e2e.wait_checkpoints_after(JOB, checkpoint + 2)
    job = e2e.get("streamjob", JOB)
    assert job is not None and job["status"]["job"]["id"] == after["job"]["id"]
    assert job["status"]["lifecycleState"] == "Running"

    _finish_and_check_output(e2e)


def _coordinator_pid(e2e: E2ECluster, run: str) -> int | None:
    """The PID of run `run`'s coordinator container once it has started (process kubelet only)."""
    pod = e2e.get("pod", f"{JOB}-coordinator") or {}
    if pod.get("metadata", {}).get("annotations", {}).get("sluice.dev/job-id") != run:
        return None
    for container in pod.get("status", {}).get("containerStatuses") or []:
        if "running" in (container.get("state") or {}):
            return int(container["containerID"].removeprefix("process://"))
    return None


@pytest.mark.timeout(600)
def test_an_upgraded_run_lost_before_its_first_checkpoint_restarts_from_the_upgrade_savepoint(
    e2e: E2ECluster,
) -> None:
    if e2e.kubelet is None:
        pytest.skip("kills the coordinator's process by PID, which needs the process kubelet")
    _apply(e2e, "savepoint")
    first_run = e2e.wait_running_with_checkpoint(JOB)["status"]["job"]["id"]
    assert _checkpoints_of(e2e, first_run), "the first run has no checkpoint an old restore could pick"

    generation = _patch_spec(e2e, {"restartNonce": 1})
    path = e2e.wait_savepoint(f"{JOB}-upgrade-{generation}", "Completed")["status"]["path"]

    # The upgraded run's coordinator dies at once: long before Spark is up, so before any checkpoint.
    def upgraded_run() -> tuple[str, int] | None:
        run = ((e2e.get("streamjob", JOB) or {}).get("status") or {}).get("job", {}).get("id")
        pid = _coordinator_pid(e2e, run) if run not in (None, first_run) else None
        return (run, pid) if pid is not None else None

    second_run, pid = e2e.wait(
        "the upgraded run's coordinator process", upgraded_run, timeout=120, interval=0.1
    )
    os.kill(pid, signal.SIGKILL)
    e2e.wait(
        "the coordinator pod failed",
        lambda: (e2e.get("pod", f"{JOB}-coordinator") or {}).get("status", {}).get("phase") == "Failed",
        timeout=60,
    )
    assert _checkpoints_of(e2e, second_run) == [], "the killed run checkpointed: the test proves nothing"

    # The first run's checkpoints predate the savepoint: restoring one would commit output twice.
    third = _wait_new_run(e2e, second_run)
    assert third["job"]["id"] != first_run
    assert third["job"]["restoredFrom"] == path
    assert _from_savepoint_arg(e2e) == path

    _finish_and_check_output(e2e)

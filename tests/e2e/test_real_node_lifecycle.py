"""An unbounded job's life on the real node: user stop (suspend) and resume through the StreamJob, then
its TaskManager pod and its coordinator pod deleted, as a node drain or an eviction would.

One job goes through all of it and is drained at the end: its whole output, across four runs, must equal
the plain-Python reference, with nothing lost and nothing twice.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e._cluster import E2ECluster
from e2e._real_node import RealNode, restricted_release
from e2e._real_node_jobs import (
    DEPLOY_TIMEOUT,
    apply_unbounded,
    drain_and_check_output,
    generation,
    last_checkpoint,
    wait_restarted_on_new_pods,
)

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

JOB = "lifecycle"


@pytest.fixture
def release(real_node: RealNode) -> Iterator[E2ECluster]:
    with restricted_release(real_node) as cluster:
        cluster.operator.start()
        yield cluster


@pytest.mark.timeout(1800, func_only=True)
def test_suspend_resume_and_deleted_pods_keep_the_output_exactly_once(release: E2ECluster) -> None:
    e2e = release
    apply_unbounded(e2e, JOB)
    first_run = e2e.wait_running_with_checkpoint(JOB, timeout=DEPLOY_TIMEOUT)["status"]["job"]["id"]

    # running -> suspended: stop-with-savepoint without drain; every pod of the job goes.
    e2e.set_state(JOB, "suspended")
    savepoint = e2e.wait_savepoint(f"{JOB}-suspend-{generation(e2e, JOB)}", "Completed", timeout=300)
    assert savepoint["spec"]["stop"] == "suspend"
    path = savepoint["status"]["path"]
    assert path.startswith(f"{e2e.storage.root}/savepoints/{e2e.namespace}/{JOB}/"), path
    metadata = e2e.storage.read_json(f"{path}/_metadata")
    assert (metadata["kind"], metadata["stopMode"], metadata["jobId"]) == ("savepoint", "no-drain", first_run)
    suspended = e2e.wait_lifecycle(JOB, "Suspended")
    assert suspended["status"]["lastSavepoint"]["path"] == path
    e2e.wait_pods_gone(JOB)

    # suspended -> running: a new run restored from that savepoint.
    e2e.set_state(JOB, "running")
    resumed = e2e.wait_running_with_checkpoint(JOB, timeout=DEPLOY_TIMEOUT)["status"]["job"]
    assert resumed["id"] != first_run and resumed["restoredFrom"] == path, resumed
    assert "endTime" not in resumed, f"the running job shows the previous run's end: {resumed}"
    args = e2e.coordinator_pod(JOB)["spec"]["containers"][0]["args"]
    assert args[args.index("--from-savepoint") + 1] == path, args

    # The TaskManager's pod deleted: Spark asks for a new executor pod, and the coordinator restarts
    # every subtask there from the run's latest checkpoint.
    (taskmanager,) = (pod["metadata"]["name"] for pod in e2e.taskmanager_pods(JOB))
    checkpoint = last_checkpoint(e2e, JOB)
    e2e.kubectl("delete", "pod", taskmanager, "--timeout=90s")
    run = wait_restarted_on_new_pods(e2e, JOB, 1, gone={taskmanager})
    assert run["jobId"] == resumed["id"], "a lost TaskManager restarts the run's tasks, not the run"
    e2e.wait_checkpoints_after(JOB, checkpoint)

    # The coordinator's pod deleted: its SIGTERM suspends the run (it is not cancelled), and the
    # operator starts a new coordinator, restored from that run's latest checkpoint.
    coordinator_uid = e2e.coordinator_pod(JOB)["metadata"]["uid"]
    e2e.kubectl("delete", "pod", f"{JOB}-coordinator", "--timeout=90s")
    e2e.wait_streamjob(
        JOB,
        f"a run after {resumed['id']}",
        lambda sj: ((sj.get("status") or {}).get("job") or {}).get("id") not in (None, resumed["id"]),
        timeout=DEPLOY_TIMEOUT,
    )
    last = e2e.wait_running_with_checkpoint(JOB, timeout=DEPLOY_TIMEOUT)["status"]["job"]
    assert f"/{resumed['id']}/chk-" in last["restoredFrom"], last
    assert e2e.coordinator_pod(JOB)["metadata"]["uid"] != coordinator_uid
    resumed_run_dir = last["restoredFrom"].rsplit("/chk-", 1)[0]
    assert not e2e.storage.exists(f"{resumed_run_dir}/job-result.json"), (
        "the deleted coordinator ended its job"
    )

    drain_and_check_output(e2e, JOB)

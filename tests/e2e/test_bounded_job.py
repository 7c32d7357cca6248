"""A bounded StreamJob (examples/k8s/streamjob-bounded.yaml) runs to Finished, exactly once.

Coordinator pod, Spark driver against the real API server, TaskManager executor pods from the pod
template, checkpoints and output on the S3 server: everything real except the kubelet.
"""

from __future__ import annotations

import pytest
import yaml

from e2e._cluster import EXAMPLES, E2ECluster
from testkit.outputs import assert_same_output, read_output, w1_reference

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

BOUNDED = EXAMPLES / "streamjob-bounded.yaml"


def test_bounded_job_finishes_exactly_once_with_every_operator_finished(e2e: E2ECluster) -> None:
    manifest = yaml.safe_load(BOUNDED.read_text())
    name, records = manifest["metadata"]["name"], int(manifest["spec"]["pipeline"]["args"]["n"])

    e2e.apply(BOUNDED)
    job = e2e.wait_lifecycle(name, "Finished", timeout=240)

    status = job["status"]
    assert status["job"]["state"] == "FINISHED"
    assert status["job"]["subtasks"]["finished"] == status["job"]["subtasks"]["total"] > 0
    checkpoint = status["lastCheckpoint"]
    assert checkpoint["allOperatorsFinished"] is True, checkpoint
    assert checkpoint["operators"] == len(checkpoint["fullyFinishedOperators"]) > 0, checkpoint
    ready = {c["type"]: c for c in status["conditions"]}
    assert ready["Ready"]["status"] == "True" and ready["Degraded"]["status"] == "False", status["conditions"]

    # The storage contract behind the status: the job result names that final checkpoint, whose
    # metadata says every operator finished (what the operator reads once the coordinator is gone).
    run = status["job"]["id"]
    checkpoint_dir = checkpoint["path"].rsplit("/", 1)[0]
    assert checkpoint_dir.endswith(f"/{run}"), checkpoint["path"]
    result = e2e.storage.read_json(f"{checkpoint_dir}/job-result.json")
    assert result["state"] == "FINISHED" and result["lastCheckpoint"] == checkpoint["path"], result
    metadata = e2e.storage.read_json(f"{checkpoint['path']}/_metadata")
    assert [op["fullyFinished"] for op in metadata["operators"]] == [True] * len(metadata["operators"])
    assert {op["uid"] for op in metadata["operators"]} == set(checkpoint["fullyFinishedOperators"])

    output = read_output(e2e.storage.output_uri(e2e.namespace, name), e2e.storage.storage_options)
    assert_same_output(output, w1_reference(records))

    # A finished job keeps no pods, and stays Finished while they go.
    e2e.wait_pods_gone(name, timeout=60)
    transitions = [e["message"] for e in e2e.items("events") if e["message"].startswith("lifecycle ")]
    assert not [t for t in transitions if t.startswith("lifecycle Finished ->")], transitions
    assert e2e.get("streamjob", name)["status"]["lifecycleState"] == "Finished"  # type: ignore[index]

"""Jobs in a namespace that enforces the `restricted` Pod Security Standard, and the job's secrets.

The real kube-apiserver's PodSecurity admission refuses any pod beyond the standard: the coordinator
pod the operator creates, and the TaskManager pods Spark creates from the operator's template, must meet
it, or the job never runs. Spark's RPC is authenticated with the secret mounted from the job's Secret,
so a job that runs also shows that TaskManagers authenticate to their driver.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import pytest
import yaml

from e2e._cluster import EXAMPLES, E2ECluster, rest_port_of
from e2e._jobs import UNBOUNDED_NAME, unbounded_job
from e2e._outputs import assert_unbounded_exactly_once
from testkit.outputs import assert_same_output, read_output, w1_reference

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark]

BOUNDED = EXAMPLES / "streamjob-bounded.yaml"
PRIVILEGED_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: privileged}
spec:
  hostNetwork: true
  containers: [{name: main, image: sluice:dev, args: [sleep, "1"]}]
"""


def _restrict(e2e: E2ECluster) -> None:
    e2e.kube.kubectl(
        "label",
        "namespace",
        e2e.namespace,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )
    # The API server does enforce it here: a pod on the host's network is refused.
    refused = e2e.kubectl("apply", "-f", "-", input=PRIVILEGED_POD, check=False)
    assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr, refused.stderr


@pytest.mark.timeout(420)
def test_bounded_job_finishes_in_a_restricted_namespace(e2e: E2ECluster) -> None:
    _restrict(e2e)
    manifest = yaml.safe_load(BOUNDED.read_text())
    name, records = manifest["metadata"]["name"], int(manifest["spec"]["pipeline"]["args"]["n"])

    e2e.apply(BOUNDED)
    job = e2e.wait_lifecycle(name, "Finished", timeout=240)

    assert job["status"]["job"]["state"] == "FINISHED"
    assert job["status"]["lastCheckpoint"]["allOperatorsFinished"] is True
    output = read_output(e2e.storage.output_uri(e2e.namespace, name), e2e.storage.storage_options)
    assert_same_output(output, w1_reference(records))
    refusals = [e["message"] for e in e2e.items("events") if e.get("reason") in ("FailedCreate", "Failed")]
    assert not [m for m in refusals if "PodSecurity" in m], refusals


@pytest.mark.timeout(600)
def test_job_pods_carry_the_secrets_as_files_and_only_the_token_opens_the_rest_api(e2e: E2ECluster) -> None:
    _restrict(e2e)
    job = UNBOUNDED_NAME
    e2e.apply(unbounded_job())  # one TaskManager (_jobs.py) shows its pod spec as two would
    e2e.wait_running_with_checkpoint(job)  # TaskManagers registered with their authenticating driver

    secret = e2e.get("secret", f"{job}-auth")
    assert secret is not None
    assert [o["uid"] for o in secret["metadata"]["ownerReferences"]] == [
        e2e.get("streamjob", job)["metadata"]["uid"]  # type: ignore[index]
    ]
    token = base64.b64decode(secret["data"]["rest-token"]).decode()
    spark_secret = base64.b64decode(secret["data"]["spark-secret"]).decode()
    assert e2e.get("networkpolicy", f"{job}-network") is not None

    coordinator = e2e.coordinator_pod(job)
    (container,) = coordinator["spec"]["containers"]
    assert "--rest-token-file" in container["args"]
    for pod in [coordinator, *e2e.taskmanager_pods(job)]:
        text = json.dumps(pod["spec"])
        assert token not in text and spark_secret not in text, "secrets only as mounted files"
        assert "SPARK_AUTHENTICATE_SECRET" not in text
    for pod in e2e.taskmanager_pods(job):
        mounted = [v["secret"] for v in pod["spec"]["volumes"] if "secret" in v]
        assert [item["key"] for volume in mounted for item in volume["items"]] == ["spark-secret"]

    if e2e.kubelet is not None:  # the pod IP is reachable from here; on kind the NetworkPolicy says no
        url = f"http://{coordinator['status']['podIP']}:{rest_port_of(coordinator)}/v1/job"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10)
        assert refused.value.code == 401
    assert e2e.coordinator(job, "/v1/job")["state"] == "RUNNING"  # with the token

    e2e.set_state(job, "finished")
    done = e2e.wait_lifecycle(job, "Finished")
    output = read_output(e2e.storage.output_uri(e2e.namespace, job), e2e.storage.storage_options)
    assert_unbounded_exactly_once(output, at_least=0)
    # Never in status, events or the operator's log.
    events = json.dumps([e["message"] for e in e2e.items("events")])
    for text in (json.dumps(done["status"]), events, e2e.operator.logs(100_000)):
        assert token not in text and spark_secret not in text

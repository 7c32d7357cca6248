"""The operator against a real kube-apiserver (no pods run here: the coordinator stays Pending).

What needs a running coordinator (real jobs, savepoints completing) is tested end to end in tests/e2e.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from testkit.kube import KubeCommandError, KubeEnv, streamjob_manifest

pytestmark = pytest.mark.kube


def _job(name: str, extra: str = "") -> str:
    return streamjob_manifest(name, extra=extra)


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def _events(kube_env: KubeEnv, namespace: str, name: str) -> list[dict[str, Any]]:
    items = kube_env.kubectl_json("get", "events", namespace=namespace)["items"]
    return [e for e in items if e["involvedObject"]["name"] == name]


def test_crds_are_established_with_printer_columns(kube_env: KubeEnv, kube_namespace: str) -> None:
    kube_env.kubectl("apply", "-f", "-", input=_job("columns"), namespace=kube_namespace)
    header = kube_env.kubectl("get", "streamjobs", namespace=kube_namespace).stdout.splitlines()[0].split()
    assert header == ["NAME", "STATE", "LIFECYCLE", "PARALLELISM", "LAST-CHECKPOINT", "AGE"]
    job = kube_env.kubectl_json("get", "streamjob", "columns", namespace=kube_namespace)
    assert job["spec"]["upgradeMode"] == "savepoint"  # schema defaults are applied by the API server
    assert job["spec"]["state"] == "running"
    stderr = kube_env.kubectl("get", "savepoints", namespace=kube_namespace).stderr
    assert "No resources found" in stderr

    # -o wide: records per second and how long ago the last checkpoint completed (no operator here:
    # the status is written as the operator would).
    checkpointed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 150))
    status = {
        "job": {"id": "j", "state": "RUNNING", "recordsReadPerSecond": 1234.5},
        "lastCheckpoint": {"id": 7, "path": "s3://b/c/j/chk-7", "time": checkpointed},
    }
    kube_env.kubectl(
        "patch", "streamjob", "columns", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}), namespace=kube_namespace,
    )  # fmt: skip
    wide = kube_env.kubectl("get", "streamjobs", "-o", "wide", namespace=kube_namespace).stdout.splitlines()
    names = wide[0].split()
    starts = [wide[0].index(name) for name in names]  # kubectl leaves a missing value blank: cut by position
    ends = [*starts[1:], None]
    columns = {n: wide[1][a:b].strip() for n, a, b in zip(names, starts, ends, strict=True)}
    assert columns["RECORDS/S"] == "1234.5", wide
    assert columns["CHECKPOINTED"] in ("2m30s", "2m31s", "2m32s", "2m33s"), wide
    assert columns["JOB"] == "RUNNING", wide


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "state: paused\n",
            'Unsupported value: "paused": supported values: "running", "suspended", "finished"',
        ),
        ("checkpoints: {interval: 10 seconds}\n", "must be a duration such as 500ms, 30s, 5m or 1h"),
        ("checkpoints: {storage: bucket/prefix}\n", "must be an absolute path or a URI with a scheme"),
        ("parallelism: 0\n", "should be greater than or equal to 1"),
        ("upgradeMode: hot\n", 'supported values: "stateless", "savepoint", "last-state"'),
    ],
)
def test_schema_rejects_bad_values_with_a_clear_message(
    kube_env: KubeEnv, kube_namespace: str, extra: str, message: str
) -> None:
    with pytest.raises(KubeCommandError) as caught:
        kube_env.kubectl("apply", "-f", "-", input=_job("bad", extra), namespace=kube_namespace)
    assert message in caught.value.stderr


def test_a_savepoint_cannot_be_changed(kube_env: KubeEnv, kube_namespace: str) -> None:
    manifest = "apiVersion: sluice.dev/v1alpha1\nkind: Savepoint\nmetadata: {name: sp}\nspec: {jobName: j}\n"
    kube_env.kubectl("apply", "-f", "-", input=manifest, namespace=kube_namespace)
    with pytest.raises(KubeCommandError) as caught:
        kube_env.kubectl(
            "patch",
            "savepoint",
            "sp",
            "--type",
            "merge",
            "-p",
            '{"spec":{"stop":"suspend"}}',
            namespace=kube_namespace,
        )
    assert "a Savepoint cannot be changed once created" in caught.value.stderr


def test_a_streamjob_gets_its_coordinator_objects(
    kube_env: KubeEnv, kube_namespace: str, operator_process: Any
) -> None:
    """Through a real operator process: its own /metrics count only its own reconciles."""
    operator = operator_process
    kube_env.kubectl("apply", "-f", "-", input=_job("counts"), namespace=kube_namespace)
    job = kube_env.wait_for(
        "streamjob counts",
        lambda o: o.get("status", {}).get("job", {}).get("id") and o["metadata"].get("finalizers"),
        namespace=kube_namespace,
        timeout=60,
    )
    uid = job["metadata"]["uid"]
    assert job["status"]["lifecycleState"] == "Deploying"
    assert "sluice.dev/finalizer" in job["metadata"]["finalizers"]
    pod = kube_env.wait_for("pod counts-coordinator", bool, namespace=kube_namespace, timeout=30)
    annotations = pod["metadata"]["annotations"]
    assert annotations["sluice.dev/job-id"] == job["status"]["job"]["id"]
    assert pod["spec"]["containers"][0]["args"][:2] == ["coordinator", "examples/unbounded_counts.py"]
    assert f"out=file://{operator.storage}/output" in pod["spec"]["containers"][0]["args"]
    for kind, name in [
        ("pod", "counts-coordinator"),
        ("service", "counts-rest"),
        ("configmap", "counts-config"),
        ("serviceaccount", "counts-driver"),
        ("role", "counts-driver"),
        ("rolebinding", "counts-driver"),
    ]:
        obj = kube_env.kubectl_json("get", kind, name, namespace=kube_namespace)
        (ref,) = obj["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == ("StreamJob", "counts", uid, True)
    reasons = {e["reason"] for e in _events(kube_env, kube_namespace, "counts")}
    assert "Deploying" in reasons
    metrics = operator.metrics()
    assert 'sluice_operator_reconciles_total{outcome="ok",resource="streamjob"}' in metrics
    series = f'sluice_operator_streamjobs{{lifecycle="Deploying",namespace="{kube_namespace}"}} 1.0'
    assert series in metrics, [line for line in metrics.splitlines() if "streamjobs" in line]


def test_an_invalid_spec_sets_degraded_with_a_message_and_an_event(
    kube_env: KubeEnv, kube_namespace: str, operator: Any
) -> None:
    extra = "sparkConf: {spark.kubernetes.namespace: elsewhere}\n"
    kube_env.kubectl("apply", "-f", "-", input=_job("broken", extra), namespace=kube_namespace)
    job = kube_env.wait_for("streamjob broken", lambda o: _condition(o, "Degraded"), namespace=kube_namespace)
    degraded = _condition(job, "Degraded")
    assert degraded is not None and degraded["status"] == "True" and degraded["reason"] == "InvalidSpec"
    assert "spark.kubernetes.namespace is set by the operator" in degraded["message"]
    assert job["status"]["error"] == degraded["message"]
    warnings = [e for e in _events(kube_env, kube_namespace, "broken") if e["type"] == "Warning"]
    assert any("spark.kubernetes.namespace" in e["message"] for e in warnings)
    pods = kube_env.kubectl_json("get", "pods", namespace=kube_namespace)["items"]
    assert pods == []
    assert operator.running()


@pytest.mark.parametrize("operator", [{"SLUICE_OPERATOR_STORAGE": None}], indirect=True)
def test_without_a_storage_root_a_job_without_its_own_directories_is_degraded_until_it_names_them(
    kube_env: KubeEnv, kube_namespace: str, operator: Any, tmp_path: Any
) -> None:
    kube_env.kubectl("apply", "-f", "-", input=_job("nowhere"), namespace=kube_namespace)
    job = kube_env.wait_for(
        "streamjob nowhere", lambda o: _condition(o, "Degraded"), namespace=kube_namespace
    )
    degraded = _condition(job, "Degraded")
    assert degraded is not None and degraded["status"] == "True" and degraded["reason"] == "NoStorage"
    message = degraded["message"]
    for named in ("spec.checkpoints.storage", "spec.savepoints.targetDirectory", "$(SLUICE_STORAGE)"):
        assert named in message, message
    assert "operator.storage" in message and "SLUICE_OPERATOR_STORAGE" in message
    assert any(
        "no storage for this job" in e["message"] for e in _events(kube_env, kube_namespace, "nowhere")
    )
    assert kube_env.kubectl_json("get", "pods", namespace=kube_namespace)["items"] == []

    # The fix the message names: the job's own directories, and no $(SLUICE_STORAGE).
    fixed = _job("nowhere").replace('"$(SLUICE_STORAGE)/output"', f'"file://{tmp_path}/output"') + (
        f"  checkpoints: {{storage: 'file://{tmp_path}/chk'}}\n"
        f"  savepoints: {{targetDirectory: 'file://{tmp_path}/sp'}}\n"
    )
    kube_env.kubectl("apply", "-f", "-", input=fixed, namespace=kube_namespace)
    kube_env.wait_for("pod nowhere-coordinator", bool, namespace=kube_namespace)
    kube_env.wait_for(
        "streamjob nowhere",
        lambda o: (_condition(o, "Degraded") or {}).get("status") != "True",
        namespace=kube_namespace,
    )


# A node selector no node has keeps the coordinator Pending, so the job never starts whether or not a
# process kubelet runs in this session (it is session-wide once a test asked for it): with one, the pod
# ran, the suspend became a stop-with-savepoint of a starting job, and it outlasted the wait under load.
_NEVER_SCHEDULED = "coordinator: {podTemplate: {spec: {nodeSelector: {sluice.dev/test-node: none}}}}"


def test_suspending_a_job_that_never_started_removes_its_pod(
    kube_env: KubeEnv, kube_namespace: str, operator: Any
) -> None:
    kube_env.kubectl("apply", "-f", "-", input=_job("idle", _NEVER_SCHEDULED), namespace=kube_namespace)
    kube_env.wait_for("pod idle-coordinator", bool, namespace=kube_namespace, timeout=60)
    kube_env.kubectl(
        "patch",
        "streamjob",
        "idle",
        "--type",
        "merge",
        "-p",
        '{"spec":{"state":"suspended"}}',
        namespace=kube_namespace,
    )
    job = kube_env.wait_for(
        "streamjob idle",
        lambda o: o.get("status", {}).get("lifecycleState") == "Suspended",
        namespace=kube_namespace,
        timeout=60,
    )
    assert _condition(job, "Ready")["status"] == "True"  # type: ignore[index]
    assert "startTime" not in (job["status"].get("job") or {}), "the job was meant never to start"
    pods = kube_env.wait_for("pods", lambda o: not o["items"], namespace=kube_namespace, timeout=60)
    assert pods["items"] == []


def test_deleting_a_streamjob_removes_the_finalizer_and_what_it_owned(
    kube_env: KubeEnv, kube_namespace: str, operator: Any
) -> None:
    kube_env.kubectl("apply", "-f", "-", input=_job("doomed"), namespace=kube_namespace)
    kube_env.wait_for("pod doomed-coordinator", bool, namespace=kube_namespace, timeout=60)
    kube_env.kubectl("delete", "streamjob", "doomed", "--timeout=60s", namespace=kube_namespace, timeout=90)
    gone = kube_env.kubectl("get", "streamjob", "doomed", namespace=kube_namespace, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
    for kind in ("pods", "services", "configmaps", "roles", "rolebindings"):

        def owned(o: dict[str, Any]) -> bool:
            return not [
                i for i in o["items"] if i["metadata"].get("labels", {}).get("sluice.dev/job") == "doomed"
            ]

        kube_env.wait_for(kind, owned, namespace=kube_namespace, timeout=60)


def test_a_savepoint_for_a_missing_job_fails_clearly(
    kube_env: KubeEnv, kube_namespace: str, operator: Any
) -> None:
    manifest = (
        "apiVersion: sluice.dev/v1alpha1\nkind: Savepoint\nmetadata: {name: orphan}\nspec: {jobName: nope}\n"
    )
    kube_env.kubectl("apply", "-f", "-", input=manifest, namespace=kube_namespace)
    sp = kube_env.wait_for(
        "savepoint orphan",
        lambda o: o.get("status", {}).get("state") == "Failed",
        namespace=kube_namespace,
        timeout=60,
    )
    assert sp["status"]["error"].startswith(f"StreamJob 'nope' not found in namespace '{kube_namespace}'")
    printed = kube_env.kubectl("get", "savepoint", "orphan", namespace=kube_namespace).stdout
    assert "Failed" in printed and "nope" in printed
    assert any(e["type"] == "Warning" for e in _events(kube_env, kube_namespace, "orphan"))


def test_a_savepoint_of_a_suspended_job_fails_clearly(
    kube_env: KubeEnv, kube_namespace: str, operator: Any
) -> None:
    kube_env.kubectl(
        "apply", "-f", "-", input=_job("resting", "state: suspended\n"), namespace=kube_namespace
    )
    kube_env.wait_for(
        "streamjob resting",
        lambda o: o.get("status", {}).get("lifecycleState") == "Suspended",
        namespace=kube_namespace,
        timeout=60,
    )
    manifest = (
        "apiVersion: sluice.dev/v1alpha1\nkind: Savepoint\nmetadata: {name: sp}\nspec: {jobName: resting}\n"
    )
    kube_env.kubectl("apply", "-f", "-", input=manifest, namespace=kube_namespace)
    sp = kube_env.wait_for(
        "savepoint sp",
        lambda o: o.get("status", {}).get("state") == "Failed",
        namespace=kube_namespace,
        timeout=60,
    )
    assert "is not running (lifecycle Suspended)" in sp["status"]["error"]


def test_a_coordinator_that_rejects_its_pipeline_fails_the_job(
    kube_env: KubeEnv, kube_namespace: str, operator: Any, process_kubelet: Any
) -> None:
    """The coordinator really runs (process kubelet, docker/entrypoint.sh) and exits with a usage error."""
    manifest = _job("typo").replace("examples/unbounded_counts.py", "examples/no_such_pipeline.py")
    kube_env.kubectl("apply", "-f", "-", input=manifest, namespace=kube_namespace)
    job = kube_env.wait_for(
        "streamjob typo",
        lambda o: o.get("status", {}).get("lifecycleState") == "Failed",
        namespace=kube_namespace,
        timeout=120,
    )
    assert "rejected its pipeline or arguments" in job["status"]["error"]
    assert _condition(job, "Degraded")["status"] == "True"  # type: ignore[index]
    pod = kube_env.kubectl_json("get", "pod", "typo-coordinator", namespace=kube_namespace)
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 2  # kept for its log, not restarted in a loop
    assert pod["status"]["containerStatuses"][0].get("restartCount", 0) == 0

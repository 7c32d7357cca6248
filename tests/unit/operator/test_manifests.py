"""Builders turn a spec into the manifests the operator applies; no cluster needed."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from sluice_operator import manifests as m
from sluice_operator.models import SavepointKind, StopMode

from ._fixtures import OWNER, run, spec


def _flags(args: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for index, arg in enumerate(args):
        if arg.startswith("--"):
            value = args[index + 1] if index + 1 < len(args) and not args[index + 1].startswith("--") else ""
            found.setdefault(arg, []).append(value)
    return found


def _owned(manifest: dict[str, Any]) -> None:
    (ref,) = manifest["metadata"]["ownerReferences"]
    assert ref == {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "StreamJob",
        "name": "counts",
        "uid": OWNER.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_sluice_run_args_follow_the_cli_contract() -> None:
    args = m.sluice_run_args(run())
    assert args[0] == "examples/unbounded_counts.py"
    flags = _flags(args)
    assert flags["--arg"] == ["out=s3://bucket/sluice/out/counts"]
    assert flags["--job-id"] == ["a" * 32]
    assert flags["--parallelism"] == ["4"]
    assert flags["--taskmanagers"] == ["2"]
    assert flags["--checkpoint-dir"] == ["s3://bucket/sluice/checkpoints/jobs/counts"]
    assert flags["--savepoint-dir"] == ["s3://bucket/sluice/savepoints/jobs/counts"]
    assert flags["--checkpoint-interval"] == ["10s"]
    assert flags["--rest-port"] == ["8081"]
    assert flags["--rest-host"] == ["0.0.0.0"]
    # The Service's names, as the operator's own URL (dashboard_url) uses them.
    assert flags["--rest-allowed-host"] == [
        "counts-rest",
        "counts-rest.jobs",
        "counts-rest.jobs.svc",
        "counts-rest.jobs.svc.cluster.local",
    ]
    assert m.dashboard_url(OWNER).split("//")[1].split(":")[0] in flags["--rest-allowed-host"]
    assert flags["--host"] == ["spark"]
    assert flags["--master"] == ["k8s://https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"]
    assert "--from-savepoint" not in flags
    assert "--allow-non-restored-state" not in flags
    assert "--no-checkpoints-after-tasks-finish" not in flags
    conf = dict(value.split("=", 1) for value in flags["--spark-conf"])
    assert conf["spark.kubernetes.namespace"] == "jobs"
    assert conf["spark.kubernetes.driver.pod.name"] == "$(POD_NAME)"
    assert conf["spark.driver.host"] == "$(POD_IP)"
    assert conf["spark.kubernetes.executor.podNamePrefix"] == "counts-taskmanager"
    assert conf["spark.kubernetes.executor.podTemplateFile"] == "/etc/sluice/taskmanager-pod.yaml"
    assert conf["spark.kubernetes.container.image"] == "sluice:dev"
    assert conf["spark.executor.instances"] == "2"


def test_restore_and_finishing_flags() -> None:
    args = m.sluice_run_args(
        run(
            restore_from="s3://b/sp/savepoint-aaaa-3",
            allowNonRestoredState=True,
            checkpoints={"afterTasksFinish": False},
        )
    )
    flags = _flags(args)
    assert flags["--from-savepoint"] == ["s3://b/sp/savepoint-aaaa-3"]
    assert "--allow-non-restored-state" in flags
    assert "--no-checkpoints-after-tasks-finish" in flags


def test_allow_non_restored_state_needs_a_restore_point() -> None:
    assert "--allow-non-restored-state" not in m.sluice_run_args(run(allowNonRestoredState=True))


def test_user_spark_conf_cannot_override_operator_keys_but_adds_others() -> None:
    conf = m.spark_conf(
        run(sparkConf={"spark.kubernetes.namespace": "other", "spark.sql.shuffle.partitions": "8"})
    )
    assert conf["spark.kubernetes.namespace"] == "jobs"
    assert conf["spark.sql.shuffle.partitions"] == "8"


def test_executor_resources_size_the_spark_executor() -> None:
    conf = m.executor_resources(
        spec(
            taskManagers={"resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "2Gi", "cpu": 2}}}
        ).task_managers.resources
    )
    assert conf["spark.executor.cores"] == "1"
    assert conf["spark.kubernetes.executor.request.cores"] == "500m"
    assert conf["spark.kubernetes.executor.limit.cores"] == "2"
    # A small JVM heap; the Python TaskManager lives in Spark's overhead; the pod is exactly 2Gi.
    assert conf["spark.executor.memory"] == "512m"
    assert conf["spark.executor.memoryOverhead"] == "1536m"


def test_small_taskmanager_pods_get_a_smaller_executor_heap() -> None:
    resources = spec(taskManagers={"resources": {"requests": {"memory": "768Mi"}}}).task_managers.resources
    conf = m.executor_resources(resources)
    assert (conf["spark.executor.memory"], conf["spark.executor.memoryOverhead"]) == ("256m", "512m")


def test_too_little_taskmanager_memory_is_explained() -> None:
    resources = spec(taskManagers={"resources": {"limits": {"memory": "500Mi"}}}).task_managers.resources
    with pytest.raises(ValueError, match="at least 512Mi"):
        m.executor_resources(resources)


def test_coordinator_pod() -> None:
    pod = m.coordinator_pod(run(restore_from="s3://b/chk-3"))
    _owned(pod)
    assert pod["metadata"]["name"] == "counts-coordinator"
    assert pod["metadata"]["labels"]["sluice.dev/job"] == "counts"
    assert pod["metadata"]["labels"]["sluice.dev/role"] == "coordinator"
    assert pod["metadata"]["annotations"]["sluice.dev/job-id"] == "a" * 32
    assert pod["metadata"]["annotations"]["sluice.dev/restored-from"] == "s3://b/chk-3"
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["serviceAccountName"] == "counts-driver"
    (container,) = pod["spec"]["containers"]
    assert container["args"][:2] == ["coordinator", "examples/unbounded_counts.py"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["SLUICE_STORAGE"]["value"] == "s3://bucket/sluice"
    assert env["AWS_ENDPOINT_URL"]["value"] == "http://127.0.0.1:5000"
    assert {"name": "sluice-config", "configMap": {"name": "counts-config"}} in pod["spec"]["volumes"]
    assert container["volumeMounts"][0]["mountPath"] == "/etc/sluice"


def test_user_pod_template_is_kept_under_the_generated_pod() -> None:
    template = {
        "metadata": {"labels": {"team": "data", "sluice.dev/job": "spoofed"}},
        "spec": {
            "nodeSelector": {"pool": "streaming"},
            "containers": [
                {"name": "coordinator", "env": [{"name": "EXTRA", "value": "1"}], "image": "ignored"},
                {"name": "sidecar", "image": "busybox"},
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        },
    }
    pod = m.coordinator_pod(run(coordinator={"podTemplate": template}))
    assert pod["metadata"]["labels"]["team"] == "data"
    assert pod["metadata"]["labels"]["sluice.dev/job"] == "counts"
    assert pod["spec"]["nodeSelector"] == {"pool": "streaming"}
    names = [c["name"] for c in pod["spec"]["containers"]]
    assert names == ["coordinator", "sidecar"]
    main = pod["spec"]["containers"][0]
    assert main["image"] == "sluice:dev"
    assert {"name": "EXTRA", "value": "1"} in main["env"]
    assert [v["name"] for v in pod["spec"]["volumes"]][:2] == ["scratch", "sluice-config"]


def test_config_map_holds_the_taskmanager_template() -> None:
    cm = m.config_map(run(storageSecret="s3-creds"))
    _owned(cm)
    template = yaml.safe_load(cm["data"]["taskmanager-pod.yaml"])
    assert template["metadata"]["labels"]["sluice.dev/job"] == "counts"
    assert template["metadata"]["labels"]["sluice.dev/role"] == "taskmanager"
    (container,) = template["spec"]["containers"]
    assert container["name"] == "taskmanager"
    assert container["envFrom"] == [{"secretRef": {"name": "s3-creds", "optional": False}}]


def test_rest_service_selects_the_coordinator() -> None:
    svc = m.rest_service(run())
    _owned(svc)
    assert svc["spec"]["selector"] == {"sluice.dev/job": "counts", "sluice.dev/role": "coordinator"}
    assert svc["spec"]["ports"][0]["port"] == 8081


def test_driver_rbac_allows_what_spark_needs() -> None:
    for manifest in (m.driver_service_account(OWNER), m.driver_role(OWNER), m.driver_role_binding(OWNER)):
        _owned(manifest)
        assert manifest["metadata"]["name"] == "counts-driver"
    (rule,) = m.driver_role(OWNER)["rules"]
    assert set(rule["resources"]) == {"pods", "services", "configmaps", "persistentvolumeclaims"}
    assert {"create", "delete", "watch", "list"} <= set(rule["verbs"])
    binding = m.driver_role_binding(OWNER)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "counts-driver", "namespace": "jobs"}]


def test_spec_hash_ignores_state_and_savepoint_policy_but_not_restart_nonce() -> None:
    base = m.spec_hash(spec())
    assert m.spec_hash(spec(state="suspended", savepoints={"historyMaxCount": 2})) == base
    assert m.spec_hash(spec(restartNonce=1)) != base
    assert m.spec_hash(spec(parallelism=8)) != base


def test_operator_savepoint_object() -> None:
    sp = m.operator_savepoint(
        OWNER, kind=SavepointKind.SUSPEND, stop=StopMode.SUSPEND, stamp=7, dispose_on_delete=False
    )
    _owned(sp)
    assert sp["metadata"]["name"] == "counts-suspend-7"
    assert sp["metadata"]["labels"]["sluice.dev/trigger"] == "suspend"
    assert sp["spec"] == {"jobName": "counts", "stop": "suspend", "disposeOnDelete": False}
    assert "sluice.dev/job-generation" not in sp["metadata"]["labels"]


def test_a_stop_savepoint_names_its_generation_and_a_deletion_savepoint_outlives_the_job() -> None:
    stop = m.operator_savepoint(
        OWNER,
        kind=SavepointKind.SUSPEND,
        stop=StopMode.SUSPEND,
        stamp=7,
        dispose_on_delete=False,
        generation=7,
    )
    assert stop["metadata"]["labels"]["sluice.dev/job-generation"] == "7"
    _owned(stop)
    kept = m.operator_savepoint(
        OWNER,
        kind=SavepointKind.DELETION,
        stop=StopMode.SUSPEND,
        stamp=9,
        dispose_on_delete=False,
        owned=False,
    )
    assert "ownerReferences" not in kept["metadata"]
    assert kept["metadata"]["labels"]["sluice.dev/trigger"] == "deletion"


def test_default_storage_secret_is_optional() -> None:
    from sluice_operator.manifests import Run
    from sluice_operator.models import OperatorConfig

    r = Run(owner=OWNER, spec=spec(), config=OperatorConfig(storage_secret="creds"), job_id="b" * 32)
    assert r.env_from() == [{"secretRef": {"name": "creds", "optional": True}}]

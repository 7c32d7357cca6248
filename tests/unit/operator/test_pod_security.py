"""Job pods meet the `restricted` Pod Security Standard and write only to emptyDirs."""

from __future__ import annotations

from typing import Any

import yaml

from sluice_operator import manifests as m

from ._fixtures import run

_RESTRICTED_VOLUMES = {"configMap", "secret", "emptyDir", "projected", "downwardAPI", "persistentVolumeClaim"}


def _taskmanager(**overrides: Any) -> dict[str, Any]:
    return dict(yaml.safe_load(m.config_map(run(**overrides))["data"]["taskmanager-pod.yaml"]))


def _assert_restricted(pod: dict[str, Any]) -> None:
    """The checks of the `restricted` profile that the pod itself decides (pod-security.kubernetes.io)."""
    spec = pod["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not any(spec.get(key) for key in ("hostNetwork", "hostPID", "hostIPC"))
    for volume in spec.get("volumes", []):
        assert set(volume) - {"name"} <= _RESTRICTED_VOLUMES, volume
    for container in spec["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["readOnlyRootFilesystem"] is True
        assert not context.get("privileged")


def _mounts(pod: dict[str, Any]) -> dict[str, str]:
    (container,) = pod["spec"]["containers"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    return {
        mount["mountPath"]: next(iter(set(volumes[mount["name"]]) - {"name"}))
        for mount in container["volumeMounts"]
    }


def test_coordinator_pod_is_restricted_and_writes_to_empty_dirs() -> None:
    pod = m.coordinator_pod(run())
    _assert_restricted(pod)
    mounts = _mounts(pod)
    assert mounts["/tmp"] == mounts["/home/sluice"] == mounts["/var/data/spark-local"] == "emptyDir"


def test_taskmanager_template_is_restricted_and_writes_to_empty_dirs() -> None:
    template = _taskmanager()
    _assert_restricted(template)
    mounts = _mounts(template)
    assert mounts["/tmp"] == mounts["/home/sluice"] == "emptyDir"


def test_spark_local_dirs_are_an_empty_dir_in_every_pod() -> None:
    args = m.sluice_run_args(run())
    assert "spark.local.dir=/var/data/spark-local" in args  # Spark mounts an emptyDir there in executors
    assert "spark.local.dir=/scratch" in m.sluice_run_args(run(sparkConf={"spark.local.dir": "/scratch"}))


def test_users_add_to_the_security_contexts_and_their_fields_win() -> None:
    template = {
        "spec": {
            "securityContext": {"fsGroup": 2000, "runAsUser": 1001},
            "containers": [{"name": "coordinator", "securityContext": {"readOnlyRootFilesystem": False}}],
        }
    }
    pod = m.coordinator_pod(run(coordinator={"podTemplate": template}))
    assert pod["spec"]["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        "fsGroup": 2000,
        "runAsUser": 1001,
    }
    context = pod["spec"]["containers"][0]["securityContext"]
    assert context["readOnlyRootFilesystem"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}


def test_user_volumes_come_with_the_operators() -> None:
    template = {"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]}}
    names = [v["name"] for v in _taskmanager(taskManagers={"podTemplate": template})["spec"]["volumes"]]
    assert names == ["scratch", "sluice-spark-secret", "sluice-tmp", "sluice-home"]

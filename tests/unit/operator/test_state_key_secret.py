"""The namespace's state key: drawn once, owned by no job, mounted into coordinators only; trustSavepoint
is passed through only with a restore."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml

from sluice_operator import manifests as m
from sluice_operator.services.act.auth import JobSecretError, ensure_state_key

from ._fixtures import run


class FakeKube:
    """The two Secret calls of `Kube` that the state key needs, on a dict; a Secret is never replaced."""

    def __init__(self) -> None:
        self.secrets: dict[str, tuple[list[str], dict[str, str]]] = {}
        self.created: list[dict[str, Any]] = []

    async def secret(self, namespace: str, name: str) -> tuple[list[str], dict[str, str]] | None:
        return self.secrets.get(f"{namespace}/{name}")

    async def create(self, manifest: dict[str, Any]) -> None:
        self.created.append(manifest)
        meta = manifest["metadata"]
        owners = [ref["uid"] for ref in meta.get("ownerReferences", [])]
        self.secrets.setdefault(f"{meta['namespace']}/{meta['name']}", (owners, dict(manifest["stringData"])))


def test_the_state_key_is_drawn_once_per_namespace_and_owned_by_no_job() -> None:
    kube = FakeKube()
    asyncio.run(ensure_state_key(kube, "jobs"))  # type: ignore[arg-type]
    asyncio.run(ensure_state_key(kube, "jobs"))  # type: ignore[arg-type]
    asyncio.run(ensure_state_key(kube, "other"))  # type: ignore[arg-type]
    assert len(kube.created) == 2
    owners, data = kube.secrets["jobs/sluice-state-key"]
    assert owners == [] and "ownerReferences" not in kube.created[0]["metadata"]
    assert len(bytes.fromhex(data["state-key"])) == 32
    assert kube.secrets["other/sluice-state-key"][1] != data


@pytest.mark.parametrize("value", ["", "short", "zz" * 32])
def test_an_unusable_state_key_is_refused_not_replaced(value: str) -> None:
    kube = FakeKube()
    kube.secrets["jobs/sluice-state-key"] = ([], {"state-key": value})
    with pytest.raises(JobSecretError, match="64 hexadecimal digits"):
        asyncio.run(ensure_state_key(kube, "jobs"))  # type: ignore[arg-type]
    assert kube.created == []


def test_only_the_coordinator_mounts_the_state_key_read_only() -> None:
    pod = m.coordinator_pod(run())
    (container,) = pod["spec"]["containers"]
    args = container["args"]
    assert args[args.index("--state-key-file") + 1] == "/var/run/sluice/state/key"
    mounts = {v["mountPath"]: v for v in container["volumeMounts"]}
    assert mounts["/var/run/sluice/state"]["readOnly"] is True
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    secret = volumes[mounts["/var/run/sluice/state"]["name"]]["secret"]
    assert secret["secretName"] == "sluice-state-key"
    assert secret["items"] == [{"key": "state-key", "path": "key"}]
    template = yaml.safe_load(m.config_map(run())["data"]["taskmanager-pod.yaml"])
    names = [v["secret"]["secretName"] for v in template["spec"]["volumes"] if "secret" in v]
    assert "sluice-state-key" not in names, "TaskManagers run user code: they never hold the key"


def test_trust_savepoint_is_passed_only_with_a_restore() -> None:
    restored = m.sluice_run_args(run(restore_from="s3://b/sp/savepoint-x-3", trustSavepoint=True))
    assert restored[restored.index("--from-savepoint") + 1] == "s3://b/sp/savepoint-x-3"
    assert "--trust-savepoint" in restored
    assert "--trust-savepoint" not in m.sluice_run_args(run(trustSavepoint=True))
    assert "--trust-savepoint" not in m.sluice_run_args(run(restore_from="s3://b/sp/savepoint-x-3"))

"""The job's Secret: drawn once, owned by the job, mounted only where needed, sent as a bearer token."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from sluice_contract.states import StopMode
from sluice_operator import manifests as m
from sluice_operator.services.act.auth import JobSecretError, ensure_job_secret
from sluice_operator.services.clients.rest import Coordinator
from sluice_operator.services.observe.auth import rest_token

from ._fixtures import OWNER, run


def _flags(args: list[str]) -> dict[str, str]:
    return {a: args[i + 1] for i, a in enumerate(args[:-1]) if a.startswith("--") and a != "--spark-conf"}


def _spark_conf(args: list[str]) -> dict[str, str]:
    values = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--spark-conf"]
    return dict(v.split("=", 1) for v in values)


def test_secret_is_owned_by_the_job_and_holds_both_values() -> None:
    secret = m.job_secret(OWNER, "rest-value", "spark-value")
    assert secret["metadata"]["name"] == "counts-auth"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == OWNER.uid
    assert secret["stringData"] == {"rest-token": "rest-value", "spark-secret": "spark-value"}


def test_coordinator_reads_the_token_from_a_read_only_mount_and_protects_every_call() -> None:
    pod = m.coordinator_pod(run())
    (container,) = pod["spec"]["containers"]
    flags = _flags(container["args"])
    assert flags["--rest-token-file"] == "/var/run/sluice/rest/token"
    assert flags["--rest-auth"] == "all"
    mounts = {v["mountPath"]: v for v in container["volumeMounts"]}
    assert mounts["/var/run/sluice/rest"]["readOnly"] is True
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    token_volume = volumes[mounts["/var/run/sluice/rest"]["name"]]["secret"]
    assert token_volume["secretName"] == "counts-auth"
    assert token_volume["items"] == [{"key": "rest-token", "path": "token"}]
    assert not any(e["name"] == "SLUICE_REST_TOKEN" for e in container["env"]), "a file, not an env value"


def test_spark_authenticates_with_the_secret_file_and_no_env_value() -> None:
    conf = _spark_conf(m.sluice_run_args(run()))
    assert conf["spark.authenticate"] == "true"
    for key in ("file", "driver.file", "executor.file"):
        assert conf[f"spark.authenticate.secret.{key}"] == "/var/run/sluice/spark/secret"
    assert "spark.authenticate.secret" not in conf
    # TaskManagers get Spark's secret only, as a file: not the REST token, not an env value.
    template = yaml.safe_load(m.config_map(run())["data"]["taskmanager-pod.yaml"])
    (container,) = template["spec"]["containers"]
    secret_volumes = [v["secret"] for v in template["spec"]["volumes"] if "secret" in v]
    assert secret_volumes == [
        {
            "secretName": "counts-auth",
            "items": [{"key": "spark-secret", "path": "secret"}],
            "defaultMode": 0o444,
        }
    ]
    assert {
        "name": "sluice-spark-secret",
        "mountPath": "/var/run/sluice/spark",
        "readOnly": True,
    } in container["volumeMounts"]
    assert not any(e["name"] == "SPARK_AUTHENTICATE_SECRET" for e in container["env"])


def test_network_encryption_is_the_users_choice() -> None:
    conf = _spark_conf(m.sluice_run_args(run(sparkConf={"spark.network.crypto.enabled": "true"})))
    assert conf["spark.network.crypto.enabled"] == "true"


class FakeKube:
    """The two Secret calls of `Kube` that the job's Secret needs, on a dict."""

    def __init__(self) -> None:
        self.secrets: dict[str, tuple[list[str], dict[str, str]]] = {}
        self.creates = 0

    async def secret(self, namespace: str, name: str) -> tuple[list[str], dict[str, str]] | None:
        return self.secrets.get(f"{namespace}/{name}")

    async def create(self, manifest: dict[str, Any]) -> None:
        self.creates += 1
        meta = manifest["metadata"]
        owners = [ref["uid"] for ref in meta["ownerReferences"]]
        self.secrets.setdefault(f"{meta['namespace']}/{meta['name']}", (owners, dict(manifest["stringData"])))


def test_the_secret_is_drawn_once_and_kept() -> None:
    kube = FakeKube()
    first = asyncio.run(ensure_job_secret(kube, OWNER))  # type: ignore[arg-type]
    again = asyncio.run(ensure_job_secret(kube, OWNER))  # type: ignore[arg-type]
    assert first == again and len(first) >= 43  # 32 random bytes, URL-safe base64
    assert kube.creates == 1
    _, data = kube.secrets["jobs/counts-auth"]
    assert data["spark-secret"] != first
    assert asyncio.run(rest_token(kube, OWNER)) == first  # type: ignore[arg-type]


def test_a_secret_of_someone_else_is_not_used() -> None:
    kube = FakeKube()
    kube.secrets["jobs/counts-auth"] = (["other-uid"], {"rest-token": "t", "spark-secret": "s"})
    with pytest.raises(JobSecretError, match="does not belong to StreamJob counts"):
        asyncio.run(ensure_job_secret(kube, OWNER))  # type: ignore[arg-type]


def test_no_secret_means_no_token() -> None:
    assert asyncio.run(rest_token(FakeKube(), OWNER)) is None  # type: ignore[arg-type]


async def _calls_with(token: str | None) -> list[str | None]:
    seen: list[str | None] = []

    async def job(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.json_response({"jobId": "j", "state": "RUNNING"})

    async def savepoints(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.json_response({"triggerId": "t1"})

    app = web.Application()
    app.router.add_get("/v1/job", job)
    app.router.add_post("/v1/savepoints", savepoints)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as http:
            client = Coordinator(http, "127.0.0.1", port, token=token)
            await client.job()
            assert await client.trigger_savepoint(StopMode.SUSPEND, "file:///sp") == "t1"
            assert token is None or token not in repr(client)
    finally:
        await runner.cleanup()
    return seen


def test_every_rest_call_carries_the_bearer_token() -> None:
    assert asyncio.run(_calls_with("s3cr3t")) == ["Bearer s3cr3t", "Bearer s3cr3t"]
    assert asyncio.run(_calls_with(None)) == [None, None]

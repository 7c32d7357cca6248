"""The REST token check in front of the handlers, on a real aiohttp server: who gets through, who gets
401 (with the challenge) or 403, and when `sluice run` protects reads as well."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from sluice._runner import UsageError, rest_settings
from sluice.cli import parser
from sluice.coordinator._rest_auth import RestAuth, auth_middleware, is_loopback
from sluice.coordinator.jobmaster import JobConfig

TOKEN = "the-token"


def _serve(protect_reads: bool, calls: list[str]) -> web.Application:
    async def handler(request: web.Request) -> web.Response:
        calls.append(f"{request.method} {request.path}")
        return web.json_response({"ok": True})

    app = web.Application(middlewares=[auth_middleware(RestAuth(TOKEN, protect_reads))])
    app.add_routes(
        [web.get("/v1/health", handler), web.get("/v1/job", handler), web.post("/v1/job/cancel", handler)]
    )
    return app


def _with_client(
    protect_reads: bool, scenario: Callable[[TestClient[Any, Any]], Awaitable[None]]
) -> list[str]:
    calls: list[str] = []

    async def run() -> None:
        async with TestClient(TestServer(_serve(protect_reads, calls), host="127.0.0.1")) as client:
            await scenario(client)

    asyncio.run(run())
    return calls


def test_a_mutation_without_a_token_gets_401_with_the_challenge_and_reaches_no_handler() -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        for headers in (
            {},
            {"Authorization": TOKEN},
            {"Authorization": f"Basic {TOKEN}"},
            {"Authorization": "Bearer "},
        ):
            answer = await client.post("/v1/job/cancel", headers=headers)
            assert answer.status == 401, headers
            assert answer.headers["WWW-Authenticate"].startswith("Bearer")
            assert "Bearer" in (await answer.json())["error"]

    assert _with_client(False, scenario) == []


def test_a_wrong_token_gets_403_and_reaches_no_handler() -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        for presented in ("nope", TOKEN + "x", TOKEN[:-1], "tökén"):
            answer = await client.post("/v1/job/cancel", headers={"Authorization": f"Bearer {presented}"})
            assert answer.status == 403, presented

    assert _with_client(False, scenario) == []


def test_the_right_token_gets_through_whatever_the_case_of_the_scheme() -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        for scheme in ("Bearer", "bearer"):
            answer = await client.post("/v1/job/cancel", headers={"Authorization": f"{scheme} {TOKEN}"})
            assert answer.status == 200

    assert _with_client(False, scenario) == ["POST /v1/job/cancel"] * 2


def test_reads_are_open_unless_protected_and_health_is_always_open() -> None:
    async def open_reads(client: TestClient[Any, Any]) -> None:
        assert (await client.get("/v1/job")).status == 200
        assert (await client.head("/v1/job")).status == 200

    async def protected_reads(client: TestClient[Any, Any]) -> None:
        assert (await client.get("/v1/job")).status == 401
        assert (await client.head("/v1/job")).status == 401
        assert (await client.get("/v1/job", headers={"Authorization": "Bearer x"})).status == 403
        assert (await client.get("/v1/job", headers={"Authorization": f"Bearer {TOKEN}"})).status == 200
        assert (await client.get("/v1/health")).status == 200  # the kubelet's probe has no token
        assert (await client.post("/v1/health")).status == 401  # open to reads only

    assert _with_client(False, open_reads) == ["GET /v1/job", "HEAD /v1/job"]
    assert _with_client(True, protected_reads) == ["GET /v1/job", "GET /v1/health"]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("", False),
        ("10.1.2.3", False),
        ("::", False),
        ("coordinator.svc", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def _settings(*argv: str) -> Any:
    args = parser().parse_args(["run", "p.py", *argv])
    return rest_settings(args, JobConfig(checkpoint_dir="/data/chk", job_id="j", savepoint_dir="/data/sp"))


@pytest.mark.parametrize(
    ("argv", "protect_reads"),
    [
        ((), False),
        (("--rest-host", "0.0.0.0"), True),  # reachable from the network: reads need the token too
        (("--rest-host", "0.0.0.0", "--rest-auth", "mutations"), False),
        (("--rest-auth", "all"), True),
    ],
)
def test_which_requests_sluice_run_protects(
    argv: tuple[str, ...], protect_reads: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLUICE_REST_TOKEN", raising=False)
    assert _settings(*argv).auth.protect_reads is protect_reads


def test_where_sluice_run_takes_its_token_from(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLUICE_REST_TOKEN", raising=False)
    made = _settings()
    assert made.store_token and len(made.auth.token) >= 40
    monkeypatch.setenv("SLUICE_REST_TOKEN", "from-env")
    from_env = _settings()
    assert (from_env.auth.token, from_env.store_token) == ("from-env", False)
    (tmp_path / "token").write_text("from-file\n")
    from_file = _settings("--rest-token-file", str(tmp_path / "token"))
    assert (from_file.auth.token, from_file.store_token) == ("from-file", False), "the file wins"
    with pytest.raises(UsageError, match="cannot read the REST token file"):
        _settings("--rest-token-file", str(tmp_path / "missing"))
    monkeypatch.setenv("SLUICE_REST_TOKEN", "has space")
    with pytest.raises(UsageError, match="SLUICE_REST_TOKEN"):
        _settings()


def test_savepoints_may_go_to_the_jobs_own_directories_and_the_allowed_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SLUICE_REST_TOKEN", raising=False)
    settings = _settings("--savepoint-dir-allow", "s3://b/sp", "--savepoint-dir-allow", "/more/")
    assert settings.targets.prefixes == ["file:///data/chk", "file:///data/sp", "file:///more", "s3://b/sp"]

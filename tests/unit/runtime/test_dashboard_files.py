"""The coordinator serves the dashboard's static files, only those, with safe headers, in every auth
mode; GET /metrics is a read like GET /v1/job (open unless reads are protected)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from sluice.coordinator._rest_auth import RestAuth
from sluice.coordinator._rest_input import SavepointTargets
from sluice.coordinator.dashboard import CONTENT_SECURITY_POLICY
from sluice.coordinator.rest import RestApi

TOKEN = "the-token"


def _with_client(protect_reads: bool, scenario: Callable[[TestClient[Any, Any]], Awaitable[None]]) -> None:
    # No job behind the API: every request here is answered by the static routes or refused before a
    # handler could read one.
    api = RestApi(None, RestAuth(TOKEN, protect_reads), SavepointTargets([]))  # type: ignore[arg-type]

    async def run() -> None:
        async with TestClient(TestServer(api.app, host="127.0.0.1")) as client:
            await scenario(client)

    asyncio.run(run())


def test_the_page_and_its_files_are_served_with_their_types_and_a_strict_policy_without_a_token() -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        for path, content_type, marker in (
            ("/", "text/html", b"<title>"),
            ("/dashboard/index.html", "text/html", b"<title>"),
            ("/dashboard/app.js", "text/javascript", b"TOKEN_KEY"),
            ("/dashboard/style.css", "text/css", b".subtask"),
        ):
            answer = await client.get(path)
            assert answer.status == 200, path
            assert answer.headers["Content-Type"].startswith(content_type), path
            assert answer.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
            assert answer.headers["X-Content-Type-Options"] == "nosniff"
            assert marker in await answer.read()
        assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
        assert "default-src 'none'" in CONTENT_SECURITY_POLICY

    _with_client(True, scenario)


def test_nothing_but_the_named_files_is_reachable() -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        for path in (
            "/dashboard/",
            "/dashboard/__init__.py",
            "/dashboard/../rest.py",
            "/dashboard/%2e%2e/rest.py",
            "/dashboard/..%2f..%2f..%2fpyproject.toml",
            "/dashboard/app.js%00.html",
            "/dashboard/APP.JS",
            "/dashboard/app.js/",
            "/etc/passwd",
            "/../../etc/passwd",
        ):
            answer = await client.get(path)
            # Refused before any file is read: 404 (no such file) or 401 (not a dashboard file, so the
            # read needs the token like any other).
            assert answer.status in (401, 404), path
            body = await answer.read()
            assert b"import" not in body and b"root:" not in body, path

    _with_client(True, scenario)


def test_metrics_needs_the_token_when_reads_are_protected() -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        answer = await client.get("/metrics")
        assert answer.status == 401
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        wrong = await client.get("/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status == 403

    _with_client(True, scenario)


def test_the_page_carries_no_inline_script_or_style_and_sets_text_never_html() -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        page = (await (await client.get("/")).read()).decode()
        assert "<script>" not in page and "style=" not in page and "onclick" not in page.lower()
        script = (await (await client.get("/dashboard/app.js")).read()).decode()
        assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "eval(" not in script
        # The token goes in a header, never in a URL.
        assert "?token" not in script and "Authorization" in script

    _with_client(False, scenario)

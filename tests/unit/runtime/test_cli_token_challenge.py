"""The CLI sends a stored REST token only to a coordinator that proves it holds it (issue 23, finding 6).

A real coordinator REST API and a fake server, both on loopback. The fake claims the real job's id and,
to answer the challenge, passes it on to the real coordinator and returns its proof (a relay). The CLI
of the job's user, pointed at the fake, must send no token; pointed at the real one, it must.
"""

from __future__ import annotations

import asyncio
import json
import threading
import types
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sluice import _tokens
from sluice._client import client_command
from sluice.cli import parser
from sluice.coordinator._rest_auth import RestAuth
from sluice.coordinator._rest_input import SavepointTargets
from sluice.coordinator.rest import RestApi

JOB_ID = "orders"


class _RealCoordinator:
    """A coordinator's REST API in a thread of its own, with a job that only records a cancel."""

    def __init__(self, token: str) -> None:
        self.cancelled = threading.Event()
        job: Any = types.SimpleNamespace(
            config=types.SimpleNamespace(job_id=JOB_ID), metrics={}, cancel=self.cancelled.set
        )
        self.api = RestApi(job, RestAuth(token, protect_reads=False), SavepointTargets([]))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self.api.start("127.0.0.1", 0), self._loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.api.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


class _Relay(BaseHTTPRequestHandler):
    """A fake coordinator: relays /v1/health (challenge included) to the real one; records the rest."""

    real_url = ""
    authorizations: list[str | None] = []

    def do_GET(self) -> None:
        headers = {k: v for k, v in self.headers.items() if k.lower() == _tokens.CHALLENGE_HEADER.lower()}
        with urllib.request.urlopen(urllib.request.Request(self.real_url + self.path, headers=headers)) as r:
            self._answer(200, r.read())

    def do_POST(self) -> None:
        self.authorizations.append(self.headers.get("Authorization"))
        self._answer(401, b'{"error": "this request needs the job\'s REST token"}')

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def coordinators(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[_RealCoordinator, str]]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv(_tokens.ENV_VAR, raising=False)
    token = _tokens.new_token()
    _tokens.store_token(JOB_ID, token)
    real = _RealCoordinator(token)
    _Relay.real_url, _Relay.authorizations = real.url, []
    fake = ThreadingHTTPServer(("127.0.0.1", 0), _Relay)
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    try:
        yield real, f"http://127.0.0.1:{fake.server_address[1]}"
    finally:
        fake.shutdown()
        fake.server_close()
        real.stop()


def _cancel(address: str) -> int:
    return client_command(parser().parse_args(["cancel", "--address", address]))


def test_a_fake_coordinator_relaying_the_challenge_gets_no_token(
    coordinators: tuple[_RealCoordinator, str], capsys: pytest.CaptureFixture[str]
) -> None:
    real, fake = coordinators
    with pytest.raises(Exception, match="401"):
        _cancel(fake)
    assert _Relay.authorizations == [None], "the cancel reached the fake without any token"
    assert "did not prove it holds that job's stored token" in capsys.readouterr().err
    assert not real.cancelled.is_set()


def test_the_real_coordinator_proves_it_and_gets_the_stored_token(
    coordinators: tuple[_RealCoordinator, str],
) -> None:
    real, _ = coordinators
    assert _cancel(real.url) == 0
    assert real.cancelled.is_set()


def test_a_malformed_challenge_is_refused() -> None:
    async def scenario() -> tuple[int, Any]:
        job: Any = types.SimpleNamespace(config=types.SimpleNamespace(job_id=JOB_ID), metrics={})
        api = RestApi(job, RestAuth("t", protect_reads=False), SavepointTargets([]))
        url = await api.start("127.0.0.1", 0)
        try:
            request = urllib.request.Request(url + "/v1/health", headers={_tokens.CHALLENGE_HEADER: "zz"})
            try:
                await asyncio.to_thread(urllib.request.urlopen, request)
            except urllib.error.HTTPError as err:
                return err.code, json.loads(err.read())
            return 200, None
        finally:
            await api.stop()

    status, answer = asyncio.run(scenario())
    assert status == 400 and _tokens.CHALLENGE_HEADER in answer["error"]


def test_a_proof_names_the_address_the_connection_reached() -> None:
    nonce = bytes(32)
    assert _tokens.endpoint(("::ffff:127.0.0.1", 8081, 0, 0)) == "127.0.0.1:8081"
    here = _tokens.token_proof("t", nonce, "127.0.0.1:8081")
    assert here != _tokens.token_proof("t", nonce, "127.0.0.1:9999")
    assert here != _tokens.token_proof("u", nonce, "127.0.0.1:8081")
    assert _tokens.parse_challenge("ab" * 32) == b"\xab" * 32
    assert _tokens.parse_challenge("ab") is None and _tokens.parse_challenge("zz" * 32) is None

"""The REST listener under attack (issue 23): slowloris connections, slow bodies, foreign Host headers.

A real `RestApi` on a loopback port and raw sockets, as an attacker would use them. No job is behind it:
the requests that must succeed are answered by the dashboard's static route or refused before a handler
reads the job.
"""

from __future__ import annotations

import asyncio
import os
import types
from typing import Any

import pytest

from sluice.coordinator import _rest_guard, _rest_input
from sluice.coordinator._rest_auth import RestAuth
from sluice.coordinator._rest_hosts import AllowedHosts
from sluice.coordinator._rest_input import SavepointTargets
from sluice.coordinator.rest import RestApi

SLOW = 300
"""More slowloris connections than the listener keeps open."""


def _api(allowed_hosts: tuple[str, ...] = ()) -> RestApi:
    job: Any = types.SimpleNamespace(metrics={})  # read by the rate sampler only
    return RestApi(job, RestAuth("t", protect_reads=False), SavepointTargets([]), allowed_hosts)


async def _get(port: int, path: str = "/", host: str = "127.0.0.1") -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_slowloris_connections_are_bounded_and_a_real_client_still_gets_an_answer() -> None:
    async def scenario() -> tuple[int, int]:
        api = _api()
        url = await api.start("127.0.0.1", 0)
        port = int(url.rsplit(":", 1)[1])
        before = _open_fds()
        slow = []
        try:
            for _ in range(SLOW):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # and never the end
                slow.append(writer)
            await asyncio.sleep(0.3)
            # The attacker's own SLOW sockets are in this process too.
            server_side = _open_fds() - before - SLOW
            status, _ = await _get(port)
        finally:
            for writer in slow:
                writer.close()
            await api.stop()
        return server_side, status

    server_side, status = asyncio.run(scenario())
    assert server_side <= _rest_guard.MAX_REST_CONNECTIONS + 2, f"{server_side} REST connections held"
    assert status == 200


def test_a_connection_that_sends_no_request_head_in_time_is_closed() -> None:
    async def scenario() -> bytes:
        api = _api()
        api.guard.header_timeout_s = 0.3
        url = await api.start("127.0.0.1", 0)
        port = int(url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        try:
            return await asyncio.wait_for(reader.read(), 5)
        finally:
            writer.close()
            await api.stop()

    assert asyncio.run(scenario()) == b"", "closed without an answer"


def test_a_body_that_does_not_arrive_in_time_gets_400(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_rest_input, "BODY_TIMEOUT_S", 0.3)

    async def scenario() -> bytes:
        api = _api()
        api.guard.header_timeout_s = 0.3  # aiohttp lingers over the unread body; the guard ends that
        url = await api.start("127.0.0.1", 0)
        port = int(url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"POST /v1/job/cancel HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\n"
            b"Content-Length: 10\r\nConnection: close\r\n\r\n{"
        )
        try:
            # The answer, not the end of the stream: aiohttp lingers to read the rest of the body.
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            answer = head + await asyncio.wait_for(reader.readexactly(length), 5)
            # Then the guard closes the connection aiohttp would keep reading for a while.
            assert await asyncio.wait_for(reader.read(), 5) == b""
            return answer
        finally:
            writer.close()
            await api.stop()

    answer = asyncio.run(scenario())
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert b"did not arrive within" in answer


def test_a_foreign_host_name_is_refused_and_known_names_and_addresses_are_served() -> None:
    async def scenario() -> dict[str, tuple[int, bytes]]:
        api = _api(("orders-rest.jobs.svc",))
        url = await api.start("127.0.0.1", 0)
        port = int(url.rsplit(":", 1)[1])
        try:
            return {
                host: await _get(port, "/", host)
                for host in (
                    "rebind.attacker.example",
                    f"rebind.attacker.example:{port}",
                    "localhost",
                    f"127.0.0.1:{port}",
                    f"[::1]:{port}",
                    "10.1.2.3:8081",
                    "orders-rest.jobs.svc:8081",
                    "bad host",
                )
            }
        finally:
            await api.stop()

    answers = asyncio.run(scenario())
    for host in ("rebind.attacker.example", next(h for h in answers if h.startswith("rebind") and ":" in h)):
        status, body = answers[host]
        assert status == 421, host
        assert b"--rest-allowed-host" in body
    for host in ("localhost", "10.1.2.3:8081", "orders-rest.jobs.svc:8081"):
        assert answers[host][0] == 200, host
    assert all(answers[h][0] == 200 for h in answers if h.startswith(("127.", "[::1]")))
    assert answers["bad host"][0] == 400


def test_allowed_hosts_parse_host_values() -> None:
    hosts = AllowedHosts(["Orders-Rest.jobs.svc."])
    hosts.allow_bound("coordinator.internal")
    assert hosts.refusal("orders-rest.jobs.svc") is None
    assert hosts.refusal("COORDINATOR.internal:8081") is None
    assert hosts.refusal("[fe80::1]:80") is None
    assert hosts.refusal(None) is None
    assert hosts.refusal("[::1") == (400, "the Host header '[::1' is not a host name or address")
    assert hosts.refusal("a:b")[0] == 400  # type: ignore[index]
    assert hosts.refusal("orders-rest.jobs.svc.evil.example")[0] == 421  # type: ignore[index]
    assert AllowedHosts(["*"]).refusal("anything.example") is None

"""Floods of connections that never authenticate (issue 23, findings 3 and 4).

Real sockets on loopback, attacked as a stranger on the machine would: connections opened and left
silent, raw TCP that never starts TLS, wrong proofs by the hundred. The job's own peers must get through
while the flood is held, the port's file descriptors stay bounded, and the log does not grow per refusal.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import secrets
import socket
from asyncio.sslproto import SSLProtocol
from typing import Any

import pytest

from sluice.transport import handshake
from sluice.transport._admission import MAX_PENDING_HANDSHAKES, MAX_PENDING_PER_PEER, Admission, RefusalLog
from sluice.transport.framing import frame, read_payload
from sluice.transport.handshake import DATA, AuthenticationFailed
from sluice.transport.secret import JobSecret
from sluice.transport.tls import generate_job_ca
from sluice.transport.wire import Wire

FLOOD = 300
"""More silent connections than any bound of a port, and fewer than the test process's fd limit."""


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            payload = await read_payload(reader, 1 << 20)
            writer.write(frame(payload, 1 << 20))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _round_trip(wire: Wire, port: int, payload: bytes) -> bytes:
    reader, writer = await wire.open("127.0.0.1", port, DATA)
    writer.write(frame(payload, wire.max_frame_bytes))
    answer = await read_payload(reader, wire.max_frame_bytes)
    writer.close()
    return answer


async def _silent(port: int, count: int, source: str = "127.0.0.1") -> list[socket.socket]:
    """`count` connections from `source` that never send a byte (plain sockets: the attacker's side
    needs no streams)."""
    loop = asyncio.get_running_loop()
    opened = []
    for _ in range(count):
        sock = socket.socket()
        sock.setblocking(False)
        sock.bind((source, 0))
        await loop.sock_connect(sock, ("127.0.0.1", port))
        opened.append(sock)
    return opened


async def _dropped(sock: socket.socket) -> bool:
    """Whether the listener closed `sock` (after its challenge), rather than keeping it pending."""
    loop = asyncio.get_running_loop()
    received = b""
    try:
        while True:
            chunk = await asyncio.wait_for(loop.sock_recv(sock, 4096), 0.05)
            if not chunk:
                return True
            received += chunk
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_peer_gets_through_while_a_silent_flood_is_held_open() -> None:
    async def scenario() -> tuple[bytes, int]:
        wire = Wire(JobSecret.generate())
        server = await wire.serve(_echo, "127.0.0.1", DATA)
        port = server.sockets[0].getsockname()[1]
        flood = await _silent(port, FLOOD)
        await asyncio.sleep(0.2)  # the server has accepted them all
        try:
            # Well within the silent-connection timeout: no slot was freed by waiting.
            answer = await asyncio.wait_for(_round_trip(wire, port, b"the job's own"), 2)
        finally:
            for sock in flood:
                sock.close()
            server.close()
        return answer, len(flood)

    answer, flooded = asyncio.run(scenario())
    assert flooded == FLOOD
    assert answer == b"the job's own"


def test_peers_keep_getting_through_a_flood_that_reopens_what_is_dropped() -> None:
    async def scenario() -> list[bytes]:
        wire = Wire(JobSecret.generate())
        server = await wire.serve(_echo, "127.0.0.1", DATA)
        port = server.sockets[0].getsockname()[1]
        stop = asyncio.Event()

        async def flood() -> None:
            held: list[socket.socket] = []
            while not stop.is_set():
                held += await _silent(port, 20)
                for sock in held[:-FLOOD]:
                    sock.close()
                held = held[-FLOOD:]
                await asyncio.sleep(0)
            for sock in held:
                sock.close()

        attacker = asyncio.create_task(flood())
        try:
            answers = [await _round_trip(wire, port, f"peer {n}".encode()) for n in range(20)]
        finally:
            stop.set()
            await attacker
            server.close()
        return answers

    assert asyncio.run(scenario()) == [f"peer {n}".encode() for n in range(20)]


def _tls_states() -> int:
    """asyncio's TLS protocols alive in this process: each holds a 256 KiB read buffer."""
    gc.collect()
    return sum(isinstance(o, SSLProtocol) for o in gc.get_objects())


@pytest.mark.parametrize(
    ("sources", "bound"),
    [(["127.0.0.1"], MAX_PENDING_PER_PEER), ([f"127.0.0.{n}" for n in range(2, 12)], MAX_PENDING_HANDSHAKES)],
    ids=["one address", "ten addresses"],
)
def test_a_tls_port_holds_a_bounded_number_of_silent_connections(
    sources: list[str], bound: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Raw TCP that never sends a ClientHello counts against the bound before TLS: the listener keeps at
    most the bound's worth of them open, each with its descriptor and TLS state, however many come (from
    one address, the per-address bound; from many, the port's). The ones it drops to make room end
    quietly and leave nothing behind: an error logged per dropped connection would grow the log with the
    flood, and the memory with it."""

    async def scenario() -> tuple[int, int, bytes]:
        wire = Wire.build(JobSecret.generate(), 1 << 20, generate_job_ca("flood"))
        server = await wire.serve(_echo, "127.0.0.1", DATA)
        port = server.sockets[0].getsockname()[1]
        before = _open_fds()
        flood = [sock for source in sources for sock in await _silent(port, FLOOD // len(sources), source)]
        await asyncio.sleep(0.3)
        grown, tls_states = _open_fds() - before, _tls_states()
        try:
            answer = await asyncio.wait_for(_round_trip(wire, port, b"over tls"), 5)
        finally:
            for sock in flood:
                sock.close()
            server.close()
        # The attacker's own sockets are in this process too: one per flooding connection.
        return grown - len(flood), tls_states, answer

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        server_side, tls_states, answer = asyncio.run(scenario())
    assert server_side <= bound + 4, f"the TLS listener held {server_side} connections"
    assert tls_states <= bound, f"{tls_states} TLS states were alive"
    assert answer == b"over tls"
    assert not [r.getMessage() for r in caplog.records if r.name == "asyncio"]


def test_each_peer_address_holds_at_most_its_share_of_the_pending_slots() -> None:
    async def scenario() -> tuple[int, int]:
        wire = Wire(JobSecret.generate())
        server = await wire.serve(_echo, "127.0.0.1", DATA)
        port = server.sockets[0].getsockname()[1]
        flood = await _silent(port, 100, source="127.0.0.2")
        await asyncio.sleep(0.3)
        still_open = sum([not await _dropped(sock) for sock in flood])
        for sock in flood:
            sock.close()
        server.close()
        return still_open, len(flood)

    still_open, flooded = asyncio.run(scenario())
    assert flooded == 100
    assert still_open == MAX_PENDING_PER_PEER


def test_a_cut_handshake_is_retried_and_a_refusal_is_not() -> None:
    secret = JobSecret.generate()
    seen: dict[str, int] = {"flaky": 0, "refusing": 0}

    async def flaky(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Drops the first three connections as a flooded port drops its oldest, then serves."""
        seen["flaky"] += 1
        if seen["flaky"] <= 3:
            writer.transport.abort()
            return
        await handshake.accept(reader, writer, secret, DATA)
        await _echo(reader, writer)

    async def refusing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["refusing"] += 1
        other = JobSecret.generate()
        with pytest.raises(AuthenticationFailed):
            await handshake.accept(reader, writer, other, DATA)
        writer.close()

    async def scenario() -> bytes:
        wire = Wire(secret)
        flaky_server = await asyncio.start_server(flaky, "127.0.0.1", 0)
        refusing_server = await asyncio.start_server(refusing, "127.0.0.1", 0)
        try:
            answer = await _round_trip(wire, flaky_server.sockets[0].getsockname()[1], b"after retries")
            with pytest.raises(AuthenticationFailed, match="refused this end's proof"):
                await wire.open("127.0.0.1", refusing_server.sockets[0].getsockname()[1], DATA)
        finally:
            flaky_server.close()
            refusing_server.close()
        return answer

    assert asyncio.run(scenario()) == b"after retries"
    assert seen == {"flaky": 4, "refusing": 1}


def test_retrying_gives_up_after_its_bound() -> None:
    async def cutting(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.transport.abort()

    async def scenario() -> None:
        server = await asyncio.start_server(cutting, "127.0.0.1", 0)
        try:
            await Wire(JobSecret.generate()).open("127.0.0.1", server.sockets[0].getsockname()[1], DATA, 0.3)
        finally:
            server.close()

    with pytest.raises(handshake.HandshakeCut, match=r"tried for 0\.3s"):
        asyncio.run(scenario())


def test_refusals_of_a_flood_are_logged_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        wire = Wire(JobSecret.generate())
        server = await wire.serve(_echo, "127.0.0.1", DATA)
        port = server.sockets[0].getsockname()[1]
        for _ in range(200):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await reader.readexactly(len(handshake.MAGIC) + handshake.NONCE_BYTES)
            writer.write(secrets.token_bytes(handshake.NONCE_BYTES + handshake.MAC_BYTES))
            await reader.read()  # refused and closed
            writer.close()
        server.close()

    with caplog.at_level(logging.WARNING, logger="sluice.transport.wire"):
        asyncio.run(scenario())
    refused = [r for r in caplog.records if "refused a data connection" in r.getMessage()]
    assert len(refused) == 1, [r.getMessage() for r in refused]


def test_the_refusal_log_says_how_many_it_held_back() -> None:
    now = [0.0]
    lines: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("test.refusals")
    logger.addHandler(_Collect())
    logger.propagate = False
    log = RefusalLog(logger, interval_s=10.0, clock=lambda: now[0])
    for second in range(12):
        now[0] = float(second)
        log.refused("control", ("127.0.0.1", 1000 + second), "no handshake")
    assert lines == [
        "refused a control connection from ('127.0.0.1', 1000): no handshake",
        "refused a control connection from ('127.0.0.1', 1010): no handshake "
        "(9 more refused in the last 10s, not logged)",
    ]
    assert log.suppressed == 1


def test_admission_makes_room_from_the_peer_holding_the_most() -> None:
    dropped: list[str] = []
    admission = Admission(total=4, per_peer=3)

    def admit(peer: str, name: str) -> Any:
        return admission.admit(peer, lambda: dropped.append(name))

    a1 = admit("a", "a1")
    admit("a", "a2"), admit("a", "a3")
    admit("a", "a4")  # a at its own bound: its oldest goes
    assert dropped == ["a1"]
    admit("b", "b1")
    assert dropped == ["a1"] and len(admission) == 4
    admit("c", "c1")  # the port at its total: the oldest of the peer holding the most (a) goes
    assert dropped == ["a1", "a2"] and len(admission) == 4
    a1.release()  # released after eviction: not counted twice
    assert len(admission) == 4 and admission.evicted == 2


def test_admission_refuses_a_per_peer_bound_above_the_total() -> None:
    with pytest.raises(ValueError, match="per-peer bound"):
        Admission(total=4, per_peer=5)

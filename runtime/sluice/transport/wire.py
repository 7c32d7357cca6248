"""Authenticated connections: every server accepts, and every client opens, through the handshake.

`Wire` bundles what both ends of a job's internal connections share: the job secret, the frame size
limit and, with `--internal-tls`, the TLS contexts. Handlers given to `serve` see a connection only
after the peer authenticated; peers that fail are logged and disconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sluice.transport import handshake
from sluice.transport.secret import DEFAULT_MAX_FRAME_BYTES, JobSecret, TaskManagerLaunch, TlsMaterial

log = logging.getLogger(__name__)

MAX_PENDING_HANDSHAKES = 64
"""Connections that may be in their handshake at once, per listening port."""

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass(frozen=True)
class Wire:
    secret: JobSecret = field(repr=False)
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    server_tls: ssl.SSLContext | None = field(default=None, repr=False)
    client_tls: ssl.SSLContext | None = field(default=None, repr=False)
    handshake_timeout_s: float = handshake.HANDSHAKE_TIMEOUT_S

    @classmethod
    def build(cls, secret: JobSecret, max_frame_bytes: int, tls: TlsMaterial | None) -> Wire:
        if tls is None:
            return cls(secret, max_frame_bytes)
        from sluice.transport.tls import client_context, server_context

        return cls(secret, max_frame_bytes, server_context(tls), client_context(tls))

    @classmethod
    def from_launch(cls, launch: TaskManagerLaunch) -> Wire:
        return cls.build(launch.secret, launch.max_frame_bytes, launch.tls)

    async def serve(self, handler: Handler, host: str, purpose: bytes) -> asyncio.Server:
        """Listens on `host` (a free port); `handler` runs for each peer that authenticated."""
        pending = 0

        async def quietly(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await authenticated(reader, writer)
            except asyncio.CancelledError:
                # The process is shutting down and its loop cancels this connection's task. Python 3.11's
                # start_server calls exception() on a cancelled handler task, which raises and prints
                # "Exception in callback ... CancelledError" per connection: end it quietly instead
                # (nothing awaits it; the loop is closing).
                writer.close()

        async def authenticated(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal pending
            peer = writer.get_extra_info("peername")
            if pending >= MAX_PENDING_HANDSHAKES:
                # A flood of connections that never finish the handshake must not use up the file
                # descriptors the job's own peers need; real peers finish theirs in milliseconds.
                log.warning(
                    "refused a %s connection from %s: too many handshakes pending", purpose.decode(), peer
                )
                writer.close()
                return
            pending += 1
            try:
                await handshake.accept(reader, writer, self.secret, purpose, self.handshake_timeout_s)
            except (handshake.AuthenticationFailed, ConnectionError, ssl.SSLError) as err:
                log.warning("refused a %s connection from %s: %s", purpose.decode(), peer, err)
                writer.close()
                return
            finally:
                pending -= 1
            _keep_alive(writer)
            await handler(reader, writer)

        return await asyncio.start_server(
            quietly,
            host,
            0,
            ssl=self.server_tls,
            ssl_handshake_timeout=self.handshake_timeout_s if self.server_tls else None,
        )

    async def open(
        self, host: str, port: int, purpose: bytes
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to a job peer that proved it holds the secret (else `AuthenticationFailed`)."""
        try:
            reader, writer = await asyncio.open_connection(
                host,
                port,
                ssl=self.client_tls,
                ssl_handshake_timeout=self.handshake_timeout_s if self.client_tls else None,
            )
        except ssl.SSLError as err:
            raise handshake.AuthenticationFailed(
                f"TLS with {host}:{port} failed (is it serving this job's certificate?): {err}"
            ) from None
        try:
            await handshake.connect(reader, writer, self.secret, purpose, self.handshake_timeout_s)
        except BaseException:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            raise
        _keep_alive(writer)
        return reader, writer


def _keep_alive(writer: asyncio.StreamWriter) -> None:
    """TCP keepalive probes after 10 s of silence: a peer behind a partition is noticed in about 25 s
    even on a connection that carries nothing (an idle data channel), instead of the kernel's 2 hours."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 5)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)

"""Authenticated connections: every server accepts, and every client opens, through the handshake.

`Wire` bundles what both ends of a job's internal connections share: the job secret, the frame size
limit and, with `--internal-tls`, the TLS contexts. Handlers given to `serve` see a connection only
after the peer authenticated; peers that fail are disconnected, and logged at a bounded rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sluice._waiting import within
from sluice.transport import handshake
from sluice.transport._admission import Admission, RefusalLog
from sluice.transport.secret import DEFAULT_MAX_FRAME_BYTES, JobSecret, TaskManagerLaunch, TlsMaterial

log = logging.getLogger(__name__)

OPEN_RETRY_S = 30.0
"""How long a job peer keeps trying to connect while its handshakes are cut short."""
_FIRST_RETRY_S = 0.05
_MAX_RETRY_S = 2.0

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
        """Listens on `host` (a free port); `handler` runs for each peer that authenticated.

        Accepted connections are pending until they authenticated, TLS handshake included, and the
        pending ones are bounded (`sluice.transport._admission`): a flood of silent connections costs
        a bounded number of file descriptors and cannot keep the job's own peers out.
        """
        admission = Admission()
        refusals = RefusalLog(log)
        what = purpose.decode()

        async def quietly(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await authenticated(reader, writer)
            except asyncio.CancelledError:
                # The connection's task was cancelled: its server is closing (a TaskManager's data port
                # at failover) or the process is shutting down. Python 3.11's start_server calls
                # exception() on a cancelled handler task, which raises and prints "Exception in
                # callback ... CancelledError" per connection: end it quietly instead (nothing awaits
                # it). Every server built here, the data server included, goes through this.
                writer.close()

        async def authenticated(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = writer.get_extra_info("peername")
            # The socket's own transport: aborting it also ends a TLS layer started on top of it.
            raw = writer.transport
            task = asyncio.current_task()
            assert task is not None

            def make_room() -> None:
                # Cancelled first: a connection aborted in its TLS handshake would otherwise end
                # StreamWriter.start_tls with no transport (CPython 3.11), an AttributeError printed
                # with its traceback for every connection a flood has dropped, and its memory kept.
                task.cancel()
                raw.abort()
                refusals.refused(what, peer, "dropped to make room: the port's pending handshakes are full")

            pending = admission.admit(_address(peer), make_room)
            try:
                if self.server_tls is not None:
                    await writer.start_tls(self.server_tls, ssl_handshake_timeout=self.handshake_timeout_s)
                await handshake.accept(reader, writer, self.secret, purpose, self.handshake_timeout_s)
            except (handshake.AuthenticationFailed, OSError, ssl.SSLError, TimeoutError) as err:
                refusals.refused(what, peer, str(err) or type(err).__name__)
                writer.close()
                return
            finally:
                pending.release()
            _keep_alive(writer)
            await handler(reader, writer)

        # TLS starts inside `authenticated`, once admitted, so that it counts against the same bound.
        return await asyncio.start_server(quietly, host, 0)

    async def open(
        self, host: str, port: int, purpose: bytes, retry_s: float = OPEN_RETRY_S
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to a job peer that proved it holds the secret (else `AuthenticationFailed`).

        A handshake cut short (the listener dropped this connection to make room during a flood, or it
        stalled) is tried again with jittered exponential back-off for up to `retry_s`; a refusal, a
        wrong proof or a certificate that is not the job's fails at once.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + retry_s
        delay = _FIRST_RETRY_S
        cuts: list[str] = []
        while True:
            try:
                opened = await self._open_once(host, port, purpose)
            except handshake.HandshakeCut as cut:
                left = deadline - loop.time()
                if left <= 0:
                    raise handshake.HandshakeCut(f"{cut} (tried for {retry_s:g}s)") from None
                log.debug(
                    "%s connection to %s:%d cut short (%s); trying again", purpose.decode(), host, port, cut
                )
                cuts.append(str(cut))
                await asyncio.sleep(min(left, random.uniform(0, delay)))
                delay = min(delay * 2, _MAX_RETRY_S)
                continue
            if cuts:
                # Once per connection, not per cut: a peer the listener keeps dropping is worth knowing
                # about (a flood of that port, or a listener too slow to answer within the timeout).
                log.warning(
                    "%s connection to %s:%d got through after %d handshakes were cut short (the last: %s)",
                    purpose.decode(),
                    host,
                    port,
                    len(cuts),
                    cuts[-1],
                )
            return opened

    async def _open_once(
        self, host: str, port: int, purpose: bytes
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        timeout_s = self.handshake_timeout_s
        try:
            reader, writer = await within(
                asyncio.open_connection(
                    host,
                    port,
                    ssl=self.client_tls,
                    ssl_handshake_timeout=timeout_s if self.client_tls else None,
                ),
                # The connect itself too: a flooded listener's full accept queue drops SYNs silently.
                timeout_s * 2 if self.client_tls else timeout_s,
            )
        except TimeoutError:
            raise handshake.HandshakeCut(f"connecting to {host}:{port} took over {timeout_s:g}s") from None
        except ssl.SSLCertVerificationError as err:
            raise handshake.AuthenticationFailed(
                f"TLS with {host}:{port} failed (is it serving this job's certificate?): {err}"
            ) from None
        except (ssl.SSLError, ConnectionResetError, ConnectionAbortedError) as err:
            # Not a certificate the job refuses: the connection ended during TLS (dropped to make room).
            raise handshake.HandshakeCut(f"TLS with {host}:{port} was cut short: {err}") from None
        try:
            await handshake.connect(reader, writer, self.secret, purpose, timeout_s)
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError) as err:
            await _discard(writer)
            raise handshake.HandshakeCut(
                f"the connection to {host}:{port} broke during the handshake: {err}"
            ) from None
        except BaseException:
            await _discard(writer)
            raise
        _keep_alive(writer)
        return reader, writer


async def _discard(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()


def _address(peer: object) -> str:
    """The peer's IP address, which its pending connections are counted under."""
    return str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)


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

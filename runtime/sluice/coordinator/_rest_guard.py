"""Connections of the REST API: a bounded number, each of which must send its request head in time.

aiohttp has no header-read timeout: a client that sends a header byte now and then (slowloris) holds
its connection, and a descriptor of the coordinator, for as long as it likes. Issue 23 saw 500 of them
exhaust a 512-descriptor limit, so that the next checkpoint's `_metadata` could not be written.

`ConnectionGuard` sits between the listening socket and aiohttp's protocol. A connection is *waiting*
from when it opens, and again from the end of each response, until its next request head has been
read; it may wait `HEADER_TIMEOUT_S` at most. At most `MAX_REST_CONNECTIONS` are open; when one more
arrives, the one waiting longest makes room (a real client sends its head within a round trip, so it
is never that one for long), and if none is waiting the new one is closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

MAX_REST_CONNECTIONS = 64
"""Open REST connections at once; far more than the CLI, a dashboard and the operator need."""
HEADER_TIMEOUT_S = 10.0
"""How long a connection may take to send a request head (after opening, or after a response)."""


class _Connection:
    __slots__ = ("timer", "transport")

    def __init__(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.timer: asyncio.TimerHandle | None = None


class ConnectionGuard:
    """A protocol factory for the REST listener that wraps aiohttp's, plus the middleware that tells it
    when a request head has arrived and when its response is done."""

    def __init__(self, limit: int = MAX_REST_CONNECTIONS, header_timeout_s: float = HEADER_TIMEOUT_S) -> None:
        self.limit, self.header_timeout_s = limit, header_timeout_s
        self._open: dict[asyncio.BaseTransport, _Connection] = {}
        self._waiting: dict[asyncio.BaseTransport, None] = {}
        """Open connections without a request in progress, longest waiting first."""
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._open)

    def wrapping(self, factory: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        """A protocol factory for the listener: `factory`'s protocols, behind this guard."""
        return lambda: _Guarded(self, factory())

    def _admit(self, transport: asyncio.BaseTransport) -> bool:
        if len(self._open) >= self.limit:
            if not self._waiting:
                self.dropped += 1
                return False
            self._drop(next(iter(self._waiting)))
        self._open[transport] = _Connection(transport)
        self._wait(transport)
        return True

    def _wait(self, transport: asyncio.BaseTransport) -> None:
        connection = self._open.get(transport)
        if connection is None:
            return
        self._waiting[transport] = None
        loop = asyncio.get_running_loop()
        connection.timer = loop.call_later(self.header_timeout_s, self._drop, transport)

    def _busy(self, transport: asyncio.BaseTransport) -> None:
        self._waiting.pop(transport, None)
        connection = self._open.get(transport)
        if connection is not None and connection.timer is not None:
            connection.timer.cancel()
            connection.timer = None

    def _drop(self, transport: asyncio.BaseTransport) -> None:
        self.dropped += 1
        self._forget(transport)
        transport.abort()  # type: ignore[attr-defined]

    def _forget(self, transport: asyncio.BaseTransport) -> None:
        self._busy(transport)
        self._open.pop(transport, None)

    def middleware(self) -> Middleware:
        @web.middleware
        async def track(request: web.Request, handler: Handler) -> web.StreamResponse:
            transport = request.transport
            if transport is not None:
                self._busy(transport)
            try:
                return await handler(request)
            finally:
                if transport is not None and not transport.is_closing():
                    self._wait(transport)

        return track


class _Guarded(asyncio.Protocol):
    """aiohttp's protocol for one connection, seen only if the guard admitted it."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self._guard, self._inner = guard, inner
        self._admitted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._admitted = self._guard._admit(transport)
        if not self._admitted:
            transport.abort()  # type: ignore[attr-defined]
            return
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._admitted:
            self._guard._forget(self._transport)
            self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._admitted:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._admitted else None

    def pause_writing(self) -> None:
        if self._admitted:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._admitted:
            self._inner.resume_writing()

    def __getattr__(self, name: str) -> Any:
        # aiohttp may look at its protocol through the transport (transport.get_protocol()).
        return getattr(self._inner, name)

"""A fault-injecting TCP proxy on loopback, in front of the moto S3 server.

Jobs get the proxy's address as their S3 endpoint; the harness switches its mode at random moments:

- pass:   bytes flow both ways untouched;
- refuse: the S3 server is unavailable: open connections are cut, new ones closed at once;
- slow:   every chunk from the client waits `SLOW_S` before it goes on (a congested or distant store);
- error:  open connections are cut, and each new one gets an HTTP 503 SlowDown answer to its request
          (what S3 answers when it throttles), then is closed.

Switching away from pass cuts the open connections so that pooled keep-alive connections meet the
new mode at once instead of passing through to the server until they happen to be closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

MODES = ("pass", "refuse", "slow", "error")
SLOW_S = 0.8
_ERROR_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate (injected by the chaos proxy).</Message></Error>"
)
_ERROR = (
    b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nConnection: close\r\n"
    + f"Content-Length: {len(_ERROR_BODY)}\r\n\r\n".encode()
    + _ERROR_BODY
)


class FaultProxy:
    """Runs in a thread of its own with its own event loop; `set_mode` may be called from any thread."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.mode = "pass"
        self.port = 0
        self.connections = 0
        self.cut = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._serve, name="chaos-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or not self.port:
            raise RuntimeError("the chaos proxy did not start")

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown proxy mode {mode!r}")
        self.mode = mode
        if mode != "pass":
            asyncio.run_coroutine_threadsafe(self._cut_all(), self._loop).result(5)

    def close(self) -> None:
        if self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(10)

    def _serve(self) -> None:
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stopped = asyncio.Event()
        server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stopped.wait()
            await self._cut_all()

    async def _cut_all(self) -> None:
        for writer in list(self._writers):
            self.cut += 1
            writer.transport.abort()
        self._writers.clear()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self.mode == "refuse":
            writer.transport.abort()
            return
        if self.mode == "error":
            with contextlib.suppress(OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                writer.write(_ERROR)
                await writer.drain()
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(self._pipe(reader, up_writer, True), self._pipe(up_reader, writer, False))
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upward: bool) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while True:
                chunk = await reader.read(65536)
                if not chunk or writer.transport.is_closing():
                    break
                if upward and self.mode == "slow":
                    await asyncio.sleep(SLOW_S)
                writer.write(chunk)
                await writer.drain()
        writer.transport.abort()

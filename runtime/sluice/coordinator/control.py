"""The coordinator's control port: TaskManagers register here and exchange control messages."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from sluice.engine.network import encode, read_frame


class TaskManagerLink:
    def __init__(self, index: int, host: str, data_port: int, pid: int, writer: asyncio.StreamWriter) -> None:
        self.index, self.host, self.data_port, self.pid = index, host, data_port, pid
        self.writer = writer

    def send(self, message: dict[str, Any]) -> None:
        if not self.writer.is_closing():
            self.writer.write(encode(message))


class ControlServer:
    """Accepts TaskManager connections; hands every message and every lost link to the job master."""

    def __init__(
        self,
        on_message: Callable[[TaskManagerLink, dict[str, Any]], None],
        on_lost: Callable[[TaskManagerLink, int], None],
    ) -> None:
        self.on_message = on_message
        self.on_lost = on_lost
        self.links: dict[int, TaskManagerLink] = {}
        self.registered = asyncio.Event()
        self.expected = 0
        self.attempt = 0
        self._server: asyncio.Server | None = None
        self._readers: set[asyncio.Task[None]] = set()
        self.address = ""

    async def start(self, host: str) -> str:
        self._server = await asyncio.start_server(self._serve, host, 0)
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"{host}:{port}"
        return self.address

    def expect(self, count: int, attempt: int) -> None:
        self.links = {}
        self.expected = count
        self.attempt = attempt
        self.registered = asyncio.Event()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._readers.add(task)
        link: TaskManagerLink | None = None
        attempt = self.attempt
        try:
            hello = await read_frame(reader)
            if hello.get("type") != "register":
                return
            link = TaskManagerLink(hello["tm"], hello["host"], hello["dataPort"], hello["pid"], writer)
            self.links[link.index] = link
            if len(self.links) >= self.expected:
                self.registered.set()
            while True:
                self.on_message(link, await read_frame(reader))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._readers.discard(task)
            if link is not None and self.links.get(link.index) is link:
                self.on_lost(link, attempt)
            writer.close()

    def broadcast(self, message: dict[str, Any]) -> None:
        for link in self.links.values():
            link.send(message)

    async def close_links(self) -> None:
        links, self.links = list(self.links.values()), {}
        for link in links:
            with contextlib.suppress(Exception):
                link.send({"type": "shutdown"})
                await link.writer.drain()
        # Closing the transports ends each reader with EOF; cancelling readers inside asyncio's stream
        # callbacks would log spurious errors.
        for link in links:
            link.writer.close()

    async def close(self) -> None:
        await self.close_links()
        if self._server is not None:
            self._server.close()

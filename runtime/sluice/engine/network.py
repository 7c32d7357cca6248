"""Framed messages over TCP, for data channels between TaskManagers and the control connection.

A frame is a 4-byte big-endian length followed by a pickle. Each remote data channel gets its own TCP
connection, so that a full channel stops only its own sender: the receiving side stops reading while
the channel's queue is full and TCP flow control does the rest. Its first frame names the channel.
"""

from __future__ import annotations

import asyncio
import pickle
import struct
from typing import Any

from sluice.engine.channels import InputChannel, OutputChannel
from sluice.engine.events import EndOfPartition, Event

_HEADER = struct.Struct(">I")
_HIGH_WATER = 1 << 20


def encode(message: Any) -> bytes:
    try:
        payload = pickle.dumps(message, protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):
        import cloudpickle

        payload = cloudpickle.dumps(message, protocol=5)
    return _HEADER.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> Any:
    header = await reader.readexactly(_HEADER.size)
    (length,) = _HEADER.unpack(header)
    return pickle.loads(await reader.readexactly(length))


ChannelKey = tuple[int, int, int, int]
"""(attempt, vertex id, subtask index, input channel index)."""


class DataServer:
    """Accepts remote data channels for the subtasks of one TaskManager."""

    def __init__(self) -> None:
        self._channels: dict[ChannelKey, asyncio.Future[InputChannel]] = {}
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self, host: str) -> None:
        self._server = await asyncio.start_server(self._serve, host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def _slot(self, key: ChannelKey) -> asyncio.Future[InputChannel]:
        slot = self._channels.get(key)
        if slot is None:
            slot = self._channels[key] = asyncio.get_running_loop().create_future()
        return slot

    def register(self, key: ChannelKey, channel: InputChannel) -> None:
        self._slot(key).set_result(channel)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            attempt, vertex, subtask, index = await read_frame(reader)
            channel = await self._slot((attempt, vertex, subtask, index))
            while True:
                event = await read_frame(reader)
                await channel.put(event)
                if isinstance(event, EndOfPartition):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()


class RemoteOutputChannel(OutputChannel):
    def __init__(self, host: str, port: int, key: ChannelKey) -> None:
        self.host, self.port, self.key = host, port, key
        self._writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> asyncio.StreamWriter:
        _, writer = await asyncio.open_connection(self.host, self.port)
        writer.write(encode(self.key))
        self._writer = writer
        return writer

    async def send(self, event: Event) -> None:
        writer = self._writer or await self._connect()
        writer.write(encode(event))
        if writer.transport.get_write_buffer_size() > _HIGH_WATER:
            await writer.drain()

    async def close(self) -> None:
        if self._writer is not None:
            await self._writer.drain()
            self._writer.close()

"""Data channels between TaskManagers: one authenticated TCP connection per remote channel.

Each remote data channel gets its own connection, so that a full channel stops only its own sender:
the receiving side stops reading while the channel's queue is full and TCP flow control does the rest.
A connection starts with the job's handshake (`sluice.transport.handshake`); its first frame then names
the channel as a JSON array, and every later frame is a pickled event. Records are pickled because they
are the user's Python objects; they are unpickled only from a peer that proved it holds the job's
secret.
"""

from __future__ import annotations

import asyncio
import json
import logging
import pickle
from typing import Any

from sluice.engine.channels import InputChannel, OutputChannel
from sluice.engine.events import EndOfPartition, Event
from sluice.transport.framing import FrameTooLarge, frame, read_payload
from sluice.transport.handshake import DATA
from sluice.transport.wire import Wire

log = logging.getLogger(__name__)
_HIGH_WATER = 1 << 20

ChannelKey = tuple[int, int, int, int]
"""(attempt, vertex id, subtask index, input channel index)."""


def encode_event(event: Any, max_bytes: int) -> bytes:
    try:
        payload = pickle.dumps(event, protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):
        import cloudpickle

        payload = cloudpickle.dumps(event, protocol=5)
    return frame(payload, max_bytes)


def _channel_key(payload: bytes) -> ChannelKey:
    key = json.loads(payload)
    if not (
        isinstance(key, list)
        and len(key) == 4
        and all(isinstance(k, int) and not isinstance(k, bool) and k >= 0 for k in key)
    ):
        raise ValueError(f"a data connection must name its channel as four integers, not {key!r}")
    return (key[0], key[1], key[2], key[3])


class DataServer:
    """Accepts remote data channels for the subtasks of one TaskManager."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self._channels: dict[ChannelKey, asyncio.Future[InputChannel]] = {}
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self, host: str) -> None:
        self._server = await self.wire.serve(self._serve, host, DATA)
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
        limit = self.wire.max_frame_bytes
        try:
            channel = await self._slot(_channel_key(await read_payload(reader, limit)))
            while True:
                event = pickle.loads(await read_payload(reader, limit))
                await channel.put(event)
                if isinstance(event, EndOfPartition):
                    return
        except (FrameTooLarge, ValueError, pickle.UnpicklingError) as err:
            log.warning("closed a data connection from %s: %s", writer.get_extra_info("peername"), err)
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
    def __init__(self, host: str, port: int, key: ChannelKey, wire: Wire) -> None:
        self.host, self.port, self.key = host, port, key
        self.wire = wire
        self._writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> asyncio.StreamWriter:
        _, writer = await self.wire.open(self.host, self.port, DATA)
        writer.write(frame(json.dumps(list(self.key)).encode(), self.wire.max_frame_bytes))
        self._writer = writer
        return writer

    async def send(self, event: Event) -> None:
        writer = self._writer or await self._connect()
        writer.write(encode_event(event, self.wire.max_frame_bytes))
        if writer.transport.get_write_buffer_size() > _HIGH_WATER:
            # The receiver stopped reading (its channel queue is full): waiting here is backpressure.
            clock = self.clock
            if clock is not None:
                clock.start()
            try:
                await writer.drain()
            finally:
                if clock is not None:
                    clock.stop()

    async def close(self) -> None:
        if self._writer is not None:
            await self._writer.drain()
            self._writer.close()

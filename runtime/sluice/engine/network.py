"""Data channels between TaskManagers: one authenticated TCP connection per remote channel.

Each remote data channel gets its own connection, so that a full channel stops only its own sender.
A connection starts with the job's handshake (`sluice.transport.handshake`); its first frame then names
the channel as a JSON array, and every later frame from the sender is a pickled event. Records are
pickled because they are the user's Python objects; they are unpickled only from a peer that proved it
holds the job's secret.

Flow control is by credit, as in Flink's network stack: the sender sends an event only against a credit,
and the receiver grants one for each free place in the channel's queue that no credit covers yet (when
the connection starts, when its task takes an event, when the queue grows), in lumps of at least half
the queue so that a grant frame is not written per event taken. The sender writes as many events as it
holds credit for at once, one write for all their frames. So the events of a remote
channel, in the socket and in the queue together, are never more than the queue's capacity, the bound a
local channel has; that capacity is sized from the receiver's rate (`sluice.engine._queue_sizing`) and
bounds how long a checkpoint barrier waits behind records. Without credits the sender's buffers and the
kernel's held hundreds of batches a slowed receiver had not read, and barriers waited seconds behind
them. A credit frame's payload is a 4-byte big-endian count.
"""

from __future__ import annotations

import asyncio
import json
import logging
import pickle
import struct
from typing import Any

from sluice.engine._unpicklable import PICKLING_ERRORS, unpicklable_record
from sluice.engine.channels import InputChannel, OutputChannel
from sluice.engine.events import EndOfPartition, Event, RecordBatch
from sluice.transport.framing import FrameTooLarge, frame, read_payload
from sluice.transport.handshake import DATA
from sluice.transport.wire import Wire

log = logging.getLogger(__name__)
_CREDIT = struct.Struct(">I")
_MAX_CREDITS = 1 << 16
"""More credit than any queue holds: a peer that claims it is not speaking this protocol."""

ChannelKey = tuple[int, int, int, int]
"""(attempt, vertex id, subtask index, input channel index)."""


def encode_event(event: Any, max_bytes: int) -> bytes:
    try:
        payload = pickle.dumps(event, protocol=5)
    except PICKLING_ERRORS:
        import cloudpickle

        try:
            payload = cloudpickle.dumps(event, protocol=5)
        except PICKLING_ERRORS as err:
            if isinstance(event, RecordBatch):
                raise unpicklable_record(event.values, err) from err
            raise
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
        channel: InputChannel | None = None
        try:
            channel = await self._slot(_channel_key(await read_payload(reader, limit)))
            credit = _CreditGrant(channel, writer)
            channel.on_room = credit.top_up
            credit.top_up()
            while True:
                event = pickle.loads(await read_payload(reader, limit))
                credit.used()
                # Never waits for a sender that keeps to its credit; one that does not is held back by
                # TCP while the queue is full, as before credits.
                await channel.put(event)
                if isinstance(event, EndOfPartition):
                    return
        except (FrameTooLarge, ValueError, pickle.UnpicklingError) as err:
            log.warning("closed a data connection from %s: %s", writer.get_extra_info("peername"), err)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            if channel is not None:
                channel.on_room = None
            self._connections.discard(task)
            writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()


class _CreditGrant:
    """The receiving side's count of the credit its sender holds, and the grants that keep the
    channel's events (queued or on their way) within the queue's capacity."""

    __slots__ = ("channel", "outstanding", "writer")

    def __init__(self, channel: InputChannel, writer: asyncio.StreamWriter) -> None:
        self.channel, self.writer = channel, writer
        self.outstanding = 0

    def top_up(self) -> None:
        capacity = self.channel.capacity
        room = capacity - len(self.channel) - self.outstanding
        # Room is granted in lumps of half the queue, not a place at a time: a frame (a write, and a
        # wakeup of the sender) per lump instead of per event taken. The sender never waits on a lump
        # it could use: while room is short of one, it still holds the rest of the queue's credit.
        if room >= max(1, capacity // 2) and not self.writer.is_closing():
            self.outstanding += room
            self.writer.write(_credit_frame(room))

    def used(self) -> None:
        self.outstanding = max(0, self.outstanding - 1)


def _credit_frame(count: int) -> bytes:
    return frame(_CREDIT.pack(count), _CREDIT.size)


def _credits(payload: bytes) -> int:
    if len(payload) != _CREDIT.size:
        raise ValueError(f"a credit must be {_CREDIT.size} bytes, not {len(payload)}")
    count: int = _CREDIT.unpack(payload)[0]
    if not 0 < count <= _MAX_CREDITS:
        raise ValueError(f"a credit must grant 1 to {_MAX_CREDITS} events, not {count}")
    return count


class RemoteOutputChannel(OutputChannel):
    def __init__(self, host: str, port: int, key: ChannelKey, wire: Wire) -> None:
        self.host, self.port, self.key = host, port, key
        self.wire = wire
        self._writer: asyncio.StreamWriter | None = None
        self._credits = 0
        self._granted = asyncio.Event()
        self._lost: str | None = None
        """Why the receiver can grant no more credit (the connection ended), once it cannot."""
        self._credit_reader: asyncio.Task[None] | None = None

    async def _connect(self) -> asyncio.StreamWriter:
        reader, writer = await self.wire.open(self.host, self.port, DATA)
        writer.write(frame(json.dumps(list(self.key)).encode(), self.wire.max_frame_bytes))
        self._writer = writer
        self._credit_reader = asyncio.create_task(self._read_credits(reader))
        return writer

    async def _read_credits(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                # Read before adding: `self._credits += await ...` would add to the count from before
                # the wait, undoing the sends made meanwhile.
                granted = _credits(await read_payload(reader, _CREDIT.size))
                self._credits += granted
                self._granted.set()
        except (asyncio.IncompleteReadError, OSError, ValueError) as err:
            self._lost = f"the data connection to {self.host}:{self.port} ended: {err or type(err).__name__}"
            self._granted.set()

    async def send(self, event: Event) -> None:
        await self.send_many([event])

    async def send_many(self, events: list[Event]) -> None:
        """Sends `events` in order, as many at a time as the receiver has granted credit for: their
        frames go out in one write with one drain, not one of each per event (a batch and the watermark
        sealed behind it, say)."""
        writer = self._writer or await self._connect()
        limit = self.wire.max_frame_bytes
        sent = 0
        while sent < len(events):
            if self._credits == 0:
                await self._wait_for_credit()
            count = min(self._credits, len(events) - sent)
            frames = [encode_event(event, limit) for event in events[sent : sent + count]]
            self._credits -= count
            sent += count
            writer.write(frames[0] if count == 1 else b"".join(frames))
            await writer.drain()

    async def _wait_for_credit(self) -> None:
        # The receiver's queue is full: waiting here is backpressure.
        clock = self.clock
        if clock is not None:
            clock.start()
        try:
            while self._credits == 0:
                if self._lost is not None:
                    raise ConnectionError(self._lost)
                self._granted.clear()
                await self._granted.wait()
        finally:
            if clock is not None:
                clock.stop()

    async def close(self) -> None:
        if self._writer is not None:
            await self._writer.drain()
            self._writer.close()
        if self._credit_reader is not None:
            self._credit_reader.cancel()

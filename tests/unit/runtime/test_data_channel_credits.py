"""Remote data channels under credit-based flow control (`sluice.engine.network`).

Real sockets on loopback with the job's handshake; no mocks. What is measured is what a checkpoint
barrier would wait behind: the events a sender got out while its receiver took none.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from sluice.engine.channels import InputChannel
from sluice.engine.events import EndOfPartition, Event, RecordBatch
from sluice.engine.network import DataServer, RemoteOutputChannel, encode_event
from sluice.transport.framing import frame, read_payload
from sluice.transport.handshake import DATA
from sluice.transport.secret import JobSecret
from sluice.transport.wire import Wire

KEY = (1, 2, 0, 0)


def _first_value(event: Event | None) -> Any:
    assert isinstance(event, RecordBatch)
    return event.values[0]


def _run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


async def _settle() -> None:
    """Long enough on loopback for every frame already written to have been read and answered."""
    await asyncio.sleep(0.2)


async def _sender_against(capacity: int) -> tuple[Wire, DataServer, InputChannel, RemoteOutputChannel]:
    wire = Wire(JobSecret.generate())
    server = DataServer(wire)
    await server.start("127.0.0.1")
    channel = InputChannel(0, 0, capacity=capacity)
    server.register(KEY, channel)
    return wire, server, channel, RemoteOutputChannel("127.0.0.1", server.port, KEY, wire)


def test_a_sender_gets_out_no_more_than_the_receivers_queue_holds() -> None:
    capacity = 3

    async def scenario() -> tuple[int, int, list[Any]]:
        _, server, channel, sender = await _sender_against(capacity)
        sent = 0

        async def send_all() -> None:
            nonlocal sent
            for i in range(50):
                await sender.send(RecordBatch([i] * 100, None))
                sent += 1

        task = asyncio.create_task(send_all())
        await _settle()
        stalled_at = sent
        received = [_first_value(channel.poll())]  # the receiver takes one
        await _settle()
        after_one = sent  # one more event could go
        deadline = asyncio.get_running_loop().time() + 10
        while len(received) < 50 and asyncio.get_running_loop().time() < deadline:
            if (event := channel.poll()) is None:
                await asyncio.sleep(0.01)
            else:
                received.append(_first_value(event))
        await task
        await sender.close()
        await server.close()
        return stalled_at, after_one, received

    stalled_at, after_one, received = _run(scenario())
    assert stalled_at == capacity, "queued and on their way together: what a local channel holds"
    assert after_one == stalled_at + 1
    assert received == list(range(50)), "every event, once, in order"


def test_room_in_a_queue_that_grew_is_given_to_the_remote_sender() -> None:
    async def scenario() -> tuple[int, int]:
        _, server, channel, sender = await _sender_against(2)
        sent = 0

        async def send_all() -> None:
            nonlocal sent
            for i in range(20):
                await sender.send(RecordBatch([i], None))
                sent += 1

        task = asyncio.create_task(send_all())
        await _settle()
        before = sent
        channel.resize(6)
        await _settle()
        after = sent
        task.cancel()
        await server.close()
        return before, after

    before, after = _run(scenario())
    assert (before, after) == (2, 6)


def test_room_is_granted_in_lumps_of_half_the_queue() -> None:
    capacity = 8

    async def scenario() -> list[int]:
        _, server, channel, sender = await _sender_against(capacity)
        sent = 0

        async def send_all() -> None:
            nonlocal sent
            for i in range(40):
                await sender.send(RecordBatch([i], None))
                sent += 1

        task = asyncio.create_task(send_all())
        await _settle()
        seen = [sent]
        for _ in range(capacity // 2):
            channel.poll()
            await _settle()
            seen.append(sent)
        task.cancel()
        await server.close()
        return seen

    # Three places free are no lump yet; the fourth frees half the queue and the sender fills it.
    assert _run(scenario()) == [8, 8, 8, 8, 12]


def test_events_sent_together_arrive_in_order_as_credit_comes() -> None:
    capacity = 3

    async def scenario() -> tuple[int, list[Any]]:
        _, server, channel, sender = await _sender_against(capacity)
        task = asyncio.create_task(sender.send_many([RecordBatch([i], None) for i in range(25)]))
        await _settle()
        stalled_at = len(channel)
        received: list[Any] = []
        deadline = asyncio.get_running_loop().time() + 10
        while len(received) < 25 and asyncio.get_running_loop().time() < deadline:
            if (event := channel.poll()) is None:
                await asyncio.sleep(0.01)
            else:
                received.append(_first_value(event))
        await task
        await sender.close()
        await server.close()
        return stalled_at, received

    stalled_at, received = _run(scenario())
    assert stalled_at == capacity, "no more of them out than the receiver granted"
    assert received == list(range(25))


def test_end_of_partition_ends_the_connection_cleanly() -> None:
    async def scenario() -> list[Any]:
        _, server, channel, sender = await _sender_against(4)
        await sender.send(RecordBatch([1], None))
        await sender.send(EndOfPartition())
        await sender.close()
        await _settle()
        events = [channel.poll(), channel.poll(), channel.poll()]
        await server.close()
        return events

    first, last, nothing = _run(scenario())
    assert isinstance(first, RecordBatch) and isinstance(last, EndOfPartition) and nothing is None


async def _fake_receiver(wire: Wire, answer: bytes | None) -> tuple[asyncio.Server, int]:
    """A peer that holds the job's secret but answers the channel's first frame with `answer` raw
    (then closes), or with nothing (and closes)."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_payload(reader, wire.max_frame_bytes)
        if answer is not None:
            writer.write(answer)
            await writer.drain()
        await asyncio.sleep(0.1)
        writer.close()

    server = await wire.serve(handler, "127.0.0.1", DATA)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (frame(struct.pack(">I", 0), 4), "a credit must grant 1 to"),
        (frame(struct.pack(">I", 1 << 30), 4), "a credit must grant 1 to"),
        (frame(b"\x00\x01", 4), "a credit must be 4 bytes"),
        (struct.pack(">I", 1 << 20) + b"x" * 16, "frame of 1,048,576 bytes"),
        (None, "ended"),
    ],
    ids=["zero", "absurd", "short", "oversized-frame", "hang-up"],
)
def test_a_receiver_that_grants_no_valid_credit_fails_the_sender_instead_of_hanging_it(
    answer: bytes | None, reason: str
) -> None:
    async def scenario() -> str:
        wire = Wire(JobSecret.generate())
        server, port = await _fake_receiver(wire, answer)
        sender = RemoteOutputChannel("127.0.0.1", port, KEY, wire)
        try:
            with pytest.raises(ConnectionError) as failure:
                await sender.send(RecordBatch([1], None))  # there is no credit: it waits for one
            return str(failure.value)
        finally:
            server.close()

    message = _run(scenario())
    assert "127.0.0.1" in message and reason in message


def test_a_sender_that_ignores_credits_fills_the_queue_and_no_more() -> None:
    capacity = 2

    async def scenario() -> tuple[int, int]:
        wire, server, channel, _ = await _sender_against(capacity)
        _, writer = await wire.open("127.0.0.1", server.port, DATA)
        writer.write(frame(b"[1, 2, 0, 0]", wire.max_frame_bytes))
        for i in range(40):  # never reads a credit
            writer.write(encode_event(RecordBatch([i], None), wire.max_frame_bytes))
        await writer.drain()
        await _settle()
        queued = len(channel)
        taken = 0
        deadline = asyncio.get_running_loop().time() + 10
        while taken < 40 and asyncio.get_running_loop().time() < deadline:
            if channel.poll() is None:
                await asyncio.sleep(0.01)
            else:
                taken += 1
        writer.close()
        await server.close()
        return queued, taken

    queued, taken = _run(scenario())
    assert queued == capacity, "the receiver reads no further than its queue has room"
    assert taken == 40, "and loses nothing it was sent"

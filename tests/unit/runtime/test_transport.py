"""The internal transport: mutual handshake, frame limits, typed control messages, launch settings, TLS.

Real sockets on loopback; no mocks. Attacks are sent as a stranger would send them: raw bytes on a port.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pickle
import struct
from pathlib import Path
from typing import Any

import pytest

from sluice._states import StopMode, SubtaskState
from sluice.coordinator.control import TO_COORDINATOR
from sluice.transport.framing import FrameTooLarge, frame, read_payload
from sluice.transport.handshake import CONTROL, DATA, REFUSED, AuthenticationFailed
from sluice.transport.messages import (
    TO_TASKMANAGER,
    Abort,
    Complete,
    Decline,
    Deploy,
    Heartbeat,
    JobEnd,
    MessageError,
    Register,
    Shutdown,
    Stop,
    TaskReport,
    Trigger,
    decode_blob,
    decode_message,
    encode_blob,
    encode_message,
)
from sluice.transport.secret import JobSecret, LaunchSettingsError, TaskManagerLaunch
from sluice.transport.tls import generate_job_ca
from sluice.transport.wire import Wire


class _Touch:
    """A pickle that, if anyone ever loaded it, would create a file: the attack of the issue."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.path), "w"))


class _Echo:
    """A server handler that records every payload an authenticated peer sends and echoes it back."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.received: list[bytes] = []
        self.errors: list[BaseException] = []

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                payload = await read_payload(reader, self.wire.max_frame_bytes)
                self.received.append(payload)
                writer.write(frame(payload, self.wire.max_frame_bytes))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError) as err:
            self.errors.append(err)
        finally:
            writer.close()


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_peers_holding_the_same_secret_exchange_frames() -> None:
    async def scenario() -> tuple[bytes, list[bytes]]:
        wire = Wire(JobSecret.generate())
        echo = _Echo(wire)
        server = await wire.serve(echo, "127.0.0.1", CONTROL)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await wire.open("127.0.0.1", port, CONTROL)
        writer.write(frame(b"hello", wire.max_frame_bytes))
        answer = await read_payload(reader, wire.max_frame_bytes)
        writer.close()
        server.close()
        return answer, echo.received

    answer, received = _run(scenario())
    assert answer == b"hello" and received == [b"hello"]


def test_a_client_with_another_secret_is_refused_and_nothing_it_sends_is_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> tuple[BaseException | None, list[bytes]]:
        server_wire, stranger = Wire(JobSecret.generate()), Wire(JobSecret.generate())
        echo = _Echo(server_wire)
        server = await server_wire.serve(echo, "127.0.0.1", CONTROL)
        port = server.sockets[0].getsockname()[1]
        failure: BaseException | None = None
        try:
            await stranger.open("127.0.0.1", port, CONTROL)
        except AuthenticationFailed as err:
            failure = err
        await asyncio.sleep(0.1)
        server.close()
        return failure, echo.received

    with caplog.at_level(logging.WARNING):
        failure, received = _run(scenario())
    assert isinstance(failure, AuthenticationFailed), "the stranger learns it was refused"
    assert received == [], "the handler never saw the connection"
    assert "refused a control connection" in caplog.text
    assert "does not match the job's secret" in caplog.text


def test_a_server_without_the_secret_is_not_trusted_by_a_client() -> None:
    async def scenario() -> None:
        impostor = Wire(JobSecret.generate())
        server = await impostor.serve(_Echo(impostor), "127.0.0.1", DATA)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises(AuthenticationFailed):
                await Wire(JobSecret.generate()).open("127.0.0.1", port, DATA)
        finally:
            server.close()

    _run(scenario())


def test_a_proof_for_the_data_port_does_not_open_the_control_port() -> None:
    async def scenario() -> None:
        wire = Wire(JobSecret.generate())
        server = await wire.serve(_Echo(wire), "127.0.0.1", CONTROL)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises(AuthenticationFailed):
                await wire.open("127.0.0.1", port, DATA)
        finally:
            server.close()

    _run(scenario())


@pytest.mark.parametrize(
    "attack",
    ["pickle", "garbage", "half-frame", "huge-length", "silence"],
)
def test_raw_attacks_on_a_port_run_nothing_and_allocate_nothing(tmp_path: Path, attack: str) -> None:
    marker = tmp_path / "pwned"
    evil = pickle.dumps(_Touch(marker))
    payloads = {
        "pickle": struct.pack(">I", len(evil)) + evil,
        "garbage": os.urandom(4096),
        "half-frame": b"\x00\x00",
        "huge-length": struct.pack(">I", 0xFFFFFFFF) + b"x" * 1024,
        "silence": b"",
    }

    async def scenario() -> tuple[list[bytes], bytes]:
        wire = Wire(JobSecret.generate(), handshake_timeout_s=0.5)
        echo = _Echo(wire)
        server = await wire.serve(echo, "127.0.0.1", DATA)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(payloads[attack])
        await writer.drain()
        # The server closes on the attacker: what it sent back is the handshake's challenge, nothing more.
        answer = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        server.close()
        return echo.received, answer

    received, answer = _run(scenario())
    assert received == []
    assert not marker.exists(), "the pickle was never loaded"
    assert answer.startswith(b"SLUICE") and len(answer) >= 40
    # After the challenge, at most the refusal of a wrong proof: never anything the attacker sent.
    assert answer[40:] in (b"", REFUSED)


def test_an_authenticated_peer_announcing_a_huge_frame_is_cut_off_before_allocation() -> None:
    async def scenario() -> list[BaseException]:
        wire = Wire(JobSecret.generate(), max_frame_bytes=1024)
        echo = _Echo(wire)
        server = await wire.serve(echo, "127.0.0.1", DATA)
        port = server.sockets[0].getsockname()[1]
        _, writer = await wire.open("127.0.0.1", port, DATA)
        writer.write(struct.pack(">I", 4 * 1024**3 - 1))
        await writer.drain()
        for _ in range(100):
            if echo.errors:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()
        return echo.errors

    errors = _run(scenario())
    assert len(errors) == 1 and isinstance(errors[0], FrameTooLarge)
    assert "4,294,967,295 bytes" in str(errors[0])


def test_a_sender_over_the_limit_is_told_which_setting_to_raise() -> None:
    with pytest.raises(FrameTooLarge, match="--max-frame-size"):
        frame(b"x" * 11, max_bytes=10)
    assert frame(b"x" * 10, max_bytes=10) == b"\x00\x00\x00\x0a" + b"x" * 10


def test_control_messages_round_trip_and_bytes_travel_as_base64() -> None:
    graph = pickle.dumps({"any": "object"})
    message = {
        "type": "deploy",
        "attempt": 0,
        "jobId": "j",
        "graph": encode_blob(graph),
        "tasks": [[0, 1]],
        "placement": {"0:1": 0},
        "taskmanagers": {"0": ["127.0.0.1", 1]},
        "restore": None,
        "attemptToken": "t",
        "waitForFinalCheckpoint": True,
    }
    decoded = decode_message(json.dumps(message).encode(), TO_TASKMANAGER)
    assert isinstance(decoded, Deploy) and decoded.tasks == ((0, 1),) and decoded.placement == {(0, 1): 0}
    assert decoded.taskmanagers == {0: ("127.0.0.1", 1)}
    assert json.loads(encode_message(decoded)) == message
    assert decode_blob(decoded.graph) == graph


@pytest.mark.parametrize(
    "message",
    [
        Trigger(3, 17, "file:///chk/job/chk-3", False, ((0, 0), (0, 1)), completed=2),
        Complete(3),
        Abort(4),
        Stop(StopMode.TERMINATE),
        Stop(StopMode.SUSPEND),
        Shutdown(),
        Shutdown(JobEnd(3, (1, 2))),
    ],
)
def test_every_message_to_a_taskmanager_reads_as_sent(message: Any) -> None:
    assert decode_message(encode_message(message), TO_TASKMANAGER) == message


@pytest.mark.parametrize(
    ("message", "wire"),
    [
        (Register(0, "h", 7, 9), {"type": "register", "tm": 0, "host": "h", "dataPort": 7, "pid": 9}),
        (Heartbeat(0, 9, 7), {"type": "heartbeat", "tm": 0, "pid": 9, "dataPort": 7}),
        (
            TaskReport(1, 2, SubtaskState.RUNNING),
            {"type": "task", "vertex": 1, "subtask": 2, "state": "RUNNING"},
        ),
        (
            TaskReport(1, 2, SubtaskState.END_OF_DATA, drain=False),
            {"type": "task", "vertex": 1, "subtask": 2, "state": "END_OF_DATA", "drain": False},
        ),
        (
            Decline(3, 1, 2, "disk full", "state-write"),
            {
                "type": "decline",
                "checkpoint": 3,
                "vertex": 1,
                "subtask": 2,
                "reason": "disk full",
                "cause": "state-write",
            },
        ),
        (Stop(StopMode.TERMINATE), {"type": "stop", "drain": True}),
    ],
)
def test_messages_keep_their_wire_form(message: Any, wire: dict[str, Any]) -> None:
    assert json.loads(encode_message(message)) == wire
    kinds = TO_TASKMANAGER if isinstance(message, Stop) else TO_COORDINATOR
    assert decode_message(encode_message(message), kinds) == message


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (b"\x80\x05K\x01.", "not JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"type": "exec"}', "unknown control message type 'exec'"),
        (b'{"tm": 1}', "unknown control message type None"),
        (b'{"type": "register", "tm": 0, "host": "h", "pid": 1}', "lacks the field 'dataPort'"),
        (
            b'{"type": "register", "tm": "0", "host": "h", "dataPort": 1, "pid": 1}',
            "'register': 'tm' must be an integer, not a string",
        ),
        (
            b'{"type": "register", "tm": true, "host": "h", "dataPort": 1, "pid": 1}',
            "'tm' must be an integer, not a boolean",
        ),
        (b'{"type": "deploy"}', "unknown control message type 'deploy'"),
        (b'{"type": "task", "vertex": 0, "subtask": 0, "state": "DONE"}', "'state' must be one of 'CREATED'"),
        (
            b'{"type": "ack", "checkpoint": 2, "vertex": 0, "subtask": 0, "endOfData": false, "operators": '
            b'[{"uid": "a", "finished": false, "path": "../chk-1/a-0.state", "size": 1, "union": false, '
            b'"operatorState": true, "pendingCommits": false}]}',
            "acknowledgement of checkpoint 2 operators.0.: 'path' must be a plain file name",
        ),
    ],
)
def test_malformed_control_messages_are_refused_with_the_reason(payload: bytes, problem: str) -> None:
    with pytest.raises(MessageError, match=problem.replace("(", r"\(")):
        decode_message(payload, TO_COORDINATOR)


def test_launch_settings_round_trip_and_never_show_the_secret() -> None:
    secret = JobSecret.generate()
    launch = TaskManagerLaunch("10.0.0.5:7000", secret, 4096)
    again = TaskManagerLaunch.decode(launch.encode())
    assert again == launch
    for text in (repr(launch), str(launch), repr(secret), str(secret)):
        assert secret.key.hex() not in text


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("nope", "not JSON"),
        ("[]", "JSON object"),
        ('{"secret": "00", "maxFrameBytes": 1}', "launch settings lacks the field 'coordinator'"),
        ('{"coordinator": "h", "secret": "00", "maxFrameBytes": 1}', "HOST:PORT"),
        ('{"coordinator": "h:1", "maxFrameBytes": 1}', "secret"),
        ('{"coordinator": "h:1", "secret": "zz", "maxFrameBytes": 1}', "not hex"),
        ('{"coordinator": "h:1", "secret": "00", "maxFrameBytes": 1}', "at least 32 bytes"),
        (json.dumps({"coordinator": "h:1", "secret": "00" * 32, "maxFrameBytes": 0}), "must be at least 1"),
        (json.dumps({"coordinator": "h:1", "secret": "00" * 32}), "lacks the field 'maxFrameBytes'"),
        (json.dumps({"coordinator": "h:1", "secret": "00" * 32, "maxFrameBytes": 1, "tls": {}}), "'tls'"),
    ],
)
def test_malformed_launch_settings_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(LaunchSettingsError, match=problem):
        TaskManagerLaunch.decode(text)


def test_tls_carries_the_handshake_and_refuses_another_jobs_certificate() -> None:
    secret = JobSecret.generate()
    ours, theirs = generate_job_ca("job-a"), generate_job_ca("job-b")

    async def scenario() -> bytes:
        wire = Wire.build(secret, 1 << 20, ours)
        server = await wire.serve(_Echo(wire), "127.0.0.1", DATA)
        port = server.sockets[0].getsockname()[1]
        try:
            reader, writer = await wire.open("127.0.0.1", port, DATA)
            writer.write(frame(b"over tls", wire.max_frame_bytes))
            answer = await read_payload(reader, wire.max_frame_bytes)
            writer.close()
            # Same secret, but a client that trusts another job's authority does not accept this server.
            stranger = Wire.build(secret, 1 << 20, theirs)
            with pytest.raises(AuthenticationFailed, match="this job's certificate"):
                await stranger.open("127.0.0.1", port, DATA)
            return answer
        finally:
            server.close()

    assert _run(scenario()) == b"over tls"

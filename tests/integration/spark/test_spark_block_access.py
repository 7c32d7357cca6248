"""A stranger on the machine talks Spark's network protocol to every port of a default-host job.

Spark's block manager serves blocks (among them the broadcast that carries the TaskManagers' task
closure) to whoever sends an `OpenBlocks` RPC, unless `spark.authenticate` is on. The attack here is the
one a local user can make without any privilege: find the job's listening TCP ports in /proc, connect,
and ask for the first broadcast blocks. A port answers the attack if it sends back an RPC response to
the request (a `StreamHandle` for the blocks) or chunk data: with authentication on, every port must
close the connection, answer with a failure, or say nothing.
"""

from __future__ import annotations

import os
import socket
import struct
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from testkit.jobs import REPO, SluiceJob

PIPELINE = REPO / "examples" / "unbounded_counts.py"

# Spark's network protocol (org.apache.spark.network.protocol.Message.Type): a frame is an 8-byte
# length (counting itself), a type byte, then the message.
_RPC_REQUEST, _RPC_RESPONSE, _CHUNK_FETCH_SUCCESS, _CHUNK_FETCH_REQUEST = 3, 4, 1, 0
_OPEN_BLOCKS, _STREAM_HANDLE = 0, 3  # BlockTransferMessage.Type
_TCP_LISTEN = "0A"


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">i", len(data)) + data


def open_blocks_request(request_id: int, app_id: str, block_ids: list[str]) -> bytes:
    body = bytes([_OPEN_BLOCKS]) + _string(app_id) + _string("driver") + struct.pack(">i", len(block_ids))
    body += b"".join(_string(block) for block in block_ids)
    header = bytes([_RPC_REQUEST]) + struct.pack(">qi", request_id, len(body))
    return struct.pack(">q", 8 + len(header) + len(body)) + header + body


def chunk_fetch_request(stream_id: int) -> bytes:
    message = bytes([_CHUNK_FETCH_REQUEST]) + struct.pack(">qi", stream_id, 0)
    return struct.pack(">q", 8 + len(message)) + message


def _read_frame(sock: socket.socket) -> tuple[int, bytes] | None:
    """The next frame as (type, rest), or None when the peer closes, stalls or speaks something else."""
    head = _read_exactly(sock, 9)
    if head is None:
        return None
    length, kind = struct.unpack(">qB", head)
    if not 9 <= length <= 64 * 1024 * 1024:
        return None  # not Spark's framing (an HTTP answer, another protocol's greeting)
    rest = _read_exactly(sock, length - 9)
    return None if rest is None else (kind, rest)


def _read_exactly(sock: socket.socket, count: int) -> bytes | None:
    data = b""
    while len(data) < count:
        try:
            part = sock.recv(count - len(data))
        except OSError:  # reset by the peer, or nothing within the timeout
            return None
        if not part:
            return None
        data += part
    return data


def attack(port: int, block: str) -> str | None:
    """What the port gave away for an unauthenticated request of `block`, or None."""
    request_id = 0x5EC
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(open_blocks_request(request_id, "any-app", [block]))
        except OSError:
            return None
        frame = _read_frame(sock)
        if frame is None or frame[0] != _RPC_RESPONSE or len(frame[1]) < 12:
            return None
        answered_id, size = struct.unpack(">qi", frame[1][:12])
        if answered_id != request_id:
            return None
        handle = frame[1][12 : 12 + size]
        leak = f"an RPC response of {size} bytes to OpenBlocks({block})"
        # StreamHandle: its type byte, stream id, chunk count: fetch the first chunk as a stranger would.
        if len(handle) >= 13 and handle[0] == _STREAM_HANDLE:
            (stream_id,) = struct.unpack(">q", handle[1:9])
            sock.sendall(chunk_fetch_request(stream_id))
            chunk = _read_frame(sock)
            if chunk is not None and chunk[0] == _CHUNK_FETCH_SUCCESS:
                leak += f", then the block's data ({len(chunk[1])} bytes)"
        return leak


def family(root: int) -> set[int]:
    """`root` and every process descended from it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo.extend(children.get(pid, []))
    return found


def listening_ports(pids: set[int]) -> set[int]:
    """The TCP ports (IPv4 and IPv6) that the processes `pids` listen on, from /proc/net/tcp(6)."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == _TCP_LISTEN and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.mark.spark
def test_no_port_of_a_default_host_job_serves_a_block_without_authentication(tmp_path: Path) -> None:
    job = SluiceJob(
        PIPELINE,
        "--host",
        "spark",
        "--parallelism",
        "2",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--arg",
        "rate=200",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "1s",
        "--spark-log",
        str(tmp_path / "spark.log"),
    )
    try:
        job.wait_checkpoints(1, timeout=180)  # the TaskManager stage runs: its broadcast exists
        ports = listening_ports(family(job.process.pid))
        # The coordinator's control and REST ports, a data port per TaskManager, and Spark's own.
        assert len(ports) >= 6, f"found only the listening ports {sorted(ports)}"
        blocks = [f"broadcast_{i}_piece0" for i in range(3)]
        attacks = [(port, block) for port in sorted(ports) for block in blocks]
        # All at once: a port that says nothing holds its attack for the whole socket timeout.
        with ThreadPoolExecutor(len(attacks)) as pool:
            leaks = list(pool.map(lambda target: attack(*target), attacks))
        answered = {target: leak for target, leak in zip(attacks, leaks, strict=True) if leak is not None}
        assert answered == {}, "ports that served a stranger"
        assert job.ended() is None, job.stderr
    finally:
        job.kill()

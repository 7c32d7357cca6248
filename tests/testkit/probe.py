"""An attacker's view of a running job: its listening ports, found as a stranger on the machine would.

`listening_ports` reads /proc (the sockets a process holds and the kernel's table of listening TCP
sockets), the way `ss -ltnp` does; `attack` sends each port what the security issue listed: a pickle
whose loading runs code, random bytes, half a frame, a 4 GiB length header, a handshake with a wrong
proof, and a connection that says nothing. Every connection is bounded in time.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import struct
from pathlib import Path
from typing import Any

_LISTEN = "0A"


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (IPv4 and IPv6)."""
    inodes = _socket_inodes(pid)
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == _LISTEN and fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


class Touch:
    """Unpickling this creates `path`: proof that a pickle from the network was loaded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.path), "w"))


def attack_payloads(marker: Path) -> dict[str, bytes]:
    evil = pickle.dumps(Touch(marker), protocol=5)
    # The same pickle behind a forged "handshake": 32 bytes of nonce and 32 of proof, all made up.
    forged_handshake = os.urandom(64) + struct.pack(">I", len(evil)) + evil
    return {
        "code-running pickle": struct.pack(">I", len(evil)) + evil,
        "garbage": os.urandom(8192),
        "half frame": b"\x00\x00",
        "4 GiB length header": struct.pack(">I", 0xFFFFFFFF) + b"A" * 4096,
        "forged handshake": forged_handshake,
        "nothing": b"",
    }


def attack(port: int, marker: Path, host: str = "127.0.0.1", timeout_s: float = 3.0) -> dict[str, bytes]:
    """Sends every attack to `port`, each on its own connection; returns what the port answered."""
    answers: dict[str, bytes] = {}
    for name, payload in attack_payloads(marker).items():
        with socket.create_connection((host, port), timeout=timeout_s) as conn:
            with contextlib.suppress(OSError):
                conn.sendall(payload)
            received = b""
            with contextlib.suppress(OSError):
                while len(received) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    received += chunk
            answers[name] = received
    return answers

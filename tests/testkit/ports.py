"""Ports for the test servers this suite starts (PostgreSQL, S3, Kafka)."""

from __future__ import annotations

import random
import socket

SERVER_PORTS = range(20000, 32000)
"""Where test servers' ports are drawn: below the kernel's ephemeral range (32768 up by default). A port
picked free there and bound only seconds later (a broker formats its storage first) could meanwhile
become the local port of any outgoing connection of the machine, and the server would fail to start."""


def free_loopback_port() -> int:
    """A port of 127.0.0.1 that nothing holds now, for a server about to start."""
    for _ in range(100):
        port = random.choice(SERVER_PORTS)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port of 127.0.0.1 in {SERVER_PORTS} after 100 tries")

"""Ports for the servers tests start (PostgreSQL, S3, Kafka, coordinators under the process kubelet)."""

from __future__ import annotations

import random
import socket

SERVER_PORTS = range(20000, 32000)
"""Where test servers' ports are drawn: below the kernel's ephemeral range (32768 up by default). A port
picked free there and bound only seconds later (a broker formats its storage first) could meanwhile
become the local port of any outgoing connection of the machine, and the server would fail to start."""


def free_server_port(host: str) -> int:
    """A port of `host` (an address, or 0.0.0.0 for all) that nothing holds now, for a server about to
    start."""
    for _ in range(100):
        port = random.choice(SERVER_PORTS)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port of {host} in {SERVER_PORTS} after 100 tries")


def free_loopback_port() -> int:
    return free_server_port("127.0.0.1")

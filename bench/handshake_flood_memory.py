"""What a flood of silent TLS connections costs a listening port: memory after N connections, for two N.

    .venv/bin/python bench/handshake_flood_memory.py [--counts 500,2000] [--addresses 16]

For each count, a fresh listener process serves one port the way a TaskManager's data port is served
with `--internal-tls` (`Wire.serve`, handshake admission, TLS started once admitted). This process
opens that many TCP connections to it, spread over `--addresses` loopback source addresses (so that
the port's total bound, not the per-address one, is what holds), and sends nothing: neither a TLS
ClientHello nor a handshake byte. All are opened within a second, well inside the silence limit. Once
the listener has accepted them, its resident memory (VmRSS), its open descriptors and the connections
it still holds are read from /proc, the flood is closed, and the listener ends.

Admission caps the connections a port keeps pending, TLS included, so the figures should not grow
with the flood: the last line gives the ratio of the largest count's figures to the smallest's, and the
memory above the listener's idle figure, which is what the connections cost.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

_LISTENER = """
import asyncio, sys
from sluice.transport.handshake import DATA
from sluice.transport.secret import JobSecret
from sluice.transport.tls import generate_job_ca
from sluice.transport.wire import Wire

async def main() -> None:
    wire = Wire.build(JobSecret.generate(), 1 << 20, generate_job_ca("flood"))
    async def never(reader, writer):
        writer.close()
    server = await wire.serve(never, "127.0.0.1", DATA)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until told to end

asyncio.run(main())
"""


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _held_connections(pid: int, port: int) -> int:
    """Established TCP connections to `port` whose socket the listener process still has open."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}") if os.path.exists(f"/proc/{pid}/fd/{fd}") else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    held = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port, state, inode = int(fields[1].split(":")[1], 16), fields[3], fields[9]
        held += local_port == port and state == "01" and inode in inodes
    return held


def measure(count: int, addresses: int) -> dict[str, int]:
    listener = subprocess.Popen(
        [sys.executable, "-c", _LISTENER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert listener.stdout is not None and listener.stdin is not None
    port = int(listener.stdout.readline())
    time.sleep(0.5)
    idle_kib = _status(listener.pid, "VmRSS")
    flood = []
    try:
        for n in range(count):
            sock = socket.socket()
            sock.bind((f"127.0.0.{2 + n % addresses}", 0))
            sock.connect(("127.0.0.1", port))
            flood.append(sock)
        time.sleep(1.0)  # the listener accepts them all (and drops what admission turns away)
        figures = {
            "count": count,
            "idle_kib": idle_kib,
            "rss_kib": _status(listener.pid, "VmRSS"),
            "fds": len(os.listdir(f"/proc/{listener.pid}/fd")),
            "held": _held_connections(listener.pid, port),
        }
    finally:
        for sock in flood:
            sock.close()
        listener.stdin.close()
        listener.wait(10)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--counts", default="500,2000", help="flood sizes, comma-separated")
    parser.add_argument("--addresses", type=int, default=16, help="loopback source addresses to flood from")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, max(counts) + 256)), hard))
    rows = [measure(count, args.addresses) for count in counts]
    print(f"{'connections':>11} {'idle MiB':>9} {'RSS MiB':>8} {'cost MiB':>9} {'fds':>5} {'held':>5}")
    for row in rows:
        cost = row["rss_kib"] - row["idle_kib"]
        print(
            f"{row['count']:>11} {row['idle_kib'] / 1024:>9.1f} {row['rss_kib'] / 1024:>8.1f} "
            f"{cost / 1024:>9.1f} {row['fds']:>5} {row['held']:>5}"
        )
    first, last = rows[0], rows[-1]
    print(
        f"{last['count']} vs {first['count']} connections: RSS x{last['rss_kib'] / first['rss_kib']:.2f}, "
        f"cost x{(last['rss_kib'] - last['idle_kib']) / max(1, first['rss_kib'] - first['idle_kib']):.2f}, "
        f"held x{last['held'] / max(1, first['held']):.2f}"
    )


if __name__ == "__main__":
    main()

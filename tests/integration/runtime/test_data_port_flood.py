"""A stranger floods every TaskManager data port from the moment it listens, while the job starts
(issue 23, finding 3, on the data ports).

The job runs with `sluice.testing`: the real job master and TaskManagers, each TaskManager's data
port served by the real `Wire.serve` and its admission, over loopback. The attacker gets each data
port the moment it listens, before the TaskManager reports it to anyone, and fills it: silent
connections from eight loopback addresses, more than the port keeps pending in total, reopened as
they are dropped, and connections that answer the challenge with garbage. (Hooking the port's start
is what makes "before the job's own peers" certain; a stranger watching /proc gets there first only
sometimes.) A failure injected half way restarts the job, so the second attempt starts under the flood
too. The job must end FINISHED with its output exactly once, and its own data connections must never
have been dropped: admission makes room from the addresses holding the most.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import resource
import secrets
import selectors
import socket
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator
from typing import Any

import pytest

import sluice
from sluice.connectors import SequenceSource
from sluice.engine.network import DataServer
from sluice.testing import CollectingSink, FailingSource, run_job
from sluice.transport._admission import Admission, Pending

SOURCES = [f"127.0.0.{n}" for n in range(2, 10)]
"""Where the flood comes from: a stranger may bind any loopback address."""
HELD_PER_SOURCE = 24
"""Silent connections per address and port: under one address's bound (32), 192 over the port's (128)."""
N = 20_000


class _Flood:
    """Holds silent connections to every port handed to `attack`, reopening each one dropped, and
    sends garbage handshakes to them, until stopped."""

    def __init__(self) -> None:
        self.ports: list[int] = []
        self.opened: Counter[int] = Counter()
        self.dropped: Counter[int] = Counter()
        self.garbage: Counter[int] = Counter()
        self.evicted_peers: Counter[str] = Counter()
        """The addresses whose pending connections the ports' admission dropped to make room."""
        self._new: queue.Queue[tuple[socket.socket, int, str]] = queue.Queue()
        self._held: Counter[tuple[int, str]] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def attack(self, port: int) -> None:
        """Opens the silent connections to `port`, a few at a time: the listener's accept queue takes
        100, and a connection beyond it would wait a second for the kernel to retry its SYN."""
        self.ports.append(port)
        for _ in range(HELD_PER_SOURCE):
            for source in SOURCES:
                self._new.put((_connect(source, port), port, source))
            await asyncio.sleep(0.01)  # the listener (this TaskManager's loop) accepts them

    def __enter__(self) -> _Flood:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(20)

    def _run(self) -> None:
        with selectors.DefaultSelector() as held:
            try:
                while not self._stop.is_set():
                    self._register_new(held)
                    self._reap(held)
                    for port in list(self.ports):
                        self._send_garbage(port)
            finally:
                for key in list(held.get_map().values()):
                    key.fileobj.close()  # type: ignore[union-attr]

    def _register_new(self, held: selectors.BaseSelector) -> None:
        with contextlib.suppress(queue.Empty):
            while True:
                sock, port, source = self._new.get_nowait()
                held.register(sock, selectors.EVENT_READ, (port, source))
                self._held[port, source] += 1
                self.opened[port] += 1

    def _reap(self, held: selectors.BaseSelector) -> None:
        """Reads the challenges (left unanswered), closes what the listener dropped and opens another."""
        for key, _ in held.select(0.01):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                if sock.recv(4096):
                    continue
            except BlockingIOError:
                continue
            except OSError:
                pass
            port, source = key.data
            held.unregister(sock)
            sock.close()
            self._held[port, source] -= 1
            self.dropped[port] += 1
            with contextlib.suppress(OSError):  # the port is gone with its TaskManager
                self._new.put((_connect(source, port), port, source))

    def _send_garbage(self, port: int) -> None:
        """A connection that answers the challenge with random bytes, then goes."""
        with contextlib.suppress(OSError), socket.socket() as sock:
            sock.settimeout(0.05)
            sock.bind((secrets.choice(SOURCES), 0))
            sock.connect(("127.0.0.1", port))
            sock.sendall(secrets.token_bytes(64))
            self.garbage[port] += 1


def _connect(source: str, port: int) -> socket.socket:
    sock = socket.socket()
    sock.setblocking(False)
    sock.bind((source, 0))
    with contextlib.suppress(BlockingIOError):  # connecting: held all the same
        sock.connect(("127.0.0.1", port))
    return sock


@pytest.fixture
def flood(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Flood]:
    """Every data port, flooded as it starts listening and filled before its TaskManager goes on."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4096)), hard))
    start = DataServer.start

    async def start_flooded(self: DataServer, host: str) -> None:
        await start(self, host)
        await attacker.attack(self.port)
        await asyncio.sleep(0.2)  # the listener accepts the last of them; admission drops what is over

    monkeypatch.setattr(DataServer, "start", start_flooded)
    evict = Admission._evict_oldest

    def evict_seen(self: Admission, queue: OrderedDict[int, Pending]) -> None:
        attacker.evicted_peers[next(iter(queue.values())).peer] += 1
        evict(self, queue)

    monkeypatch.setattr(Admission, "_evict_oldest", evict_seen)
    with _Flood() as attacker:
        yield attacker
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_flood_on_every_data_port_from_its_start_does_not_keep_the_job_from_ending_once(
    flood: _Flood, caplog: pytest.LogCaptureFixture
) -> None:
    sink = CollectingSink()
    failing = FailingSource(SequenceSource(0, N, splits=2), fail_on=lambda n: n == N // 2)

    def build(env: sluice.StreamEnvironment) -> None:
        # rebalance: every record may cross to the other TaskManager, over a remote data channel.
        env.from_source(failing, uid="numbers").rebalance().map(lambda n: n * n, uid="square").sink_to(
            sink, uid="sink"
        )

    with caplog.at_level(logging.DEBUG, logger="sluice.transport.wire"):
        outcome: Any = run_job(
            build, "--parallelism", "2", "--checkpoint-interval", "100ms", "--restart-delay", "0s"
        )
    assert (outcome.state, outcome.exit_code) == ("FINISHED", 0), outcome.error
    assert sorted(sink.records()) == [n * n for n in range(N)]
    assert failing.failures_left() == 0, "the job restarted: a second start under the flood"
    # Each attempt's two data ports were flooded, and the flood was felt: the ports dropped silent
    # connections to make room, and refused the garbage.
    assert len(flood.ports) == 4, flood.ports
    assert all(flood.dropped[port] > 0 and flood.garbage[port] > 0 for port in flood.ports), (
        flood.opened,
        flood.dropped,
        flood.garbage,
    )
    wire = [r.getMessage() for r in caplog.records if r.name == "sluice.transport.wire"]
    assert any("refused a data connection" in line for line in wire)
    # The job's own connections (from 127.0.0.1) were never the ones dropped to make room. (A handshake
    # may still be cut short while an attempt ends and its ports close; the job retries it.)
    assert sum(flood.evicted_peers.values()) > 0 and "127.0.0.1" not in flood.evicted_peers, (
        flood.evicted_peers,
        wire,
    )

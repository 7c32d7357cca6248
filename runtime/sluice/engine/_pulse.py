"""The TaskManager's heartbeat: a thread of its own, on a control connection of its own.

The subtasks share one event loop, and user functions and sinks run on it: a map that takes seconds
or a commit stuck on slow object storage keeps the loop from doing anything else. Were the heartbeat
sent from that loop, such a TaskManager would look dead to the coordinator, which would restart the
job and, with the same slow storage, restart it again. So the heartbeat says what the coordinator needs
to know for failover: the process runs and can reach the coordinator. A SIGSTOP, a crash or a network
partition silences this thread too. A task stuck for good is caught by the checkpoint timeout instead,
as in Flink, whose heartbeats do not come from task threads either.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from sluice.transport.framing import frame
from sluice.transport.handshake import CONTROL
from sluice.transport.messages import Heartbeat, encode_message
from sluice.transport.wire import Wire

log = logging.getLogger(__name__)


class Pulse:
    """Sends a `Heartbeat` every `interval_s` until stopped or the connection breaks.

    `tm`, `pid` and `data_port` name the registered TaskManager this heartbeat belongs to, so that the
    coordinator never credits it to another attempt's TaskManager with the same index.
    """

    def __init__(
        self, wire: Wire, host: str, port: int, *, tm: int, pid: int, data_port: int, interval_s: float
    ) -> None:
        self._wire, self._host, self._port = wire, host, port
        self._beat = frame(
            encode_message(Heartbeat(tm, pid, data_port)),
            wire.max_frame_bytes,
        )
        self._interval_s = interval_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"sluice-heartbeat-{tm}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ends the thread within one interval; it is a daemon, so it never holds the process open."""
        self._stopped.set()

    def _run(self) -> None:
        try:
            asyncio.run(self._send())
        except Exception as err:  # the main connection's loss is what ends the TaskManager, not this
            if not self._stopped.is_set():
                log.warning("the heartbeat to %s:%d stopped: %s", self._host, self._port, err)

    async def _send(self) -> None:
        _, writer = await self._wire.open(self._host, self._port, CONTROL)
        try:
            while not self._stopped.is_set():
                writer.write(self._beat)
                await writer.drain()
                await asyncio.sleep(self._interval_s)
        finally:
            writer.close()

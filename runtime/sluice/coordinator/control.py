"""The coordinator's control port: TaskManagers register here and exchange control messages.

Every connection proves it holds the job's secret before its first frame is read (see
`sluice.transport.handshake`); messages are parsed into their types (`TO_COORDINATOR`). A TaskManager that
sends something malformed is disconnected, which the job master sees as a lost TaskManager.

Each TaskManager also opens a second connection on which a thread of its own sends a heartbeat every
half second (`sluice.engine._pulse`); every message on either connection counts as a sign of life. One
that sends nothing for the heartbeat timeout (stopped, crashed without its sockets closing, cut off by a
partition that TCP has not noticed yet) is disconnected, which the job master sees as a lost
TaskManager: a silent TaskManager must not hold a job forever. A TaskManager whose event loop is busy
(a slow user function, a sink waiting on storage) keeps heartbeating; a task stuck for good fails the
job over through the checkpoint timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping

from sluice.checkpoint.acknowledgement import Acknowledgement
from sluice.transport.framing import frame, read_payload
from sluice.transport.handshake import CONTROL
from sluice.transport.messages import (
    TASKMANAGER_REPORTS,
    Decline,
    Heartbeat,
    JobEnd,
    Message,
    MessageError,
    MetricsReport,
    Parser,
    Register,
    Shutdown,
    TaskReport,
    decode_message,
    encode_message,
)
from sluice.transport.secret import DEFAULT_MAX_FRAME_BYTES, JobSecret, TaskManagerLaunch, TlsMaterial
from sluice.transport.wire import Wire

log = logging.getLogger(__name__)
DEFAULT_HEARTBEAT_TIMEOUT_S = 10.0

Report = Register | Heartbeat | TaskReport | Decline | MetricsReport | Acknowledgement
"""A message a TaskManager sends."""
TO_COORDINATOR: Mapping[str, Parser[Report]] = {
    **TASKMANAGER_REPORTS,
    Acknowledgement.TYPE: Acknowledgement.from_json,
}


class TaskManagerLink:
    def __init__(
        self, index: int, host: str, data_port: int, pid: int, writer: asyncio.StreamWriter, max_frame: int
    ) -> None:
        self.index, self.host, self.data_port, self.pid = index, host, data_port, pid
        self.writer = writer
        self._max_frame = max_frame
        self.last_seen = time.monotonic()
        self.lost_reason: str | None = None
        """Why the coordinator dropped this link, when it did (else the connection broke)."""

    def send(self, message: Message) -> None:
        if not self.writer.is_closing():
            self.writer.write(frame(encode_message(message), self._max_frame))


class ControlServer:
    """Accepts TaskManager connections; hands every message and every lost link to the job master.

    It makes the job's secret: one per job, for every attempt, handed to TaskManagers by `launch()`.
    """

    def __init__(
        self,
        on_message: Callable[[TaskManagerLink, Report], None],
        on_lost: Callable[[TaskManagerLink, int], None],
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        tls: TlsMaterial | None = None,
        heartbeat_timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S,
    ) -> None:
        self.on_message = on_message
        self.on_lost = on_lost
        self.links: dict[int, TaskManagerLink] = {}
        self.registered = asyncio.Event()
        self.expected = 0
        self.attempt = 0
        self._server: asyncio.Server | None = None
        self._readers: set[asyncio.Task[None]] = set()
        # Links told to shut down, open until their TaskManager closes them (see `close_links`).
        self._shut_down: set[asyncio.StreamWriter] = set()
        self.address = ""
        self._secret = JobSecret.generate()
        self._max_frame = max_frame_bytes
        self._tls = tls
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self._watchdog: asyncio.Task[None] | None = None
        self._heartbeat_writers: set[asyncio.StreamWriter] = set()
        self.wire = Wire.build(self._secret, max_frame_bytes, tls)

    def launch(self) -> TaskManagerLaunch:
        """What a TaskManager of this job is started with (secret included: hand it to the host only)."""
        if not self.address:
            raise RuntimeError("the control port is not listening yet: start() it first")
        return TaskManagerLaunch(self.address, self._secret, self._max_frame, self._tls)

    async def start(self, host: str) -> str:
        self._server = await self.wire.serve(self._serve, host, CONTROL)
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"{host}:{port}"
        self._watchdog = asyncio.create_task(self._watch_heartbeats())
        return self.address

    async def _watch_heartbeats(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.heartbeat_timeout_s / 4))
            now = time.monotonic()
            for link in list(self.links.values()):
                silent = now - link.last_seen
                if silent > self.heartbeat_timeout_s and link.lost_reason is None:
                    link.lost_reason = (
                        f"TaskManager {link.index} (pid {link.pid}) sent nothing for {silent:.1f}s "
                        f"(heartbeat timeout {self.heartbeat_timeout_s:g}s)"
                    )
                    log.warning("%s: treating it as lost", link.lost_reason)
                    # Its reader sees the connection end and reports the link lost, as for a crash.
                    link.writer.transport.abort()

    def expect(self, count: int, attempt: int) -> None:
        self.links = {}
        self.expected = count
        self.attempt = attempt
        self.registered = asyncio.Event()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._readers.add(task)
        link: TaskManagerLink | None = None
        attempt = self.attempt
        try:
            hello = decode_message(await read_payload(reader, self._max_frame), TO_COORDINATOR)
            if isinstance(hello, Heartbeat):
                await self._serve_heartbeats(hello, reader, writer)
                return
            if not isinstance(hello, Register):
                raise MessageError(f"a TaskManager must register first, not send {hello.TYPE!r}")
            link = TaskManagerLink(hello.tm, hello.host, hello.data_port, hello.pid, writer, self._max_frame)
            self.links[link.index] = link
            if len(self.links) >= self.expected:
                self.registered.set()
            while True:
                payload = await read_payload(reader, self._max_frame)
                if self.links.get(link.index) is not link:
                    continue  # told to shut down (`close_links`): what it still says is for no attempt
                link.last_seen = time.monotonic()
                self.on_message(link, decode_message(payload, TO_COORDINATOR))
        except (MessageError, ConnectionError) as err:
            if not isinstance(err, ConnectionResetError | BrokenPipeError):
                log.warning(
                    "closed the control connection from %s: %s", writer.get_extra_info("peername"), err
                )
        except (asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._readers.discard(task)
            self._shut_down.discard(writer)
            if link is not None and self.links.get(link.index) is link:
                self.on_lost(link, attempt)
            writer.close()

    async def _serve_heartbeats(
        self, beat: Report, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """A heartbeat connection carries heartbeats only. One counts for the registered TaskManager
        it names (index, pid and data port), never for another attempt's TaskManager of that index."""
        self._heartbeat_writers.add(writer)
        try:
            while True:
                if not isinstance(beat, Heartbeat):
                    raise MessageError(f"a heartbeat connection carries heartbeats, not {beat.TYPE!r}")
                link = self.links.get(beat.tm)
                if link is not None and (link.pid, link.data_port) == (beat.pid, beat.data_port):
                    link.last_seen = time.monotonic()
                beat = decode_message(await read_payload(reader, self._max_frame), TO_COORDINATOR)
        finally:
            self._heartbeat_writers.discard(writer)

    def broadcast(self, message: Message) -> None:
        for link in self.links.values():
            link.send(message)

    async def close_links(self, job_ended: JobEnd | None = None) -> None:
        """Tells every TaskManager to shut down; `job_ended` (the latest completed checkpoint and the
        completed savepoints) when no attempt follows, so that sinks release what only a restore would."""
        links, self.links = list(self.links.values()), {}
        shutdown = Shutdown(job_ended)
        for link in links:
            with contextlib.suppress(Exception):
                link.send(shutdown)
                await link.writer.drain()
        # Each connection stays open until its TaskManager, having read the Shutdown, closes it (its
        # reader here then sees EOF and ends). Closed from this side, a TaskManager still busy with a
        # batch got EPIPE on its next report, and asyncio then fails its pending read with that error
        # before handing it the Shutdown already received: it never released its sinks' transactions
        # (tests/integration/runtime/test_job_end_releases_transactions.py, 1 run in about 30 under
        # load). `close` ends whatever a TaskManager leaves open.
        self._shut_down.update(link.writer for link in links)

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        await self.close_links()
        # Closing the transports ends each reader with EOF; cancelling readers inside asyncio's stream
        # callbacks would log spurious errors.
        for writer in [*self._shut_down, *self._heartbeat_writers]:
            writer.close()
        self._shut_down.clear()
        if self._server is not None:
            self._server.close()

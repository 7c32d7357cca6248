"""A stranger floods the coordinator's control port with silent connections while a TaskManager dies
(issue 23, finding 3).

On the main of the issue, the flood held every pending-handshake slot, the restarted TaskManagers were
refused ("the listener closed the connection during the handshake"), did not retry, and the job ended
FAILED; each refusal logged a line. Now the job must restart, finish with every row exactly once, and
log refusals at a bounded rate.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import threading
import time
import urllib.parse
from pathlib import Path

from testkit.checkpoints import GENERATED_COUNTS, generated_counts_options
from testkit.jobs import SluiceJob
from testkit.outputs import assert_same_output, keyed_window_reference, read_output
from testkit.probe import listening_ports

HELD = 300
"""Silent connections the attacker keeps open: more than a port's bound of pending handshakes."""


class _SilentFlood:
    """Keeps `HELD` connections to a port open and silent, opening a new one for each that is dropped."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.opened = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _SilentFlood:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        with selectors.DefaultSelector() as held:
            try:
                while not self._stop.is_set():
                    while len(held.get_map()) < HELD and not self._stop.is_set():
                        try:
                            conn = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                        except ConnectionRefusedError:
                            return  # the coordinator has exited
                        conn.setblocking(False)
                        held.register(conn, selectors.EVENT_READ)
                        self.opened += 1
                    for key, _ in held.select(0.05):
                        ready = key.fileobj
                        assert isinstance(ready, socket.socket)
                        try:
                            if ready.recv(4096):
                                continue  # the challenge: left unanswered
                        except OSError:
                            pass
                        held.unregister(ready)  # dropped by the port: open another
                        ready.close()
                    time.sleep(0.01)
            finally:
                for key in list(held.get_map().values()):
                    key.fileobj.close()  # type: ignore[union-attr]


def test_a_silent_flood_on_the_control_port_does_not_keep_restarted_taskmanagers_out(tmp_path: Path) -> None:
    out, count = tmp_path / "out", 64_000
    job = SluiceJob(
        GENERATED_COUNTS,
        *generated_counts_options(out, tmp_path / "chk", count, "flooded-control-port"),
        *("--restart-delay", "100ms"),
    )
    try:
        job.wait_checkpoints(1)
        rest_port = urllib.parse.urlsplit(job.rest_url()).port
        (control_port,) = listening_ports(job.process.pid) - {rest_port}
        started = time.monotonic()
        with _SilentFlood(control_port) as flood:
            job.wait_until(lambda: flood.opened >= HELD, 30, "the flood to hold its connections")
            os.kill(job.taskmanager_pids()[0], signal.SIGKILL)
            view = job.wait_until(
                lambda: (v := job.get("/v1/job"))["restarts"] >= 1 and v["state"] == "RUNNING" and v,
                60,
                "a restart",
            )
            job.wait_checkpoints(job.completed_checkpoints() + 2)
            code = job.wait(180)
            flooded_s = time.monotonic() - started
    finally:
        job.kill()
    assert view["restarts"] >= 1
    assert code == 0, job.stderr
    assert_same_output(read_output(f"file://{out}"), keyed_window_reference(count, 50, 1000, 10))
    refusals = [line for line in job.stderr.splitlines() if "refused a control connection" in line]
    # One line per 10 s interval at most, however many connections were dropped.
    assert 1 <= len(refusals) <= flooded_s / 10 + 2, (len(refusals), flood.opened, flooded_s)
    assert flood.opened > HELD, "the port dropped silent connections to make room"

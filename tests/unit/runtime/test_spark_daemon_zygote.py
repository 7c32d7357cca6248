"""The daemon zygote (hosts/spark/_zygote.py) and the module Spark starts (sluice_spark_daemon).

No JVM: the test plays Spark's part. It starts `python -m sluice_spark_daemon pyspark.worker` with the
environment a daemon of Spark's gets, reads the port PySpark's daemon writes to its stdout, and
authenticates with the worker secret, as Spark's PythonWorkerFactory does. The zygote is the real one,
PySpark's daemon loop is PySpark's. Then it attacks the zygote's socket with what a stranger could send.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.hosts.spark._zygote import Zygote, _peer_refusal, start_zygote
from sluice_spark_daemon import SOCKET_ENV

SECRET = "worker-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    log = tmp_path_factory.mktemp("zygote") / "zygote.log"
    with open(log, "ab") as output:
        started = start_zygote(output)
    assert started is not None
    try:
        yield started
    finally:
        started.close()


def _spark_env(zygote: Zygote, **extra: str) -> dict[str, str]:
    env = dict(os.environ)  # the JVM's, which is the driver's, and Spark's daemon inherits it
    env.update(zygote.environ)
    env.update({"PYTHONHASHSEED": "0", "PYTHON_WORKER_FACTORY_SECRET": SECRET, "PYTHONUNBUFFERED": "YES"})
    env.update(extra)
    return env


def _start_daemon(env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen[bytes], int]:
    """As Spark starts its daemon: its port is the first 4 bytes it writes to stdout."""
    shim = subprocess.Popen(
        [sys.executable, "-m", "sluice_spark_daemon", "pyspark.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    assert shim.stdout is not None
    head = shim.stdout.read(4)
    assert len(head) == 4, shim.stderr.read() if shim.stderr else b""
    return shim, struct.unpack(">i", head)[0]


def _authenticates(port: int, secret: str) -> bool:
    """PySpark's worker handshake: the forked worker's pid, then the secret (length-prefixed UTF-8),
    answered "ok" or "err"."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as worker:
        _read(worker, 4)
        encoded = secret.encode()
        worker.sendall(struct.pack(">i", len(encoded)) + encoded)
        (size,) = struct.unpack(">i", _read(worker, 4))
        return _read(worker, size) == b"ok"


def _read(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        assert chunk, "the peer closed the connection"
        data += chunk
    return data


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def _wait_exit(process: subprocess.Popen[bytes]) -> int:
    return process.wait(timeout=10)


def test_a_daemon_handed_over_runs_as_sparks_own_with_its_secret_and_directory(
    zygote: Zygote, tmp_path: Path
) -> None:
    before = set(_children(zygote.process.pid))
    shim, port = _start_daemon(_spark_env(zygote), tmp_path)
    try:
        (daemon,) = set(_children(zygote.process.pid)) - before
        assert _authenticates(port, SECRET), "the forked daemon holds the secret of Spark's environment"
        assert not _authenticates(port, "a guess"), "and refuses any other"
        assert Path(f"/proc/{daemon}/cwd").resolve() == tmp_path.resolve()
        assert shim.poll() is None, "the process Spark started stays while its daemon runs"
    finally:
        assert shim.stdin is not None
        shim.stdin.close()  # how Spark tells its daemon to end
    assert _wait_exit(shim) == 0
    _until_gone(daemon)
    stderr = shim.stderr.read() if shim.stderr else b""
    assert b"refused" not in stderr and b"no Python daemon zygote" not in stderr, stderr


def test_sigterm_to_the_process_spark_started_ends_the_daemon(zygote: Zygote, tmp_path: Path) -> None:
    before = set(_children(zygote.process.pid))
    shim, _port = _start_daemon(_spark_env(zygote), tmp_path)
    (daemon,) = set(_children(zygote.process.pid)) - before
    shim.send_signal(signal.SIGTERM)  # Spark's stopDaemon: Process.destroy()
    _wait_exit(shim)
    _until_gone(daemon)


def test_other_interpreter_settings_are_refused_by_name_and_spark_gets_a_daemon_anyway(
    zygote: Zygote, tmp_path: Path
) -> None:
    before = set(_children(zygote.process.pid))
    shim, port = _start_daemon(_spark_env(zygote, PYTHONHASHSEED="7"), tmp_path)
    try:
        assert set(_children(zygote.process.pid)) == before, "nothing forked for a refused request"
        assert _authenticates(port, SECRET), "the daemon started the long way serves all the same"
    finally:
        assert shim.stdin is not None
        shim.stdin.close()
    _wait_exit(shim)
    stderr = shim.stderr.read().decode() if shim.stderr else ""
    assert "PYTHONHASHSEED" in stderr and "refused" in stderr, stderr
    assert SECRET not in stderr, "the refusal names variables, never the environment's values"


def test_without_a_zygote_the_daemon_starts_itself(zygote: Zygote, tmp_path: Path) -> None:
    env = _spark_env(zygote)
    env[SOCKET_ENV] = str(tmp_path / "nobody-listens.sock")
    stderr = _a_daemon_serves(env, tmp_path)
    assert "no Python daemon zygote at" in stderr, "it looked for the zygote first, and says why not"


def test_only_this_user_can_reach_the_zygote(zygote: Zygote) -> None:
    mode = os.stat(zygote.directory).st_mode
    assert stat.S_IMODE(mode) == 0o700, oct(mode)


def test_a_peer_of_another_user_is_refused() -> None:
    """SO_PEERCRED of a connection from another uid (a fault this test cannot provoke for real: the
    directory already keeps other users out)."""

    class Stranger:
        def getsockopt(self, *_args: Any) -> bytes:
            return struct.pack("3i", 4242, os.getuid() + 1, 0)

    refusal = _peer_refusal(Stranger())  # type: ignore[arg-type]
    assert refusal is not None and "uid" in refusal


@pytest.mark.parametrize(
    ("body", "fds", "why"),
    [
        (b"not json", 3, "JSONDecodeError"),
        (json.dumps([1, 2]).encode(), 3, "not a JSON object"),
        (json.dumps({"env": {}, "argv": ["x"], "path": [], "cwd": "/"}).encode(), 0, "descriptor"),
        (json.dumps({"env": {"A": 1}, "argv": ["x"], "path": [], "cwd": "/"}).encode(), 3, "env"),
        (json.dumps({"env": {}, "argv": [], "path": [], "cwd": "/"}).encode(), 3, "argv"),
        (json.dumps({"env": {}, "argv": ["x"], "path": "/tmp", "cwd": "/"}).encode(), 3, "path"),
    ],
)
def test_malformed_requests_are_refused_and_the_zygote_serves_on(
    zygote: Zygote, tmp_path: Path, body: bytes, fds: int, why: str
) -> None:
    before = set(_children(zygote.process.pid))
    answer = _raw_request(zygote, struct.pack(">I", len(body)), body, fds)
    assert answer.startswith(b"no ") and why.encode() in answer, answer
    assert set(_children(zygote.process.pid)) == before, "nothing was forked"
    _serves_on(zygote, tmp_path)


def test_a_refused_request_leaves_none_of_its_descriptors_in_the_zygote(zygote: Zygote) -> None:
    """Descriptors that arrived with a bad request would live on in every later daemon and worker."""
    fd_dir = Path(f"/proc/{zygote.process.pid}/fd")
    _serves_on(zygote, Path("/tmp"))  # the zygote's imports are done: its descriptors are settled
    before = len(list(fd_dir.iterdir()))
    for head, body in ((struct.pack(">I", 1 << 30), b""), (struct.pack(">I", 8), b"not json")):
        assert _raw_request(zygote, head, body, 3).startswith(b"no ")
    # Requests are served one at a time: once a later one is answered, the refused ones are closed.
    _serves_on(zygote, Path("/tmp"))
    assert len(list(fd_dir.iterdir())) == before


def test_deeply_nested_json_is_refused_and_the_zygote_serves_on(zygote: Zygote, tmp_path: Path) -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    answer = _raw_request(zygote, struct.pack(">I", len(body)), body, 3)
    assert answer.startswith(b"no "), answer
    _serves_on(zygote, tmp_path)


def test_a_zygote_served_by_another_user_gets_nothing() -> None:
    """SO_PEERCRED of the listening side, as the process Spark started sees it (a stranger who took over
    a path whose zygote has ended): a fault this test cannot provoke for real."""
    from sluice_spark_daemon import _stranger

    class Stranger:
        def getsockopt(self, *_args: Any) -> bytes:
            return struct.pack("3i", 4242, os.getuid() + 1, 0)

    assert "uid" in _stranger(Stranger())  # type: ignore[arg-type]


def test_an_oversized_request_is_refused_before_it_is_read(zygote: Zygote, tmp_path: Path) -> None:
    answer = _raw_request(zygote, struct.pack(">I", 1 << 30), b"", 3)
    assert answer.startswith(b"no ") and b"over the limit" in answer, answer
    _serves_on(zygote, tmp_path)


def test_the_zygote_ends_with_its_driver_and_leaves_no_directory(tmp_path: Path) -> None:
    with open(tmp_path / "zygote.log", "ab") as output:
        own = start_zygote(output)
    assert own is not None
    socket_path = Path(own.environ[SOCKET_ENV])
    deadline = time.monotonic() + 30
    while not socket_path.exists():
        assert time.monotonic() < deadline, "the zygote never listened"
        time.sleep(0.02)
    own.close()  # the driver's end of its stdin closes: what the driver's exit does too
    assert own.process.returncode == 0
    assert not Path(own.directory).exists()


def test_a_temporary_directory_too_long_for_a_socket_puts_it_under_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A socket's address holds 108 bytes: a long $TMPDIR (pytest's own, say) must not cost the job."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    with open(tmp_path / "zygote.log", "ab") as output:
        own = start_zygote(output)
    assert own is not None
    try:
        assert Path(own.directory).parent == Path("/tmp")
        assert stat.S_IMODE(os.stat(own.directory).st_mode) == 0o700
    finally:
        own.close()


def _raw_request(zygote: Zygote, head: bytes, body: bytes, fds: int) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(zygote.environ[SOCKET_ENV])
        with open(os.devnull, "rb") as null:
            socket.send_fds(conn, [head], [null.fileno()] * fds)
            if body:
                conn.sendall(body)
            return conn.makefile("rb").readline()


def _serves_on(zygote: Zygote, tmp_path: Path) -> None:
    _a_daemon_serves(_spark_env(zygote), tmp_path)


def _a_daemon_serves(env: dict[str, str], cwd: Path) -> str:
    """Starts a daemon as Spark does, checks that it authenticates a worker, ends it; its stderr."""
    shim, port = _start_daemon(env, cwd)
    try:
        assert _authenticates(port, SECRET)
    finally:
        assert shim.stdin is not None
        shim.stdin.close()
    _wait_exit(shim)
    return shim.stderr.read().decode() if shim.stderr else ""


def _until_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists():
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            return
        assert time.monotonic() < deadline, f"daemon {pid} still runs"
        time.sleep(0.02)

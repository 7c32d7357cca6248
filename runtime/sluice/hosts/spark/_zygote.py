"""PySpark's worker daemon, its imports done while the driver JVM starts (local Spark only).

Spark starts an executor's Python daemon on the executor's first Python task: an interpreter that
imports PySpark's worker and the TaskManager (`_daemon.py`), 0.2-0.3 s of one core, all of it inside
the job's first attempt. On `local[N]` the driver knows, before the JVM exists, the interpreter and the
modules that daemon will need. So `start_spark` starts this zygote beside the JVM: it imports them
while the JVM starts, then waits. When Spark starts the daemon, what it starts (`sluice_spark_daemon`) hands
its standard streams and its environment to the zygote instead of importing anything itself; the zygote
forks, and the child becomes the daemon, with Spark's streams, Spark's environment (its worker secret
among them) and Spark's argv and import path. Spark talks to it as to any daemon: the child writes its
port to Spark, forks the workers, kills the ones Spark names, and ends when Spark closes its input.

The order of one hand-over, as `sluice_spark_daemon.hand_over` and `serve` below do it:
1. the driver binds a Unix socket in a directory only this user can enter and starts the zygote with
   it (a daemon started early waits in the socket's queue instead of being refused); the zygote imports;
2. `sluice_spark_daemon`, started by Spark, connects, checks that the zygote is this user's
   (SO_PEERCRED), and sends its fds 0, 1 and 2 and one JSON request: argv, sys.path, the working
   directory, its environment and its interpreter;
3. the zygote checks the peer's uid (SO_PEERCRED) and the request, and forks;
4. the child takes the streams, the environment, argv, path and directory, answers "ok" with a pidfd of
   itself, and runs PySpark's daemon loop; the zygote closes its copies and waits for the next request;
5. `sluice_spark_daemon` stays until the child has ended (Spark watches its process), passing SIGTERM on.
A refusal ("no" and why) leaves `sluice_spark_daemon` to start the daemon itself, as without a
zygote: so does a request whose interpreter or start-up settings differ (a PYTHONHASHSEED, say, which
only an interpreter's start sets), or a zygote that is gone. The zygote ends when the driver does (its
stdin, the driver's pipe, reaches end of file).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import json
import logging
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from typing import IO, Any, TypeGuard

from sluice.hosts.spark._daemon import import_ahead
from sluice.hosts.spark._worker_path import drop_spark_zips
from sluice_spark_daemon import MAX_REQUEST_BYTES, SERVE_ENV, SOCKET_ENV, interpreter, interpreter_settings

_SOCKET_NAME = "daemon.sock"
log = logging.getLogger(__name__)


class Zygote:
    """The driver's handle on a running zygote: `environ` goes to the driver JVM's environment."""

    def __init__(self, process: subprocess.Popen[bytes], directory: str) -> None:
        self.process = process
        self.directory = directory

    @property
    def environ(self) -> dict[str, str]:
        return {SOCKET_ENV: os.path.join(self.directory, _SOCKET_NAME)}

    def close(self) -> None:
        """Ends the zygote (daemons it already forked keep running until Spark stops them)."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_zygote(log: IO[bytes] | int) -> Zygote | None:
    """Starts the zygote (`python -m sluice_spark_daemon pyspark.worker`, as Spark starts its daemon, so
    that TaskManagers forked from it show the same command line); its output goes to `log`. None where
    no socket can be made for it (Spark then starts its daemon the long way; `SparkHost`'s warm-up
    starts it early instead).

    The socket listens before the zygote's interpreter runs (it inherits it): a daemon Spark starts at
    once is queued until the zygote accepts, never refused for being early."""
    listener, directory = _listen()
    if listener is None:
        return None
    with listener:
        env = dict(os.environ)
        env[SERVE_ENV] = f"{listener.fileno()}:{listener.getsockname()}"
        env.pop(SOCKET_ENV, None)
        # PySpark gives its Python workers PYTHONHASHSEED (0 unless the driver's environment says): the
        # zygote gets the seed a daemon of Spark's would get, or every request would be refused.
        env["PYTHONHASHSEED"] = os.environ.get("PYTHONHASHSEED", "0")
        process = subprocess.Popen(
            [sys.executable, "-m", "sluice_spark_daemon", "pyspark.worker"],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=log,
            env=env,
            pass_fds=(listener.fileno(),),
        )
    return Zygote(process, directory)


def _listen() -> tuple[socket.socket | None, str]:
    """A listening Unix socket in a new 0700 directory (mkdtemp's) under $TMPDIR, or under /tmp where
    $TMPDIR is too long a path for a socket's address (108 bytes on Linux)."""
    for parent in dict.fromkeys([tempfile.gettempdir(), "/tmp"]):
        directory = ""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            directory = tempfile.mkdtemp(prefix="sluice-spark-daemon-", dir=parent)
            listener.bind(os.path.join(directory, _SOCKET_NAME))
            listener.listen(8)
            return listener, directory
        except OSError as err:
            listener.close()
            if directory:
                shutil.rmtree(directory, ignore_errors=True)
            log.info("no Python daemon zygote under %s: %s", parent, err)
    return None, ""


def serve_here() -> None:
    """`python -m sluice_spark_daemon` started by `start_zygote`: serves at the path it was given."""
    fd, _, path = os.environ.pop(SERVE_ENV).partition(":")
    drop_spark_zips(sys.path, sys.path_importer_cache)
    serve(socket.socket(fileno=int(fd)), path, import_ahead)


def serve(listener: socket.socket, path: str, prepare: Any) -> None:
    """The zygote's life: call `prepare()` (the imports), then fork a daemon for each request accepted
    on `listener` (bound at `path`) until stdin reaches end of file. Never returns in a forked child."""
    # A terminal's Ctrl-C reaches the driver's whole process group; the driver decides, not the zygote.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # forked daemons are reaped by the kernel
    try:
        prepare()
        gc.collect()
        gc.freeze()
        poller = select.poll()
        poller.register(0, select.POLLIN)
        poller.register(listener, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if 0 in ready and not os.read(0, 4096):
                return  # the driver is gone, or closed us
            if listener.fileno() in ready:
                connection, _ = listener.accept()
                with connection:
                    _serve_one(connection, listener)
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(path)
            os.rmdir(os.path.dirname(path))


def _serve_one(connection: socket.socket, listener: socket.socket) -> None:
    fds: list[int] = []
    try:
        connection.settimeout(10)
        refusal = _peer_refusal(connection)
        request: dict[str, Any] = {}
        if refusal is None:
            request = _read_request(connection, fds)
            refusal = _request_refusal(request, fds)
        if refusal is not None:
            _answer(connection, f"no {refusal}")
            return
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # or the child would write the zygote's buffered output a second time
        if os.fork() == 0:
            _become_daemon(connection, listener, request, fds)  # never returns
    except Exception as err:  # a stranger's request (deeply nested JSON, say) must not end the zygote
        with contextlib.suppress(OSError):
            _answer(connection, f"no {type(err).__name__}: {err}")
    finally:
        for fd in fds:
            os.close(fd)


def _peer_refusal(connection: socket.socket) -> str | None:
    creds = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return None if uid == os.getuid() else f"peer uid {uid} is not this user's ({os.getuid()})"


def _read_request(connection: socket.socket, fds: list[int]) -> dict[str, Any]:
    """The request; the descriptors that came with it go into `fds` first, so the caller closes them
    whatever is wrong with the rest."""
    head, received, _flags, _address = socket.recv_fds(connection, 4, 3)
    fds.extend(received)
    if len(head) != 4:
        raise ValueError("the request ended before its length")
    (size,) = struct.unpack(">I", head)
    if size > MAX_REQUEST_BYTES:
        raise ValueError(f"a request of {size} bytes is over the limit of {MAX_REQUEST_BYTES}")
    body = b""
    while len(body) < size:
        chunk = connection.recv(size - len(body))
        if not chunk:
            raise ValueError("the request ended early")
        body += chunk
    request = json.loads(body)
    if not isinstance(request, dict):
        raise ValueError("the request is not a JSON object")
    return request


def _strings(value: Any) -> TypeGuard[dict[str, str]]:
    return isinstance(value, dict) and all(
        isinstance(key, str) and isinstance(item, str) for key, item in value.items()
    )


def _request_refusal(request: dict[str, Any], fds: list[int]) -> str | None:
    if len(fds) != 3:
        return f"expected the daemon's stdin, stdout and stderr, got {len(fds)} descriptor(s)"
    env, argv, path, cwd, theirs = (request.get(k) for k in ("env", "argv", "path", "cwd", "interpreter"))
    if not _strings(env):
        return "env must be an object of strings"
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        return "argv must be a list of strings"
    if not (isinstance(path, list) and all(isinstance(p, str) for p in path)):
        return "path must be a list of strings"
    if not isinstance(cwd, str):
        return "cwd must be a string"
    if not _strings(theirs):
        return "interpreter must be an object of strings"
    ours = {**interpreter_settings(os.environ), **interpreter()}
    theirs = {**interpreter_settings(env), **theirs}
    differ = sorted(key for key in ours.keys() | theirs.keys() if ours.get(key) != theirs.get(key))
    if differ:
        # Names only: the request's environment carries Spark's worker secret, and answers get logged.
        return f"the interpreter settings {', '.join(differ)} differ from the zygote's"
    return None


def _answer(connection: socket.socket, text: str, fds: list[int] | None = None) -> None:
    socket.send_fds(connection, [text.encode()[:4096] + b"\n"], fds or [])


def _become_daemon(
    connection: socket.socket, listener: socket.socket, request: dict[str, Any], fds: list[int]
) -> None:
    """In the forked child: take the request's streams and settings, then run PySpark's daemon loop."""
    code = 1
    try:
        listener.close()
        # As in a daemon the JVM starts: PySpark's gateway starts the JVM with SIGINT ignored.
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        fds.clear()
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.argv[:] = request["argv"]
        sys.path[:] = request["path"]
        sys.path_importer_cache.clear()
        drop_spark_zips(sys.path, sys.path_importer_cache)
        importlib.invalidate_caches()
        # Spark starts its daemon with PYTHONUNBUFFERED, and PySpark's workers end with os._exit: what a
        # worker prints must not wait in a buffer.
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
        # The pidfd lets the process Spark started wait for this one and signal it, with no pid reuse.
        pidfd = os.pidfd_open(os.getpid())
        _answer(connection, f"ok {os.getpid()}", [pidfd])
        os.close(pidfd)
        connection.close()
        from pyspark.daemon import manager

        manager()
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException as err:  # the child must never return into the zygote's loop
        with contextlib.suppress(OSError):
            _answer(connection, f"no {type(err).__name__}: {err}")
        with contextlib.suppress(Exception):
            print(f"sluice: the forked PySpark daemon failed: {err!r}", file=sys.stderr, flush=True)
    finally:
        os._exit(code)

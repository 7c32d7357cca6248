"""The module Spark starts as its Python worker daemon (`spark.python.daemon.module`).

On local Spark the driver has a daemon's imports done already, in a zygote beside the driver JVM
(`sluice.hosts.spark._zygote`, where the hand-over's steps are written down): started by Spark, this
module hands its standard streams and environment over to the zygote, which forks the daemon. Without a
zygote (on Kubernetes, or when it refuses) it starts the daemon itself (`sluice.hosts.spark._daemon`).

It is a package of its own, outside `sluice`, so that handing over imports nothing but the standard
library: importing anything under `sluice` first imports the `sluice` package, 0.1 s of a core.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys
from collections.abc import Mapping

SOCKET_ENV = "SLUICE_SPARK_ZYGOTE"
"""Where the zygote listens: set in the driver JVM's environment, which Spark's daemons inherit."""

SERVE_ENV = "SLUICE_SPARK_ZYGOTE_SERVE"
"""Tells this module to serve as the zygote, listening at this path."""

MAX_REQUEST_BYTES = 1 << 20

# Read once, at a process's start (Python's documentation, "Environment variables"; the C library's
# locale and the dynamic loader): a forked daemon keeps the zygote's, so a request must name the same.
# PYTHONPATH and PYTHONUNBUFFERED are not among them: the forked daemon applies those itself.
_READ_AT_START = (
    "PYTHONHASHSEED",
    "PYTHONOPTIMIZE",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONPYCACHEPREFIX",
    "PYTHONSAFEPATH",
    "PYTHONHOME",
    "PYTHONPLATLIBDIR",
    "PYTHONNOUSERSITE",
    "PYTHONUSERBASE",
    "PYTHONIOENCODING",
    "PYTHONUTF8",
    "PYTHONCOERCECLOCALE",
    "PYTHONWARNINGS",
    "PYTHONDEVMODE",
    "PYTHONMALLOC",
    "PYTHONMALLOCSTATS",
    "PYTHONINTMAXSTRDIGITS",
    "PYTHONFAULTHANDLER",
    "PYTHONTRACEMALLOC",
    "PYTHONNODEBUGRANGES",
    "PYTHONPROFILEIMPORTTIME",
    "PYTHONVERBOSE",
    "PYTHONDEBUG",
    "PYTHONCASEOK",
    "PYTHONEXECUTABLE",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
)


def interpreter_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` that a process reads at its start and keeps (PYTHONHASHSEED, the
    locale, the loader's paths, ...)."""
    return {key: environ[key] for key in _READ_AT_START if key in environ}


def interpreter() -> dict[str, str]:
    """This interpreter: Spark may start its daemon with another one (PYSPARK_PYTHON,
    spark.pyspark.python) than the driver's, which the zygote runs."""
    return {"executable": sys.executable, "version": sys.version, "prefix": sys.prefix}


def hand_over(path: str) -> bool:
    """Has the zygote at `path` fork a daemon with this process's streams and settings, then waits
    until that daemon has ended (passing SIGTERM on to it). False, with the reason on stderr, when
    there is no zygote or it refused: then this process starts the daemon itself."""
    # Spark stops its daemon with SIGTERM: one that comes before the daemon's pid is known is held back
    # until it can be passed on (or, when there is no hand-over, until this process acts on it itself).
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        daemon = _request(path)
        if daemon is None:
            return False
        signal.signal(signal.SIGTERM, lambda signum, _frame: _pass_on(daemon, signum))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    try:
        poller = select.poll()
        poller.register(daemon, select.POLLIN)  # a pidfd is readable once its process has ended
        while not poller.poll():
            pass
    finally:
        os.close(daemon)
    return True


def _request(path: str) -> int | None:
    """The forked daemon's pidfd, or None (the reason on stderr)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            # A zygote still importing accepts once it is done: waiting for it is still the shorter way.
            connection.settimeout(30)
            connection.connect(path)
            # Only to this user's own zygote: the request carries Spark's streams and its environment,
            # secrets included, and a stranger could have taken over a path whose zygote has ended.
            stranger = _stranger(connection)
            if stranger:
                print(f"sluice: not handing the daemon to {path}: {stranger}", file=sys.stderr)
                return None
            request = json.dumps(
                {
                    "env": dict(os.environ),
                    "argv": sys.argv,
                    "path": sys.path,
                    "cwd": os.getcwd(),
                    "interpreter": interpreter(),
                }
            ).encode()
            socket.send_fds(connection, [struct.pack(">I", len(request))], [0, 1, 2])
            connection.sendall(request)
            answer, fds, _flags, _address = socket.recv_fds(connection, 4096, 1)
    except OSError as err:
        print(f"sluice: no Python daemon zygote at {path} ({err}): starting the daemon", file=sys.stderr)
        return None
    text = answer.decode(errors="replace").strip()
    if text.startswith("ok") and len(fds) == 1:
        return fds[0]
    for fd in fds:
        os.close(fd)
    refusal = text or "no answer"
    print(f"sluice: the daemon zygote refused ({refusal}): starting the daemon", file=sys.stderr)
    return None


def _stranger(connection: socket.socket) -> str:
    creds = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return "" if uid == os.getuid() else f"it is served by uid {uid}, not this user ({os.getuid()})"


def _pass_on(daemon: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        signal.pidfd_send_signal(daemon, signum)

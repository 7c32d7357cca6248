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

# Read once, at an interpreter's start (Python's documentation, "Environment variables"): a forked daemon
# keeps the zygote's, so a request must name the same. PYTHONPATH and PYTHONUNBUFFERED are not among
# them: the forked daemon applies those itself.
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
)


def interpreter_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` that an interpreter reads at its start (PYTHONHASHSEED, ...)."""
    return {key: environ[key] for key in _READ_AT_START if key in environ}


def hand_over(path: str) -> bool:
    """Has the zygote at `path` fork a daemon with this process's streams and settings, then waits
    until that daemon has ended (passing SIGTERM on to it). False, with the reason on stderr, when
    there is no zygote or it refused: then this process starts the daemon itself."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            # A zygote still importing accepts once it is done: waiting for it is still the shorter way.
            connection.settimeout(30)
            connection.connect(path)
            request = json.dumps(
                {"env": dict(os.environ), "argv": sys.argv, "path": sys.path, "cwd": os.getcwd()}
            ).encode()
            socket.send_fds(connection, [struct.pack(">I", len(request))], [0, 1, 2])
            connection.sendall(request)
            answer = connection.makefile("rb").readline(4096).decode(errors="replace").strip()
    except OSError as err:
        print(f"sluice: no Python daemon zygote at {path} ({err}): starting the daemon", file=sys.stderr)
        return False
    verdict, _, detail = answer.partition(" ")
    if verdict != "ok" or not detail.isdigit():
        refusal = answer or "no answer"
        print(f"sluice: the daemon zygote refused ({refusal}): starting the daemon", file=sys.stderr)
        return False
    _wait_ended(int(detail))
    return True


def _wait_ended(pid: int) -> None:
    """Until process `pid` (the forked daemon, not a child of ours) has ended. Spark watches this process
    as its daemon and stops it with SIGTERM: the daemon gets that signal."""

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    signal.signal(signal.SIGTERM, forward)
    try:
        ended = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    poller = select.poll()
    poller.register(ended, select.POLLIN)
    while not poller.poll():
        pass

"""Checks `sluice run` makes before anything starts (Spark, TaskManagers, the coordinator).

A REST port another process holds, or a checkpoint directory nobody may write, would otherwise be found
seconds later: after a Spark driver started, or after every attempt failed writing its first checkpoint
and the job result store retried for half a minute. Found here they are bad arguments, said in one line.
"""

from __future__ import annotations

import errno
import socket
import uuid

from sluice._fs import filesystem, join, make_dirs


class PreflightError(Exception):
    """An argument that cannot work; the message says what is wrong and how to fix it."""


def probe_rest_port(host: str, port: int) -> None:
    """Binds HOST:PORT for a moment, as the REST API will (port 0 always works)."""
    if port <= 0:
        return
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise PreflightError(
            f"--rest-host {host!r} is not an address of this machine: {err.strerror}"
        ) from err
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            # As the REST server binds: a port in TIME_WAIT from an earlier run is free to use.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as err:
                raise PreflightError(_bind_problem(host, port, err)) from err


def _bind_problem(host: str, port: int, err: OSError) -> str:
    where = f"{host}:{port}"
    if err.errno == errno.EADDRINUSE:
        return (
            f"the REST port {where} is in use (another job's REST API?): give --rest-port another port, "
            "or --rest-port 0 to pick a free one"
        )
    if err.errno == errno.EACCES:
        return f"may not listen on {where} (ports below 1024 need privileges): give --rest-port 1024 or above"
    if err.errno == errno.EADDRNOTAVAIL:
        return (
            f"--rest-host {host} is not an address of this machine: give one of its addresses, or 127.0.0.1"
        )
    return f"cannot listen on {where}: {err.strerror or err}"


def probe_writable(uri: str, flag: str) -> None:
    """Creates the directory `uri` (where directories exist), writes a small file in it and removes it."""
    try:
        fs, path = filesystem(uri)
    except Exception as err:  # an unknown protocol, a missing fsspec driver: fsspec's own words
        raise PreflightError(f"{flag} {uri}: not a usable URI: {type(err).__name__}: {err}") from err
    probe = join(path, f".sluice-write-probe-{uuid.uuid4().hex}")
    try:
        make_dirs(fs, path)
        with fs.open(probe, "wb") as handle:
            handle.write(b"sluice checks that it may write here; this file is removed at once\n")
        fs.rm(probe)
    except Exception as err:
        raise PreflightError(
            f"{flag} {uri}: cannot write there ({type(err).__name__}: {err}); give a directory this "
            "user may create and write"
        ) from err

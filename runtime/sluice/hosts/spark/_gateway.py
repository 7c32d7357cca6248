"""Launching the Spark driver JVM and connecting PySpark's gateway to it.

PySpark's `launch_gateway` starts `spark-submit`, then looks every 0.1 s for the file in which the
JVM's gateway server writes its port and secret: it saw that file 54-75 ms after the JVM had written it
in every timeline of `sluice run` on the default host (bench/README.md, issue 30, "Session 22"), on the
way to the first record. This module starts the JVM as PySpark does (the same command, environment and
standard input, SIGINT ignored) and looks every 5 ms. PySpark then connects to that gateway through
the variables it reads for a gateway that is already running (PYSPARK_GATEWAY_PORT and
PYSPARK_GATEWAY_SECRET, which spark-submit's own Python runner sets), set in this process's environment
for that one call only. (A driver started by spark-submit, where those variables are set already,
connects to spark-submit's JVM, as PySpark's own launch does.)

The JVM ends when its standard input, this process's pipe, reaches end of file: when the driver ends,
however it ends.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import struct
import subprocess
import time
from collections.abc import Iterator
from typing import IO, Any

from sluice._private_dirs import pid_directory

_PREFIX = "sluice-gateway-"
_POLL_S = 0.005
_MAX_SECRET_BYTES = 4096


class GatewayExited(RuntimeError):
    """The driver JVM ended before its gateway server said where it listens."""


def launch_driver(conf: Any, output: IO[bytes], environ: dict[str, str]) -> Any:
    """Starts the driver JVM with `conf` (a SparkConf), its output to `output` and `environ` added to
    its environment; returns PySpark's gateway to it, whose `proc` is the JVM's process."""
    from pyspark.find_spark_home import _find_spark_home
    from pyspark.java_gateway import launch_gateway

    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # Started by spark-submit's Python runner: its JVM is the driver, and PySpark connects to it.
        return launch_gateway(conf)  # type: ignore[no-untyped-call]
    command = [os.path.join(_find_spark_home(), "bin", "spark-submit")]
    for key, value in conf.getAll():
        command += ["--conf", f"{key}={value}"]
    submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    if os.environ.get("SPARK_TESTING"):  # as PySpark's launch_gateway reads it
        submit_args = "--conf spark.ui.enabled=false " + submit_args
    command += shlex.split(submit_args)
    # 0700: the JVM writes its gateway's secret in it. Removed once read; a driver killed meanwhile
    # leaves it, with the secret of a gateway that ended too (the JVM ends with this process's pipe),
    # and the next driver removes it.
    directory = pid_directory(_PREFIX)
    try:
        info = os.path.join(directory, "connection-info")
        env = {
            **os.environ,
            **environ,
            "SPARK_CONNECT_MODE": "0",
            "_PYSPARK_DRIVER_CONN_INFO_PATH": info,
        }
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=output,
            stderr=output,
            env=env,
            # A Ctrl-C is the coordinator's to handle, not the JVM's. PySpark launches it with the same
            # function; it only sets a signal disposition, no lock another thread might hold.
            preexec_fn=_ignore_sigint,  # noqa: PLW1509
        )
        try:
            port, secret = _await_connection_info(process, info)
        except BaseException:
            # Its gateway is not up yet, and nothing in it reads its input: killed at once.
            process.kill()
            process.wait()
            raise
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    try:
        with environment({"PYSPARK_GATEWAY_PORT": str(port), "PYSPARK_GATEWAY_SECRET": secret}):
            gateway = launch_gateway()  # type: ignore[no-untyped-call]
    except BaseException:
        _end(process)
        raise
    gateway.proc = process
    return gateway


def _end(process: subprocess.Popen[bytes]) -> None:
    """Ends a JVM whose gateway is up but will not be used: its input closed, it exits as a driver does
    (its log written out); killed if it has not within 5 s."""
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _await_connection_info(process: subprocess.Popen[bytes], path: str) -> tuple[int, str]:
    """The port and secret the JVM wrote to `path` (it renames a finished file into place)."""
    while not os.path.exists(path):
        if process.poll() is not None:
            raise GatewayExited(
                f"the driver JVM exited with code {process.returncode} before its gateway started"
            )
        time.sleep(_POLL_S)
    with open(path, "rb") as info:
        return parse_connection_info(info.read(8 + _MAX_SECRET_BYTES + 1))


def parse_connection_info(data: bytes) -> tuple[int, str]:
    """Spark's connection file: the port and the secret's length as big-endian 32-bit ints, then the
    secret in UTF-8. Anything else is refused, not guessed at."""
    if len(data) < 8:
        raise GatewayExited(f"the driver JVM's connection file is truncated ({len(data)} bytes)")
    port, length = struct.unpack(">ii", data[:8])
    if not 0 < port < 65536:
        raise GatewayExited(f"the driver JVM's connection file names no port ({port})")
    if not 0 < length <= _MAX_SECRET_BYTES or len(data) != 8 + length:
        raise GatewayExited(
            f"the driver JVM's connection file holds {len(data) - 8} bytes of secret, announced {length}"
        )
    try:
        return port, data[8:].decode("utf-8")
    except UnicodeDecodeError as err:
        raise GatewayExited("the driver JVM's connection file holds a secret that is not UTF-8") from err


@contextlib.contextmanager
def environment(extra: dict[str, str]) -> Iterator[None]:
    """`extra` in os.environ for the block, and then as it was before."""
    saved = {key: os.environ.get(key) for key in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

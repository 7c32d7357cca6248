"""Starting the Spark driver JVM for a job, with Spark's own output in a log file instead of the terminal."""

from __future__ import annotations

import os
import stat
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.hosts.base import HostUnavailable
from sluice.hosts.spark._class_data import java_options
from sluice.hosts.spark._errors import SparkSetupError
from sluice.hosts.spark._gateway import launch_driver
from sluice.hosts.spark._settings import is_local
from sluice.hosts.spark._zygote import Zygote, start_zygote

# Spark's log4j2 configuration for the driver JVM: everything to one file, nothing to the console.
_LOG4J2 = """\
status = error
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss.SSS}} %p %c{{1}}: %m%n%ex
"""


_zygotes: list[Zygote] = []
"""Held for this process's life: the zygote ends when its handle (its stdin) is closed."""


def daemon_zygote_running() -> bool:
    """Whether this process's driver JVM has a zygote to fork its Python worker daemon from."""
    return any(zygote.process.poll() is None for zygote in _zygotes)


@dataclass(frozen=True)
class SparkLog:
    """Where Spark's log goes: `path`, configured by the log4j2 file `config`."""

    path: Path

    @property
    def config(self) -> Path:
        return self.path.with_name(self.path.name + ".log4j2.properties")

    def write_config(self) -> None:
        """Writes the log4j2 file, and makes the log file 0600 before log4j (which keeps its mode) opens it.

        Spark's log names hosts, ports and paths of the job: for the job's user only. Neither file is
        opened through a symbolic link, where one was planted in place of them.
        """
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(_open_private(self.path, os.O_APPEND))
        with os.fdopen(_open_private(self.config, os.O_TRUNC), "w") as config:
            config.write(_LOG4J2.format(log=self.path))

    def open_for_append(self) -> int:
        return _open_private(self.path, os.O_APPEND)


def _open_private(path: Path, how: int) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | how, 0o600)
    # A file that existed keeps its mode through open (an older, looser log). Not a device, though:
    # `--spark-log /dev/null` must not close /dev/null to everyone else.
    if stat.S_ISREG(os.fstat(fd).st_mode):
        os.fchmod(fd, 0o600)
    return fd


def start_spark(settings: dict[str, str], log: SparkLog) -> Any:
    """Starts the driver JVM and a SparkContext with `settings`; returns the SparkContext.

    The JVM's own stdout and stderr (JVM warnings, and the output of Python workers, which Spark copies
    there) go to the log file as well, so that the terminal keeps only the job's progress.
    """
    from pyspark import SparkConf, SparkContext

    if SparkContext._active_spark_context is not None:
        raise SparkSetupError(
            "a SparkContext is already running in this process: give it to SparkHost instead of starting "
            "another one"
        )
    # Workers run this interpreter, the one that has Sluice installed, unless the user chose another.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if is_local(settings["spark.master"]):
        # The local executor names its host from this variable; without it Spark scans the network
        # interfaces and warns when the host name resolves to loopback.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log.write_config()
    settings = dict(settings)
    if SparkContext._gateway is None:
        import pyspark
        from pyspark.find_spark_home import _find_spark_home

        sharing = java_options(
            pyspark.__version__,
            _find_spark_home(),
            extra_class_path=settings.get("spark.driver.extraClassPath", ""),
        )
        settings["spark.driver.extraJavaOptions"] = " ".join(
            [*sharing, settings.get("spark.driver.extraJavaOptions", "")]
        ).strip()
    conf = SparkConf().setAll(list(settings.items()))
    gateway = None
    if SparkContext._gateway is None:
        with os.fdopen(log.open_for_append(), "ab") as output:
            # Local executors are this JVM: its Python daemon can be forked from a zygote that imports
            # while the JVM starts (_zygote.py). It lives as long as this process, as the JVM does.
            zygote = start_zygote(output) if is_local(settings["spark.master"]) else None
            _zygotes.extend([zygote] if zygote is not None else [])
            try:
                gateway = launch_driver(conf, output, zygote.environ if zygote is not None else {})
            except Exception as err:
                if zygote is not None:
                    _zygotes.remove(zygote)
                    zygote.close()
                raise SparkSetupError(
                    f"the Spark driver JVM did not start ({err}); its output is in {log.path}"
                ) from err
    try:
        return SparkContext(conf=conf, gateway=gateway)
    except Exception as err:
        unreachable = _unreachable(err)
        if unreachable is not None:
            raise HostUnavailable(f"Spark did not start: {unreachable}; see {log.path}") from err
        raise SparkSetupError(f"Spark did not start: {_first_line(err)}; see {log.path}") from err


def stop_spark(context: Any) -> None:
    """Stops `context` without waiting for PySpark's accumulator server to see that it should end.

    `SparkContext.stop()` waits for that server's shutdown, and its request handler looks at its flag
    once a second (`pyspark.accumulators`, `poll(1000)`): 0.95 s of every `sluice run` on the Spark
    host, after the job's end and before its summary (bench/README.md, "Session 18"). Sluice uses no
    accumulators. The server is told to end first and is closed by a thread of its own; the JVM's
    context stops at once."""
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        server.server_shutdown = True  # the handler's loop ends at its next look
        context._accumulatorServer = None  # so that stop() does not wait for it
    try:
        context.stop()
    finally:
        if server is not None:
            threading.Thread(
                target=server.shutdown, name="sluice-accumulator-server-stop", daemon=True
            ).start()


# Java exceptions (by class name, anywhere in the cause chain) that say a service did not answer, not
# that a setting is wrong: Kubernetes' client when the API server is slow or restarting, a refused or
# timed-out connection to a cluster manager.
_UNREACHABLE = (
    "io.fabric8.kubernetes.client.KubernetesClientException",
    "java.net.ConnectException",
    "java.net.SocketTimeoutException",
    "java.net.NoRouteToHostException",
    "java.util.concurrent.TimeoutException",
    "java.io.InterruptedIOException",
)


def _unreachable(err: BaseException) -> str | None:
    """The innermost message of a cause that says a service did not answer, or None."""
    cause = getattr(err, "java_exception", None)
    found, seen = None, 0
    while cause is not None and seen < 20:  # a cause chain can loop back on itself
        name = str(cause.getClass().getName())
        if name in _UNREACHABLE:
            found = f"{name.rsplit('.', 1)[-1]}: {cause.getMessage()}"
        cause, seen = cause.getCause(), seen + 1
    return found


def _first_line(err: BaseException) -> str:
    java = getattr(err, "java_exception", None)
    text = str(java.getMessage()) if java is not None else str(err)
    return text.strip().splitlines()[0] if text.strip() else type(err).__name__

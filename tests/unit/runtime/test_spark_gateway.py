"""Reading the driver JVM's connection file (`hosts/spark/_gateway.py`): what Spark writes is read at
once, and anything else is refused with what is wrong, whoever wrote it; a JVM that ends first is said
to have ended, with its exit code."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from sluice.hosts.spark._gateway import GatewayExited, _await_connection_info, parse_connection_info


def _info(port: int, secret: bytes, announced: int | None = None) -> bytes:
    return struct.pack(">ii", port, len(secret) if announced is None else announced) + secret


def test_a_connection_file_as_spark_writes_it_gives_the_port_and_secret() -> None:
    assert parse_connection_info(_info(40123, "s3cr\u00e9t".encode())) == (40123, "s3cr\u00e9t")


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\x00\x00\x9c", "truncated"),
        (_info(0, b"secret"), "no port"),
        (_info(70000, b"secret"), "no port"),
        (_info(-1, b"secret"), "no port"),
        (_info(40123, b""), "announced 0"),
        (_info(40123, b"secret", announced=3), "announced 3"),
        (_info(40123, b"secret", announced=600), "announced 600"),
        (_info(40123, b"s" * 5000), "announced 5000"),
        (_info(40123, b"secret", announced=-6), "announced -6"),
        (_info(40123, b"\xff\xfe"), "not UTF-8"),
    ],
)
def test_a_connection_file_that_is_not_what_spark_writes_is_refused(data: bytes, says: str) -> None:
    with pytest.raises(GatewayExited, match=says):
        parse_connection_info(data)


def test_a_jvm_that_ends_before_its_gateway_starts_is_reported_with_its_exit_code(tmp_path: Path) -> None:
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"])
    with pytest.raises(GatewayExited, match="exited with code 7 before its gateway started"):
        _await_connection_info(process, str(tmp_path / "never-written"))


def test_the_file_is_read_once_it_is_renamed_into_place(tmp_path: Path) -> None:
    """As Spark's gateway server does it: written under another name, then renamed."""
    path = tmp_path / "connection-info"
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])

    def write_later() -> None:
        time.sleep(0.2)
        partial = tmp_path / "connection123.info"
        partial.write_bytes(_info(40123, b"the-secret"))
        os.rename(partial, path)

    writer = threading.Thread(target=write_later)
    writer.start()
    try:
        assert _await_connection_info(process, str(path)) == (40123, "the-secret")
    finally:
        writer.join()
        process.kill()
        process.wait()


def test_a_driver_jvm_that_cannot_start_is_a_setup_error_that_names_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sluice.hosts.spark import SparkLog, local_master, spark_settings, start_spark
    from sluice.hosts.spark._errors import SparkSetupError

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java-here"))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # start_spark's defaults, undone after
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    log = SparkLog(tmp_path / "spark.log")
    settings = spark_settings(1, local_master(1), "no java", {}, log4j_file=str(log.config))
    with pytest.raises(SparkSetupError) as raised:
        start_spark(settings, log)
    message = str(raised.value)
    assert "the Spark driver JVM did not start (the driver JVM exited with code" in message, message
    assert f"its output is in {log.path}" in message
    assert "no-java-here" in log.path.read_text(), "what spark-submit said is in the log"
    assert not list(Path(tempfile.gettempdir()).glob(f"sluice-gateway-{os.getpid()}-*"))


def test_a_driver_started_by_spark_submit_connects_to_its_jvm_and_starts_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """spark-submit's Python runner sets PYSPARK_GATEWAY_PORT and _SECRET for the JVM it started; PySpark
    connects to that one, and so does Sluice."""
    import pyspark.java_gateway

    from sluice.hosts.spark import _gateway as gateway

    connected: list[object] = []
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40123")
    monkeypatch.setenv("PYSPARK_GATEWAY_SECRET", "spark-submit's")

    def connect(conf: object) -> str:
        connected.append(conf)
        return "gw"

    monkeypatch.setattr(pyspark.java_gateway, "launch_gateway", connect)
    monkeypatch.setattr(subprocess, "Popen", _no_process)
    conf = object()
    assert gateway.launch_driver(conf, sys.stderr.buffer, {}) == "gw"
    assert connected == [conf]


def _no_process(*args: object, **kwargs: object) -> None:
    raise AssertionError("a JVM was started beside spark-submit's")

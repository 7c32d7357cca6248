"""The driver JVM as `start_spark` launches it (`hosts/spark/_gateway.py`), seen on the test run's shared
SparkContext: the JVM is this process's child and runs, PySpark holds its process as its own launch
would, and neither the gateway's port nor its secret is left in this process's environment, which
every process it starts later (a TaskManager, a compaction) would inherit."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def test_the_driver_jvm_is_held_and_its_gateway_settings_are_in_no_environment(spark_context: Any) -> None:
    process = spark_context._gateway.proc
    assert process is not None and process.poll() is None, "the JVM this process launched is running"
    assert process.pid in _children(os.getpid())
    assert spark_context.parallelize([1, 2, 3], 1).sum() == 6, "and PySpark talks to it"
    # Launched by Sluice (hosts/spark/_gateway.py), which named the connection file after this process.
    environ = dict(
        entry.split("=", 1)
        for entry in Path(f"/proc/{process.pid}/environ").read_text().split("\0")
        if "=" in entry
    )
    info = Path(environ["_PYSPARK_DRIVER_CONN_INFO_PATH"])
    assert info.parent.name.startswith(f"sluice-gateway-{os.getpid()}-"), info
    assert "PYSPARK_GATEWAY_SECRET" not in environ
    assert "PYSPARK_GATEWAY_PORT" not in os.environ
    assert "PYSPARK_GATEWAY_SECRET" not in os.environ
    # The directory the JVM wrote its secret in is gone once read.
    assert not list(Path(tempfile.gettempdir()).glob(f"sluice-gateway-{os.getpid()}-*"))


def _children(pid: int) -> set[int]:
    tasks = Path(f"/proc/{pid}/task")
    found: set[int] = set()
    for task in tasks.iterdir():
        found.update(int(child) for child in (task / "children").read_text().split())
    return found

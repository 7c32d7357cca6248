"""`stop_spark`: a SparkContext stops without waiting a second for PySpark's accumulator server.

`SparkContext.stop()` waits for that server, whose request handler looks at its shutdown flag once a
second: every `sluice run` on the Spark host printed its summary and exited about 1 s after its job
had ended. How much it saves is measured, not asserted (bench/README.md, "Session 18"). What is
asserted: the context is stopped, accumulators worked until then, and the server does end and close.

In a process of its own: the test run's shared SparkContext must not be stopped, and a process holds
one SparkContext at a time.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

SCRIPT = r"""
import sys, threading
from pathlib import Path
from pyspark import SparkContext
from sluice.hosts.spark import SparkLog, local_master, spark_settings, start_spark, stop_spark

log = SparkLog(Path(sys.argv[1]) / "spark.log")
context = start_spark(spark_settings(1, local_master(1), "stop", {}, log4j_file=str(log.config)), log)
total = context.accumulator(0)
context.parallelize([1, 2, 3], 1).foreach(lambda x: total.add(x))
assert total.value == 6, "the accumulator server served while the context ran"
server = context._accumulatorServer
stop_spark(context)
assert SparkContext._active_spark_context is None and context._jsc is None, "the context stopped"
for thread in threading.enumerate():
    if thread.name == "sluice-accumulator-server-stop":
        thread.join(10)
        assert not thread.is_alive(), "the accumulator server ended"
assert server.server_shutdown and server.socket.fileno() == -1, "and its socket is closed"
print("stopped")
"""


def test_stop_spark_stops_the_context_and_the_accumulator_server_ends(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0 and done.stdout.strip() == "stopped", done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]

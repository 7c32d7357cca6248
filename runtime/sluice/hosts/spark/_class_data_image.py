"""Dumps the Kubernetes driver's class-data archive into a directory, once, when the image is built.

    python -m sluice.hosts.spark._class_data_image /opt/sluice/class-data

A coordinator pod's HOME dies with the pod, so a driver there could never reuse an archive it dumped
(`_class_data.py`): every coordinator would start its JVM cold and spend CPU on a dump that is thrown
away. The image runs this module at build time instead and points `SLUICE_CLASS_DATA_DIR` at the
directory, which every later driver of that image maps read-only.

The archive is only valid for the class path it was dumped with, so the JVM dumping it gets exactly the
class path of a driver on Kubernetes: Sluice's feature-step jar first (`spark.driver.extraClassPath`),
then Spark's. It runs one local stage so that the scheduler's and a task's classes are loaded too.
Then a second JVM starts from the archive with `-Xshare:on`, which refuses to start if the archive
cannot be mapped: a build that would ship an archive no driver can use fails here instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from sluice.hosts.spark._class_data import SHIPPED_DIR_ENV, adopt_settled_dumps, archive_path, java_binary
from sluice.hosts.spark._context import SparkLog, start_spark
from sluice.hosts.spark._kubernetes import EXTENSION_JAR
from sluice.hosts.spark._settings import spark_settings
from sluice.hosts.spark._warm_up import no_records

# How long the JVM may take to write the archive as it exits (seconds; 2 to 5 on two cores).
_DUMP_TIMEOUT_S = 300.0


def _driver_settings(log: SparkLog, extra_java_options: str = "") -> dict[str, str]:
    overrides = {"spark.driver.extraClassPath": str(EXTENSION_JAR)}
    if extra_java_options:
        overrides["spark.driver.extraJavaOptions"] = extra_java_options
    return spark_settings(1, "local[1]", "sluice class data", overrides, log4j_file=str(log.config))


def _run_one_stage(log: SparkLog, extra_java_options: str = "") -> None:
    """Starts a driver JVM, runs one empty stage, stops Spark and waits for the JVM to exit."""
    from pyspark import SparkContext

    context = start_spark(_driver_settings(log, extra_java_options), log)
    try:
        context.parallelize([0], 1).mapPartitions(no_records).collect()
    finally:
        context.stop()
    gateway = SparkContext._gateway
    SparkContext._gateway = None
    SparkContext._jvm = None
    process = gateway.proc  # type: ignore[union-attr]
    gateway.shutdown()  # type: ignore[union-attr]
    # PySpark's gateway JVM exits when its stdin closes; it writes the archive as it exits.
    process.stdin.close()
    process.wait(_DUMP_TIMEOUT_S)


def build(directory: Path) -> Path:
    """Dumps the archive into `directory` (made 0755), checks that a JVM maps it, returns its path."""
    import pyspark
    from pyspark.find_spark_home import _find_spark_home

    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(directory, 0o755)
    os.environ.pop(SHIPPED_DIR_ENV, None)
    os.environ["SLUICE_CACHE_DIR"] = str(directory)
    java = java_binary(os.environ)
    if java is None:
        raise SystemExit("no Java to dump a class-data archive with: set JAVA_HOME or put java on PATH")
    archive = archive_path(directory, pyspark.__version__, _find_spark_home(), java, str(EXTENSION_JAR))
    with tempfile.TemporaryDirectory(prefix="sluice-class-data-") as scratch:
        log = SparkLog(Path(scratch) / "spark.log")
        _run_one_stage(log)
        adopt_settled_dumps(archive, java)
        if not archive.exists():
            raise SystemExit(
                f"the driver JVM wrote no class-data archive at {archive}; see {log.path}:\n"
                + log.path.read_text(errors="replace")[-4000:]
            )
        # A driver as a pod's: the archive from the shipped directory, nothing dumped; -Xshare:on
        # makes its JVM refuse to start if it cannot map it.
        os.environ["SLUICE_CACHE_DIR"] = "off"
        os.environ[SHIPPED_DIR_ENV] = str(directory)
        _run_one_stage(log, "-Xshare:on")
    return archive


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "directory", type=Path, help="where the archive goes (the image's SLUICE_CLASS_DATA_DIR)"
    )
    archive = build(parser.parse_args().directory)
    print(f"class-data archive: {archive} ({archive.stat().st_size / 2**20:.0f} MiB)", file=sys.stderr)


if __name__ == "__main__":
    main()

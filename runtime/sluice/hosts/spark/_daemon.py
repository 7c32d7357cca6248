"""PySpark's worker daemon, with the TaskManager already imported before it forks workers.

Spark starts one daemon per executor (`spark.python.daemon.module`, `sluice_spark_daemon`, which starts
it here unless a zygote took it over: `_zygote.py`) and forks a Python worker from it for every task.
PySpark's own daemon imports nothing ahead of the fork, so every TaskManager would import PySpark's
worker module and the runtime again: about a second of CPU each, paid again at every restart. Importing
them here once makes a worker start as a plain fork.

Neither import starts a thread (PySpark's daemon must not fork a process that has threads); pandas and
pyarrow, which do, are not imported by either.

Spark's own zips of PySpark and Py4J come off the path first (`_worker_path.py`): PySpark is then
imported from its installed package, with its compiled bytecode, and forked workers never read the zips.

The imported modules' objects are then frozen out of the cyclic garbage collector: a TaskManager's
collections do not walk them again and again, and do not write to (and so copy) the pages it shares
with the daemon.
"""

from __future__ import annotations

import gc
import sys

from sluice.hosts.spark._worker_path import drop_spark_zips


def import_ahead() -> None:
    """What every worker needs, imported once before the first fork (the zips off the path first)."""
    import pyspark.worker  # noqa: F401
    from pyspark.daemon import manager  # noqa: F401

    import sluice.engine.taskmanager
    import sluice.hosts.spark._task
    import sluice.hosts.spark._warm_up  # noqa: F401


def main() -> None:
    drop_spark_zips(sys.path, sys.path_importer_cache)
    import_ahead()
    from pyspark.daemon import manager

    gc.collect()
    gc.freeze()
    manager()

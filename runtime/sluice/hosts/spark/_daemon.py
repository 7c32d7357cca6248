"""PySpark's worker daemon, with the TaskManager already imported before it forks workers.

Spark starts one daemon per executor (`spark.python.daemon.module`) and forks a Python worker from it
for every task. PySpark's own daemon imports nothing ahead of the fork, so every TaskManager would
import PySpark's worker module and the runtime again: about a second of CPU each, paid again at every
restart. Importing them here once makes a worker start as a plain fork.

Neither import starts a thread (PySpark's daemon must not fork a process that has threads); pandas and
pyarrow, which do, are not imported by either.

The imported modules' objects are then frozen out of the cyclic garbage collector: a TaskManager's
collections do not walk them again and again, and do not write to (and so copy) the pages it shares
with the daemon.
"""

from __future__ import annotations

import gc

import pyspark.worker  # noqa: F401
from pyspark.daemon import manager

import sluice.engine.taskmanager
import sluice.hosts.spark._task  # noqa: F401

if __name__ == "__main__":
    gc.collect()
    gc.freeze()
    manager()

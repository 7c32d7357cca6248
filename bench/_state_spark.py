"""W4 on Spark Structured Streaming with the RocksDB state store: the peer of bench/state.py.

The same keyed count: a rate source's `value` keyed by `value % keys`, `groupBy(key).count()` in update
mode into the no-op sink, a micro-batch every second (Structured Streaming checkpoints its state with
every batch, so this is its checkpoint interval). The state store is RocksDB with changelog
checkpointing, Spark's own answer to large state. The query runs in a child process (a fresh JVM), whose
peak memory is sampled from /proc; it runs for `seconds` and its progress reports give the figures.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _structured_streaming import run_child

# A fixed number of rows per micro-batch (the `rate-micro-batch` source), about what the query takes in
# a second, so that it commits its state about every second as Sluice checkpoints: the `rate` source
# instead offers rows by wall clock, and a query behind it takes ever larger batches (12 s measured at
# 10k keys), committing state far less often. The rate is rows / time spent in batches.
ROWS_PER_BATCH = 1_000_000


def spark_settings(cores: int) -> dict[str, str]:
    return {
        # One state store per shuffle partition, two per core (as in W1's peer).
        "spark.sql.shuffle.partitions": str(2 * cores),
        "spark.ui.enabled": "false",
        # A local JVM gets what a Sluice TaskManager may use per core, 1 GiB each.
        "spark.driver.memory": f"{cores}g",
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        ),
        # Changelog checkpointing: each batch uploads only its changes (Spark 3.4+).
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
    }


def _child(job: dict[str, Any]) -> dict[str, Any]:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812

    builder = SparkSession.builder.master(f"local[{job['cores']}]").appName("w4-structured-streaming")
    for key, value in job["settings"].items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    counts = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", ROWS_PER_BATCH)
        .option("numPartitions", job["cores"])
        .load()
        .select((F.col("value") % job["keys"]).alias("key"))
        .groupBy("key")
        .count()
    )
    query = (
        counts.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", job["checkpoint"])
        .trigger(processingTime="1 second")
        .start()
    )
    started = time.monotonic()
    progress: list[dict[str, Any]] = []
    seen: set[int] = set()
    while time.monotonic() - started < job["seconds"]:
        time.sleep(1)
        for report in query.recentProgress:
            # A progress report is a dict in older PySpark, an object with its JSON in newer ones.
            data = json.loads(report.json) if hasattr(report, "json") else dict(report)
            if data["batchId"] not in seen:
                seen.add(data["batchId"])
                progress.append(data)
    query.stop()
    spark.stop()
    return {"batches": progress}


def run_w4_structured_streaming(keys: int, seconds: float, workdir: Path, cores: int = 2) -> dict[str, Any]:
    """Runs the peer for `seconds`; returns rows/s, per-batch commit latencies and state figures."""
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    job = {
        "keys": keys,
        "seconds": seconds,
        "cores": cores,
        "checkpoint": str(workdir / "checkpoint"),
        "settings": spark_settings(cores),
    }
    result, sampler = run_child([__file__, json.dumps(job)], "Structured Streaming W4")
    batches, peak = result["batches"], sampler.peak
    if not batches:
        # A result too: the first micro-batch (its keys all new to the state store) did not end in time.
        return {
            "records_per_s": None,
            "note": f"no micro-batch completed in {seconds:g} s",
            "peak_rss_bytes": peak,
        }
    # The first batches include the JVM's warm-up and an almost empty state; leave out the first third.
    steady = batches[len(batches) // 3 :] or batches
    rows = sum(b["numInputRows"] for b in steady)
    busy_s = sum(b["durationMs"].get("triggerExecution", 0) for b in steady) / 1000
    commit = [
        op.get("customMetrics", {}).get("rocksdbCommitCheckpointLatency", 0)
        + op.get("customMetrics", {}).get("rocksdbCommitFlushLatency", 0)
        for b in steady
        for op in b.get("stateOperators", [])
    ]
    state_bytes = [
        sum(op.get("customMetrics", {}).get("rocksdbSstFileSize", 0) for op in b.get("stateOperators", []))
        for b in steady
    ]
    return {
        "engine": "Spark Structured Streaming (RocksDB, changelog checkpointing)",
        "records_per_s": rows / busy_s if busy_s else 0.0,
        "batches": len(steady),
        "batch_ms_p50": statistics.median(b["durationMs"].get("triggerExecution", 0) for b in steady),
        "commit_ms_p50": statistics.median(commit) if commit else None,
        "commit_ms_max": max(commit) if commit else None,
        "state_rows": sum(op.get("numRowsTotal", 0) for op in steady[-1].get("stateOperators", [])),
        "state_sst_bytes": state_bytes[-1] if state_bytes else None,
        "peak_rss_bytes": peak,
    }


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    print(json.dumps(_child(json.loads(sys.argv[1])), default=str))

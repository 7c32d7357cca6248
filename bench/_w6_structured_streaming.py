"""W6 on PySpark Structured Streaming: `session_window` per key (gap 500 ms) over W6's events.

The events are written as parquet files of one block (100,000 events) each, in event-time order, and
read one file per micro-batch (`maxFilesPerTrigger=1`): Spark's watermark moves at the end of each
micro-batch, so this is what lets it see the replayed events as late (they are older than the
previous block) and drop them, as Sluice does. Built-in expressions only (the records stay in the JVM),
append mode, a zero-delay watermark, a parquet sink with a checkpoint location. Append mode emits a
session once the watermark passes its end: on a bounded input the last block's sessions never are.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from _structured_streaming import committed_files, run_child, spark_settings, tree_cpu_seconds
from _w6_events import BLOCK, GAP_MS, w6_event


def write_w6_parquet(n: int, directory: Path) -> None:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    directory.mkdir(parents=True, exist_ok=True)
    for block, start in enumerate(range(0, n, BLOCK)):
        events = [w6_event(i) for i in range(start, min(n, start + BLOCK))]
        table = pa.table(
            {
                "key": pa.array([e[0] for e in events], pa.int64()),
                "ts_ms": pa.array([e[1] for e in events], pa.int64()),
                "v": pa.array([e[2] for e in events], pa.int64()),
            }
        )
        pq.write_table(table, directory / f"part-{block:05d}.parquet")


def _query(workdir: Path, cores: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias
    from pyspark.sql.types import LongType, StructField, StructType

    builder = SparkSession.builder.master(f"local[{cores}]").appName("w6-structured-streaming")
    for k, v in spark_settings(cores).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    startup_s = time.perf_counter() - t0
    schema = StructType([StructField(c, LongType(), False) for c in ("key", "ts_ms", "v")])
    sessions = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(workdir / "input"))
        .withColumn("event_time", F.timestamp_millis("ts_ms"))
        .withWatermark("event_time", "0 seconds")
        .groupBy("key", F.session_window("event_time", f"{GAP_MS} milliseconds"))
        .agg(F.count(F.lit(1)).alias("count"), F.sum("v").alias("sum_v"))
        .select(
            "key",
            F.unix_millis(F.col("session_window.start")).alias("start_ms"),
            F.unix_millis(F.col("session_window.end")).alias("end_ms"),
            "count",
            "sum_v",
        )
    )
    cpu0, t1 = tree_cpu_seconds(os.getpid()), time.perf_counter()
    query = (
        sessions.writeStream.format("parquet")
        .outputMode("append")
        .option("path", str(workdir / "output"))
        .option("checkpointLocation", str(workdir / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    result = {
        "startup_s": startup_s,
        "query_s": time.perf_counter() - t1,
        "query_cpu_s": tree_cpu_seconds(os.getpid()) - cpu0,
    }
    spark.stop()
    return result


def read_sessions(output_dir: Path) -> dict[tuple[int, int], tuple[int, int, int]]:
    import pyarrow.dataset as ds  # type: ignore[import-untyped]

    files = committed_files(output_dir)
    if not files:
        return {}
    t = ds.dataset(files, format="parquet").to_table().to_pydict()
    return {
        (k, s): (e, c, v)
        for k, s, e, c, v in zip(t["key"], t["start_ms"], t["end_ms"], t["count"], t["sum_v"], strict=True)
    }


def run_w6_structured_streaming(n: int, workdir: Path, cores: int = 2) -> dict[str, Any]:
    """Runs the query in a child process (fresh JVM, its own memory figure); returns its figures and the
    sessions it emitted."""
    shutil.rmtree(workdir, ignore_errors=True)
    write_w6_parquet(n, workdir / "input")
    figures, sampler = run_child(
        [__file__, json.dumps({"workdir": str(workdir), "cores": cores})], "W6 on Spark"
    )
    return {**figures, "peak_rss_bytes": sampler.peak, "sessions": read_sessions(workdir / "output")}


if __name__ == "__main__":
    job = json.loads(sys.argv[1])
    print(json.dumps(_query(Path(job["workdir"]), job["cores"])))

"""W7 on PySpark Structured Streaming: a stream-stream inner join with watermarks and a time range.

Both sides are written as parquet files in event-time order (columns key, ts_ms, id) and read as
streams with a zero-delay watermark each; the join condition is equal keys and the right event time
within +-500 ms of the left one, the form Spark needs to bound (and clean) its join state. Built-in
expressions only (no record leaves the JVM), append mode, a parquet sink with a checkpoint location,
the `availableNow` trigger. The pairs (left id, right id) are read back and checked by the caller.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from _structured_streaming import run_child, spark_settings, tree_cpu_seconds
from _w7_events import BOUND_MS, w7_event

FILES = 4


def write_side(n: int, directory: Path) -> None:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    directory.mkdir(parents=True, exist_ok=True)
    per_file = -(-n // FILES)
    for f, start in enumerate(range(0, n, per_file)):
        events = [w7_event(i) for i in range(start, min(n, start + per_file))]
        table = pa.table(
            {
                name: pa.array([e[c] for e in events], pa.int64())
                for c, name in enumerate(("key", "ts_ms", "id"))
            }
        )
        pq.write_table(table, directory / f"part-{f:05d}.parquet")


def _query(workdir: Path, cores: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias
    from pyspark.sql.types import LongType, StructField, StructType

    builder = SparkSession.builder.master(f"local[{cores}]").appName("w7-structured-streaming")
    for k, v in spark_settings(cores).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    startup_s = time.perf_counter() - t0
    schema = StructType([StructField(c, LongType(), False) for c in ("key", "ts_ms", "id")])

    def side(name: str) -> Any:
        return (
            spark.readStream.schema(schema)
            .parquet(str(workdir / name))
            .select(
                F.col("key").alias(f"{name}_key"),
                F.timestamp_millis("ts_ms").alias(f"{name}_time"),
                F.col("id").alias(f"{name}_id"),
            )
            .withWatermark(f"{name}_time", "0 seconds")
        )

    left, right = side("left"), side("right")
    joined = left.join(
        right,
        F.expr(
            f"left_key = right_key AND right_time >= left_time - interval {BOUND_MS} milliseconds "
            f"AND right_time <= left_time + interval {BOUND_MS} milliseconds"
        ),
    ).select("left_id", "right_id")
    cpu0, t1 = tree_cpu_seconds(os.getpid()), time.perf_counter()
    query = (
        joined.writeStream.format("parquet")
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


def read_pairs(output_dir: Path, n: int) -> tuple[int, int]:
    """(number of pairs, checksum as bench/_w7_events.reference_pairs) of the committed output."""
    import pyarrow.dataset as ds  # type: ignore[import-untyped]

    files: list[str] = []
    log_dir = output_dir / "_spark_metadata"
    entries = [p for p in log_dir.iterdir() if p.name.split(".")[0].isdigit()]
    for entry in sorted(entries, key=lambda p: int(p.name.split(".")[0])):
        for line in entry.read_text().splitlines()[1:]:
            files.append(json.loads(line)["path"].removeprefix("file://").removeprefix("file:"))
    if not files:
        return 0, 0
    t = ds.dataset(files, format="parquet").to_table()
    lefts, rights = t.column("left_id").to_pylist(), t.column("right_id").to_pylist()
    return len(lefts), sum(i * n + j for i, j in zip(lefts, rights, strict=True))


def run_w7_structured_streaming(n: int, workdir: Path, cores: int = 2) -> dict[str, Any]:
    """Runs the query in a child process (fresh JVM); returns its figures and the pairs' check."""
    shutil.rmtree(workdir, ignore_errors=True)
    write_side(n, workdir / "left")
    write_side(n, workdir / "right")
    figures, sampler = run_child(
        [__file__, json.dumps({"workdir": str(workdir), "cores": cores})], "W7 on Spark"
    )
    return {**figures, "peak_rss_bytes": sampler.peak, "pairs": read_pairs(workdir / "output", n)}


if __name__ == "__main__":
    job = json.loads(sys.argv[1])
    print(json.dumps(_query(Path(job["workdir"]), job["cores"])))

"""W7 on PySpark Structured Streaming: a stream-stream inner join with watermarks and a time range.

Both sides are written as parquet files of FILE_EVENTS events each, in event-time order (columns key,
ts_ms, id), and read as streams with a zero-delay watermark each; the join condition is equal keys and
the right event time within +-500 ms of the left one, the form Spark needs to bound (and clean) its
join state. Built-in expressions only (no record leaves the JVM), append mode, a parquet sink with a
checkpoint location, the `availableNow` trigger.

Each micro-batch reads `files_per_trigger` files of each side (`maxFilesPerTrigger`), as a Spark user
feeds a large backlog to a stateful query: Spark advances the watermark only between micro-batches, so
one batch of the whole input (no limit) keeps every row in the join's state and pairs each key's rows
with all of its other side's, which at 2,000,000 events a side did not end in 30 minutes. Batches of
whole files in event-time order keep both sides' times together, and no row of a batch is at or before
the watermark the previous batch left (late rows would be dropped). The files' modification times are
set one second apart, the order in which the file source takes them.

The pairs (left id, right id) are read back and checked by the caller; the micro-batches' progress
gives their number and the join's state rows after each.
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
from _w7_events import BOUND_MS, w7_event

FILE_EVENTS = 50_000
"""Events per input file: a multiple of 10 (events per millisecond), so no millisecond spans two files."""
FILES_PER_TRIGGER = 2


def write_side(n: int, directory: Path) -> None:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    directory.mkdir(parents=True, exist_ok=True)
    for f, start in enumerate(range(0, n, FILE_EVENTS)):
        events = [w7_event(i) for i in range(start, min(n, start + FILE_EVENTS))]
        table = pa.table(
            {
                name: pa.array([e[c] for e in events], pa.int64())
                for c, name in enumerate(("key", "ts_ms", "id"))
            }
        )
        path = directory / f"part-{f:05d}.parquet"
        pq.write_table(table, path)
        # The file source takes the oldest files first: event-time order, even for files written in
        # the same millisecond.
        stamp = 1_000_000_000 + f
        os.utime(path, (stamp, stamp))


def _query(workdir: Path, cores: int, files_per_trigger: int) -> dict[str, Any]:
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
            .option("maxFilesPerTrigger", files_per_trigger)
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
        "batches": [
            {
                "input_rows": int(p["numInputRows"]),
                "state_rows": sum(int(op["numRowsTotal"]) for op in p["stateOperators"]),
            }
            for p in query.recentProgress
        ],
    }
    spark.stop()
    return result


def read_pairs(output_dir: Path, n: int) -> tuple[int, int]:
    """(number of pairs, checksum as bench/_w7_events.reference_pairs) of the committed output."""
    import pyarrow.dataset as ds  # type: ignore[import-untyped]

    files = committed_files(output_dir)
    if not files:
        return 0, 0
    t = ds.dataset(files, format="parquet").to_table()
    lefts, rights = t.column("left_id").to_pylist(), t.column("right_id").to_pylist()
    return len(lefts), sum(i * n + j for i, j in zip(lefts, rights, strict=True))


def run_w7_structured_streaming(
    n: int, workdir: Path, cores: int = 2, files_per_trigger: int = FILES_PER_TRIGGER
) -> dict[str, Any]:
    """Runs the query in a child process (fresh JVM); returns its figures and the pairs' check."""
    shutil.rmtree(workdir, ignore_errors=True)
    write_side(n, workdir / "left")
    write_side(n, workdir / "right")
    job = {"workdir": str(workdir), "cores": cores, "files_per_trigger": files_per_trigger}
    figures, sampler = run_child([__file__, json.dumps(job)], "W7 on Spark")
    return {**figures, "peak_rss_bytes": sampler.peak, "pairs": read_pairs(workdir / "output", n)}


if __name__ == "__main__":
    job = json.loads(sys.argv[1])
    print(json.dumps(_query(Path(job["workdir"]), job["cores"], job["files_per_trigger"])))

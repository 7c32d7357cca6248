"""W5 on Spark Structured Streaming: W1's windows from a Kafka topic to a Kafka topic, with Spark's own
Kafka source and sink (spark-sql-kafka-0-10, jars from scripts/spark-kafka-jars.sh), the peer of
bench/kafka.py.

The query reads the input topic from the earliest offsets to the latest ones seen at its start
(`Trigger.AvailableNow`), parses the JSON events with built-in expressions, takes event time from `ts_ms`
with a zero-delay watermark, counts and sums `v` per key in 1 s tumbling windows and writes each window in
append mode as a JSON record keyed by `key` to the output topic. It runs in a child process with a fresh
JVM, on the same settings as the W1 peer (bench/_structured_streaming.py's `spark_settings`, each with its
reason); the parent samples the process tree's memory. The connector's producer and consumer keep their
defaults: Spark's Kafka sink gives at-least-once, which is all it offers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _structured_streaming import run_child, spark_settings, tree_cpu_seconds

REPO = Path(__file__).resolve().parents[1]
JARS_SCRIPT = REPO / "scripts" / "spark-kafka-jars.sh"


def connector_jars() -> list[Path]:
    """The connector's jars, fetched from Maven Central on first use (scripts/spark-kafka-jars.sh)."""
    done = subprocess.run([str(JARS_SCRIPT)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/spark-kafka-jars.sh failed:\n{done.stderr}")
    jars = sorted(Path(done.stdout.strip()).glob("*.jar"))
    if not any(j.name.startswith("spark-sql-kafka-0-10_") for j in jars):
        raise RuntimeError(f"no spark-sql-kafka-0-10 jar in {done.stdout.strip()}")
    return jars


def _timed_query(spark: Any, job: dict[str, Any]) -> dict[str, Any]:
    from pyspark.sql import functions as F  # noqa: N812 - the conventional alias
    from pyspark.sql.types import LongType, StructField, StructType

    schema = StructType([StructField(c, LongType()) for c in ("key", "ts_ms", "v")])
    events = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", job["bootstrap"])
        .option("subscribe", job["input"])
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
        .select("e.*")
    )
    windows = (
        events.withColumn("event_time", F.timestamp_millis("ts_ms"))
        .withWatermark("event_time", "0 seconds")
        .groupBy("key", F.window("event_time", "1 second"))
        .agg(F.count(F.lit(1)).alias("count"), F.sum("v").alias("sum_v"))
        .select(
            F.col("key").cast("string").alias("key"),
            F.to_json(
                F.struct(
                    "key",
                    F.unix_millis(F.col("window.start")).alias("window_start_ms"),
                    "count",
                    "sum_v",
                )
            ).alias("value"),
        )
    )
    cpu0, t0 = tree_cpu_seconds(os.getpid()), time.perf_counter()
    query = (
        windows.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", job["bootstrap"])
        .option("topic", job["output"])
        .option("checkpointLocation", job["checkpoint"])
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    wall_s, cpu_s = time.perf_counter() - t0, tree_cpu_seconds(os.getpid()) - cpu0
    batches = [
        {"batchId": p["batchId"], "numInputRows": p["numInputRows"], "durationMs": p.get("durationMs", {})}
        for p in query.recentProgress
    ]
    return {"query_s": wall_s, "query_cpu_s": cpu_s, "batches": batches}


def _run_in_child(job: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(f"local[{job['cores']}]").appName("w5-structured-streaming")
    for k, v in job["settings"].items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    result = {"startup_s": time.perf_counter() - t0, **_timed_query(spark, job)}
    spark.stop()
    return result


def run_w5_structured_streaming(
    bootstrap: str, input_topic: str, output_topic: str, workdir: Path, cores: int = 2
) -> dict[str, Any]:
    """Runs the query once in a fresh JVM; returns query_s (start() to the end of awaitTermination),
    query_cpu_s (JVM + driver during the query), startup_s (not in the rate), peak_rss_bytes, batches,
    spark_settings and connector (the jar names)."""
    jars = connector_jars()
    settings = spark_settings(cores) | {"spark.jars": ",".join(str(j) for j in jars)}
    job = {
        "bootstrap": bootstrap,
        "input": input_topic,
        "output": output_topic,
        "checkpoint": str(workdir / "checkpoint"),
        "cores": cores,
        "settings": settings,
    }
    figures, sampler = run_child([__file__, json.dumps(job)], "Structured Streaming run")
    peak = sampler.peak
    return {
        **figures,
        "peak_rss_bytes": peak,
        "spark_settings": settings,
        "connector": [j.name for j in jars],
    }


if __name__ == "__main__":
    print(json.dumps(_run_in_child(json.loads(sys.argv[1]))))

"""Benchmark W5: Kafka -> W1's 1 s event-time windows -> Kafka, Sluice against Structured Streaming.

    .venv/bin/python bench/kafka.py [--events 2000000] [--repeat 1] [--engines eo,alo,ss] [--warmup 1]
        [--baseline REF]

One command starts a Kafka 4 broker (tests/testkit/kafka.py, jars from scripts/kafka-jars.sh), fills an
input topic of 3 partitions with `--events` JSON events of W1's shape (untimed), then runs on that same
topic, interleaved `--repeat` times, each into a fresh output topic, after `--warmup` untimed Sluice
exactly-once runs (the broker's JVM is cold at first: the same job ran 12.7 s, then 8.9 s, then 6.6 s):

- `eo`: Sluice, process host, parallelism 2, KafkaSource -> windows -> KafkaSink exactly-once
  (bench/_kafka_w5.py), checkpoint every second: output becomes visible as each checkpoint completes;
- `alo`: the same job with KafkaSink at-least-once (the price of exactly-once is the difference);
- `ss`: Spark Structured Streaming (local[2]) with Spark's own Kafka source and sink
  (bench/_kafka_spark.py), reading the topic from earliest to its end with Trigger.AvailableNow.

With `--baseline REF`, Sluice's engines also run on REF's runtime (a temporary git worktree, its
`runtime/` first on PYTHONPATH) in the same rounds, the order of all runs reversed every other round, and
the report adds each candidate figure's ratio to its baseline: an A/B of a change in one command.

Every output topic is read back with read_committed and compared, window by window, with a reference
computed in plain Python; a run with a lost, duplicated or wrong window is reported as WRONG and its
rate is not used. Rates are events / job time: for Sluice from the coordinator's start of the job to its
result (TaskManager start-up included), for Structured Streaming from start() to the end of
awaitTermination() (SparkSession start-up excluded, shown apart).
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "tests")]

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType  # noqa: E402

from _harness import REPO, BenchJob, cpu_seconds, environment_note  # noqa: E402
from _kafka_spark import run_w5_structured_streaming  # noqa: E402
from _structured_streaming import expected_windows, w1_event  # noqa: E402
from _w1_trees import worktrees  # noqa: E402
from testkit.kafka import KafkaBroker, kafka_libs  # noqa: E402

W5 = REPO / "bench" / "_kafka_w5.py"
PARTITIONS = 3
ENGINES = {
    "eo": "Sluice, exactly-once",
    "alo": "Sluice, at-least-once",
    "ss": "Spark Structured Streaming",
}
GOAL_VS_SS, GOAL_EO_COST = 4.0, 0.10


def event_json(i: int) -> str:
    key, ts_ms, v = w1_event(i)
    return json.dumps({"key": key, "ts_ms": ts_ms, "v": v}, separators=(",", ":"))


def new_topic(broker: KafkaBroker, prefix: str, partitions: int) -> str:
    name = broker.create_topic(f"w5-{prefix}-{uuid.uuid4().hex[:8]}", partitions)
    # Sluice's sink stamps a window with its event time (1970, here): without this, the broker's
    # retention check (every 5 min) could delete such records as older than 7 days.
    configs = [ConfigEntry("retention.ms", "-1", incremental_operation=AlterConfigOpType.SET)]
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=configs)
    broker.admin().incremental_alter_configs([resource])[resource].result(30)
    return name


def fill_input(broker: KafkaBroker, n: int) -> str:
    """Event i goes to partition i % 3: every partition is in event-time order, all three advance together."""
    topic = new_topic(broker, "in", PARTITIONS)
    for p in range(PARTITIONS):
        broker.produce(topic, (event_json(i) for i in range(p, n, PARTITIONS)), partition=p)
    ends = broker.end_offsets(topic)
    if sum(ends.values()) != n:
        raise RuntimeError(f"input topic holds {sum(ends.values())} records, expected {n}: {ends}")
    return topic


def check_output(broker: KafkaBroker, topic: str, n: int) -> dict[str, Any]:
    """Compares the committed records of `topic` with the reference, window by window."""
    stable = broker.wait_stable(topic, timeout=60)  # an open transaction left behind fails here
    records = broker.consume_all(topic)
    emitted: collections.Counter[tuple[int, int, int, int]] = collections.Counter()
    for _, _, value in records:
        w = json.loads(value or b"null")
        emitted[(w["key"], w["window_start_ms"], w["count"], w["sum_v"])] += 1
    expected = expected_windows(n)
    seen = {(k, ws): (c, s) for (k, ws, c, s) in emitted}
    duplicated = sum(c - 1 for c in emitted.values() if c > 1)
    wrong = sum(1 for slot, agg in seen.items() if expected.get(slot) != agg)
    missing = sorted({ws for slot in expected.keys() - seen.keys() for ws in [slot[1]]})
    last_window = max(ws for _, ws in expected)
    if not duplicated and not wrong and not missing:
        verdict, correct = "every window, once, right", True
    elif not duplicated and not wrong and missing == [last_window]:
        # Structured Streaming's append mode emits a window only once the watermark passes its end; on a
        # bounded input the watermark stops at the largest event time, inside the last window.
        verdict, correct = f"right, but the last window (start {last_window} ms) was not emitted", True
    else:
        verdict, correct = (
            (f"WRONG: {duplicated} duplicated, {wrong} wrong, windows missing at starts {missing[:5]}"),
            False,
        )
    return {
        "records": len(records),
        "records_expected": len(expected),
        "topic_offsets": sum(stable.values()),
        "correct": correct,
        "verdict": verdict,
    }


def run_sluice(
    broker: KafkaBroker, source: str, n: int, delivery: str, work: Path, tree: Path | None = None
) -> dict[str, Any]:
    """One run of W5 on this checkout's runtime, or on `tree`'s."""
    output = new_topic(broker, delivery, PARTITIONS)
    chk = work / f"chk-{delivery}-{time.monotonic_ns()}"
    broker_cpu0 = cpu_seconds(broker.process.pid) if broker.process else 0.0
    job = BenchJob(
        W5,
        *("--arg", f"bootstrap={broker.bootstrap_servers}", "--arg", f"input={source}"),
        *("--arg", f"output={output}", "--arg", f"delivery={delivery}"),
        *("--parallelism", "2", "--host", "processes", "--job-id", "w5"),
        *("--checkpoint-dir", f"file://{chk}", "--checkpoint-interval", "1s"),
        env={"PYTHONPATH": str(tree / "runtime")} if tree is not None else None,
    )
    job.wait_ready()
    started_ms = job.get("/v1/job")["startTime"]
    wall = job.wait(1800)
    ended_ms = json.loads((chk / "w5" / "job-result.json").read_text())["timestamp"]
    job_s = (ended_ms - started_ms) / 1000
    broker_cpu = (cpu_seconds(broker.process.pid) if broker.process else 0.0) - broker_cpu0
    shutil.rmtree(chk, ignore_errors=True)
    return {
        "job_s": job_s,
        "wall_s": wall,
        "cpu_s": sum(job.cpu.values()),
        "broker_cpu_s": broker_cpu,
        "peak_rss": job.max_peak_rss(),
        **check_output(broker, output, n),
    }


def run_spark(broker: KafkaBroker, source: str, n: int, work: Path) -> dict[str, Any]:
    output = new_topic(broker, "ss", PARTITIONS)
    run_dir = work / f"ss-{time.monotonic_ns()}"
    broker_cpu0 = cpu_seconds(broker.process.pid) if broker.process else 0.0
    ss = run_w5_structured_streaming(broker.bootstrap_servers, source, output, run_dir)
    broker_cpu = (cpu_seconds(broker.process.pid) if broker.process else 0.0) - broker_cpu0
    shutil.rmtree(run_dir, ignore_errors=True)
    return {
        "job_s": ss["query_s"],
        "wall_s": ss["query_s"] + ss["startup_s"],
        "cpu_s": ss["query_cpu_s"],
        "broker_cpu_s": broker_cpu,
        "peak_rss": ss["peak_rss_bytes"],
        "connector": ss["connector"],
        "batches": [
            f"{b['numInputRows']} rows in {b['durationMs'].get('triggerExecution', 0) / 1000:.1f} s"
            for b in ss["batches"]
        ],
        **check_output(broker, output, n),
    }


def _median_rate(samples: list[dict[str, Any]], n: int) -> float | None:
    good = [n / r["job_s"] for r in samples if r["correct"]]
    return statistics.median(good) if good else None


def _name(engine: str) -> str:
    base, _, ref = engine.partition("@")
    return f"{ENGINES[base]} at {ref}" if ref else ENGINES[base]


def _paired(runs: dict[str, list[dict[str, Any]]], a: str, b: str, key: str) -> float:
    """The median over rounds of a's figure over b's in the same round. The machine's speed drifts (one
    commit's CPU seconds spread by half over a command here), and within a round it drifts least."""
    return float(statistics.median(x[key] / y[key] for x, y in zip(runs[a], runs[b], strict=True)))


def _report_ab(runs: dict[str, list[dict[str, Any]]], ref: str) -> None:
    """Each Sluice engine on this checkout against itself on `ref`, and exactly-once's cost at `ref`, each
    as the median of the ratios within a round."""
    figures = (("job_s", "events/s"), ("cpu_s", "1/CPU s"), ("broker_cpu_s", "1/broker CPU s"))
    for base in ("eo", "alo"):
        if base in runs and f"{base}@{ref}" in runs:
            ratios = [f"{label} {_paired(runs, f'{base}@{ref}', base, key):.3f}x" for key, label in figures]
            print(f"{ENGINES[base]}, this checkout against {ref}, paired by round: {', '.join(ratios)}")
    if f"eo@{ref}" in runs and f"alo@{ref}" in runs:
        cost = 1 - _paired(runs, f"alo@{ref}", f"eo@{ref}", "job_s")
        print(f"At {ref}, paired by round: exactly-once costs {cost:.1%} of the at-least-once rate")


def report(runs: dict[str, list[dict[str, Any]]], n: int, baseline: str | None = None) -> None:
    rates = {e: _median_rate(s, n) for e, s in runs.items()}
    print(
        "| engine | events/s (median) | job s | wall s incl. start-up | CPU s | broker CPU s "
        "| peak RSS | output check |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for engine, samples in runs.items():
        rate = rates[engine]
        keys = ("job_s", "wall_s", "cpu_s", "broker_cpu_s")
        med = {k: statistics.median(r[k] for r in samples) for k in keys}
        peak = max(r["peak_rss"] for r in samples) / 2**20
        verdicts = "; ".join(sorted({r["verdict"] for r in samples}))
        shown = f"{rate:,.0f}" if rate is not None else "— (not timed: wrong output)"
        print(
            f"| {_name(engine)} | {shown} | {med['job_s']:.2f} | {med['wall_s']:.2f} | {med['cpu_s']:.2f} "
            f"| {med['broker_cpu_s']:.2f} | {peak:.0f} MiB | {verdicts} |"
        )
    print()
    eo, alo, ss = rates.get("eo"), rates.get("alo"), rates.get("ss")
    if eo is not None and ss is not None:
        met = "met" if eo / ss >= GOAL_VS_SS else "NOT met"
        print(
            f"Sluice exactly-once / Structured Streaming: {eo / ss:.2f}x (goal >= {GOAL_VS_SS:.0f}x: {met})"
        )
        paired_ss = _paired(runs, "ss", "eo", "job_s")
        print(f"The same, paired by round (the median of each round's ratio): {paired_ss:.2f}x")
    if eo is not None and alo is not None:
        cost = 1 - eo / alo
        met = "met" if cost < GOAL_EO_COST else "NOT met"
        print(
            f"Sluice at-least-once / exactly-once: {alo / eo:.2f}x; exactly-once costs {cost:.1%} of the "
            f"at-least-once rate (goal < {GOAL_EO_COST:.0%}: {met})"
        )
        paired = 1 - _paired(runs, "alo", "eo", "job_s")
        print(
            f"The same, paired by round (the median of each round's ratio): exactly-once costs {paired:.1%}"
        )
    if baseline:
        _report_ab(runs, baseline)
    print("\nRuns:")
    for engine, samples in runs.items():
        for r in samples:
            print(
                f"  {_name(engine)}: job {r['job_s']:.2f} s, wall {r['wall_s']:.2f} s, "
                f"CPU {r['cpu_s']:.2f} s, "
                f"broker CPU {r['broker_cpu_s']:.2f} s, {r['records']} records "
                f"({r['records_expected']} windows expected): {r['verdict']}"
                + (f"; micro-batches: {', '.join(r['batches'])}" if "batches" in r else "")
            )
    connector = next((r["connector"] for r in runs.get("ss", [])), None)
    if connector:
        print(f"\nStructured Streaming's connector: {', '.join(connector)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000, help="events in the input topic")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each engine, interleaved")
    parser.add_argument("--engines", default="eo,alo,ss", help=f"comma-separated, of {','.join(ENGINES)}")
    parser.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="untimed Sluice exactly-once runs first: they warm the broker's JVM and create its transaction "
        "state topic, which the first timed run of whichever engine came first paid for alone",
    )
    parser.add_argument(
        "--baseline", metavar="REF", help="also run Sluice's engines on this commit's runtime (an A/B)"
    )
    args = parser.parse_args()
    engines = args.engines.split(",")
    if unknown := [e for e in engines if e not in ENGINES]:
        parser.error(f"unknown engine(s) {unknown}: choose from {', '.join(ENGINES)}")
    if args.baseline:
        engines += [f"{e}@{args.baseline}" for e in engines if e != "ss"]
    if args.events <= 0 or args.repeat <= 0:
        parser.error("--events and --repeat must be positive")
    work = Path(tempfile.mkdtemp(prefix="sluice-w5-"))
    broker = KafkaBroker(libs=kafka_libs(), base_dir=work / "broker")
    broker.base_dir.mkdir()
    print(f"# W5, {args.events:,} events, {PARTITIONS} partitions ({environment_note()})\n", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
    stack = ExitStack()
    try:
        tree = (
            stack.enter_context(worktrees({"baseline": args.baseline}, work / "trees"))["baseline"]
            if args.baseline
            else None
        )
        broker.start()
        t0 = time.monotonic()
        source = fill_input(broker, args.events)
        print(f"input topic filled in {time.monotonic() - t0:.1f} s (not timed)\n", flush=True)
        for _ in range(args.warmup):
            warm = run_sluice(broker, source, args.events, "exactly-once", work)
            print(f"warm-up run (not counted): job {warm['job_s']:.2f} s, {warm['verdict']}\n", flush=True)
        for round_ in range(args.repeat):
            for engine in engines if round_ % 2 == 0 else engines[::-1]:
                base, _, ref = engine.partition("@")
                if base == "ss":
                    runs[engine].append(run_spark(broker, source, args.events, work))
                else:
                    delivery = "exactly-once" if base == "eo" else "at-least-once"
                    on = tree if ref else None
                    runs[engine].append(run_sluice(broker, source, args.events, delivery, work, on))
    finally:
        stack.close()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    report(runs, args.events, args.baseline)
    if not all(r["correct"] for samples in runs.values() for r in samples):
        sys.exit(1)


if __name__ == "__main__":
    main()

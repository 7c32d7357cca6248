"""Benchmark W1: the example pipeline (examples/w1_window_counts.py) against its peers, one command.

    .venv/bin/python bench/w1.py [--n 2000000] [--repeat 3]

Table 1 (issue 2): runs, interleaved `--repeat` times on this machine, Sluice on the process host,
Sluice on the Spark host (local[2]), and the same logic on PySpark Structured Streaming
(bench/_structured_streaming.py): events per second, the ratio to Structured Streaming, CPU seconds,
peak memory per TaskManager, and whether every window was emitted. Rates use each engine's job time:
for Sluice from the coordinator's start of the job to its result (TaskManager start-up included, each
run a fresh `sluice run` process), for Structured Streaming from the query's start() to the end of
awaitTermination() (SparkSession start-up excluded; shown apart). Medians; each run is listed below.

A row "Tight loop, one core x2" (issue 30) is W1's own functions applied record by record in a plain
Python loop (bench/_tight_loop.py), in a fresh interpreter interleaved with the other runs, its rate
doubled: what two cores would do with no engine; the table says what share of it each Sluice host reaches.

`--hosts-only` runs the Sluice rows alone and prints each host against the process host (issue 30:
the Spark host's job time at least 0.9x the process host's): events/s, job time and wall time.

Table 2 (issue 4): the Spark host against the process host (bench/_spark_host.py): processing rate
once records flow, on `--spark-n` events, time to first record cold (new process) and warm (a running
driver), peak memory per TaskManager.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import REPO, BenchJob, environment_note
from _structured_streaming import expected_windows, run_w1_structured_streaming

W1 = REPO / "examples" / "w1_window_counts.py"
TARGET_RATIO = 3.0
TIGHT_LOOP = "Tight loop, one core x2"
TARGET_OF_TIGHT_LOOP = 0.6


def _all_windows(out: Path, n: int) -> bool:
    emitted: collections.Counter[tuple[int, int, int, int]] = collections.Counter()
    for part in out.glob("part-*"):
        for line in part.read_text().splitlines():
            k, start, c, s = json.loads(line)
            emitted[(k, start, c, s)] += 1
    expected: collections.Counter[tuple[int, int, int, int]] = collections.Counter(
        (k, start, c, s) for (k, start), (c, s) in expected_windows(n).items()
    )
    return emitted == expected


def run_sluice(n: int, work: Path, host: str) -> dict[str, Any]:
    run = work / f"sluice-{host}-{time.monotonic_ns()}"
    out, chk = run / "out", run / "chk"
    job = BenchJob(
        W1,
        "--arg",
        f"n={n}",
        "--arg",
        f"out={out}",
        "--parallelism",
        "2",
        "--host",
        host,
        "--checkpoint-dir",
        f"file://{chk}",
        "--checkpoint-interval",
        "1s",
        "--job-id",
        "w1",
    )
    job.wait_ready()
    started_ms = job.get("/v1/job")["startTime"]
    wall = job.wait(1200)
    ended_ms = json.loads((chk / "w1" / "job-result.json").read_text())["timestamp"]
    job_s = (ended_ms - started_ms) / 1000
    return {
        "engine": f"Sluice, {host} host",
        "events_per_s": n / job_s,
        "job_s": job_s,
        "wall_s": wall,
        "cpu_s": sum(job.cpu.values()),
        "peak_rss_per_tm": job.max_peak_rss(),
        "all_windows": _all_windows(out, n),
    }


def run_tight_loop(n: int) -> dict[str, Any]:
    """W1's functions in a plain loop (bench/_tight_loop.py) in a fresh interpreter, its rate doubled:
    the figure two cores would reach with no engine at all."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("_tight_loop.py")), "--n", str(n)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    loop = json.loads(done.stdout)
    return {
        "engine": TIGHT_LOOP,
        "events_per_s": 2 * loop["events_per_s"],
        "job_s": loop["loop_s"] / 2,
        "wall_s": loop["loop_s"] / 2,
        "cpu_s": loop["cpu_s"],
        "peak_rss_per_tm": 0,
        "all_windows": loop["windows"] == len(expected_windows(n)),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hosts", default="processes,spark", help="Sluice hosts to run, comma-separated")
    parser.add_argument("--spark-n", type=int, default=6_000_000, help="events for table 2 (0: skip it)")
    parser.add_argument(
        "--hosts-only",
        action="store_true",
        help="only Sluice's host rows, each against the process host: no tight loop, no Structured Streaming",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sluice-w1-"))
    print(f"# W1, n = {args.n:,} ({environment_note()})\n")
    runs: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    try:
        for _ in range(args.repeat):
            for host in args.hosts.split(","):
                runs[f"Sluice, {host} host"].append(run_sluice(args.n, work, host))
            if args.hosts_only:
                continue
            runs[TIGHT_LOOP].append(run_tight_loop(args.n))
            ss = run_w1_structured_streaming(args.n, work / "ss")
            runs["Spark Structured Streaming"].append(
                {
                    "engine": "Spark Structured Streaming",
                    "events_per_s": ss["events_per_s"],
                    "job_s": ss["query_s"],
                    "wall_s": ss["query_s"] + ss["startup_s"],
                    "cpu_s": ss["query_cpu_s"],
                    "peak_rss_per_tm": ss["peak_rss_bytes"],
                    "all_windows": ss["all_windows_emitted"],
                    "note": ss["note"],
                }
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.hosts_only:
        _hosts_table(runs)
        return
    peer = statistics.median(r["events_per_s"] for r in runs["Spark Structured Streaming"])
    print(
        "| engine | events/s (median) | vs Structured Streaming | job s | wall s incl. start-up | CPU s "
        "| peak RSS per TaskManager | every window emitted |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for engine, samples in runs.items():
        rate = statistics.median(r["events_per_s"] for r in samples)
        job_s, wall_s, cpu_s = (
            statistics.median(r[k] for r in samples) for k in ("job_s", "wall_s", "cpu_s")
        )
        peak_bytes = max(r["peak_rss_per_tm"] for r in samples)
        peak = f"{peak_bytes / 2**20:.0f} MiB" if peak_bytes else "-"
        complete = all(r["all_windows"] for r in samples)
        print(
            f"| {engine} | {rate:,.0f} | {rate / peer:.2f}x | {job_s:.2f} | {wall_s:.2f} | {cpu_s:.2f} "
            f"| {peak} | {complete} |"
        )
    print(f"\nTarget: Sluice >= {TARGET_RATIO:.0f}x Structured Streaming events/s, < 1 GiB per TaskManager.")
    loop = statistics.median(r["events_per_s"] for r in runs[TIGHT_LOOP])
    for engine in [e for e in runs if e.startswith("Sluice")]:
        share = statistics.median(r["events_per_s"] for r in runs[engine]) / loop
        print(
            f"{engine}: {share:.0%} of the tight loop on two cores (target: process host >= "
            f"{TARGET_OF_TIGHT_LOOP:.0%})."
        )
    print(
        f"{TIGHT_LOOP}: W1's own functions record by record in one plain Python loop (bench/_tight_loop.py), "
        "no engine, its rate doubled; its CPU s is the loop's, its every-window check counts the windows."
    )
    print("Structured Streaming's peak RSS is its whole driver + JVM (it has no separate TaskManagers).")
    for note in {r.get("note") for r in runs["Spark Structured Streaming"]} - {None}:
        print(f"Structured Streaming: {note}.")
    print("\nEach run:")
    for engine, samples in runs.items():
        print(f"- {engine}: " + ", ".join(f"{r['events_per_s']:,.0f}/s" for r in samples))
    if args.spark_n:
        _spark_table(args.spark_n, args.repeat)


def _hosts_table(runs: dict[str, list[dict[str, Any]]]) -> None:
    """Each host's medians and their ratio to the process host's: events/s over the job time, and the
    job time itself (coordinator's start of the job to its result), wall time (process start to exit)."""
    base = runs.get("Sluice, processes host")
    print("| host | events/s (median) | ratio | job s | ratio | wall s incl. start-up | ratio | CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for engine, samples in runs.items():
        cells = []
        for key in ("events_per_s", "job_s", "wall_s"):
            value = statistics.median(r[key] for r in samples)
            ratio = value / statistics.median(r[key] for r in base) if base else float("nan")
            cells.append(f"{value:,.2f} | {ratio:.3f}x")
        cpu_s = statistics.median(r["cpu_s"] for r in samples)
        print(f"| {engine} | " + " | ".join(cells) + f" | {cpu_s:.2f} |")
    print("\nCPU s: the TaskManagers' (sampled while they run). Each run (events/s, job s, wall s):")
    for engine, samples in runs.items():
        print(
            f"- {engine}: "
            + ", ".join(f"{r['events_per_s']:,.0f} ({r['job_s']:.2f}, {r['wall_s']:.2f})" for r in samples)
        )


def _spark_table(n: int, rounds: int) -> None:
    from _spark_host import compare_w1

    result = compare_w1(n, rounds)
    medians = result["median"]
    print(f"\n# Spark host vs process host, W1 with n = {n:,}, {rounds} interleaved rounds\n")
    print("| host | events/s once records flow | ratio | first record cold | first record warm | memory |")
    print("|---|---|---|---|---|---|")
    base = medians["processes"]["events_per_s"]
    for host in ("processes", "spark"):
        m = medians[host]
        rss, pss = m["taskmanager_peak_rss_mb"], m["taskmanager_peak_pss_mb"]
        cold, warm = m["first_record_cold_s"], m["first_record_warm_s"]
        print(
            f"| {host} | {m['events_per_s']:,.0f} | {m['events_per_s'] / base:.2f} | {cold:.2f} s "
            f"| {warm:.2f} s "
            f"| RSS {rss:.0f} MB, PSS {pss:.0f} MB per TM |"
        )
    context_s, stage_s = result["spark_context_start_s"], result["spark_first_stage_s"]
    print(
        "\nTarget: Spark host within 10% of the process host. One-time costs of a Spark driver: "
        f"SparkContext {context_s:.1f} s, first stage {stage_s:.1f} s."
    )


if __name__ == "__main__":
    main()

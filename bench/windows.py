"""Benchmark W6: W1's events in per-key session windows (gap 500 ms) with 1% late events, Sluice against
PySpark Structured Streaming's `session_window`, in one command.

    .venv/bin/python bench/windows.py [--n 2000000] [--repeat 3]

Runs, interleaved `--repeat` times: Sluice (bench/pipelines/w6_sessions.py, process host, parallelism 2)
and Structured Streaming (bench/_w6_structured_streaming.py). Events per second use each engine's job
time as bench/w1.py does (Sluice: coordinator start of the job to its result; Spark: start() to the end
of awaitTermination(), SparkSession start-up apart). Every emitted session is checked against a
plain-Python reference over the on-time events (bench/_w6_events.py).

How the outputs differ, by design of each engine: both drop the late events (Sluice: no allowed
lateness; Spark: older than its watermark), neither emits late updates here. Sluice fires every session
at the end of the bounded input (the final watermark); Spark's append mode never emits the sessions of
the last block, since its watermark stops inside it. A session is right when its end, count and sum
equal the reference's.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import REPO, BenchJob, environment_note
from _w6_events import BLOCK, reference_sessions
from _w6_structured_streaming import run_w6_structured_streaming

W6 = REPO / "bench" / "pipelines" / "w6_sessions.py"
TARGET_RATIO = 3.0


def _sluice_sessions(out: Path) -> dict[tuple[int, int], tuple[int, int, int]]:
    sessions = {}
    for part in out.glob("part-*"):
        for line in part.read_text().splitlines():
            key, start, last, count, total = json.loads(line)
            sessions[(key, start)] = (last + 500, count, total)
    return sessions


def _check(got: dict[Any, Any], expected: dict[Any, Any], skip_from_ts: int | None) -> tuple[int, int, int]:
    """(right, wrong or extra, missing), leaving out sessions starting at or after `skip_from_ts`."""
    wanted = {s: v for s, v in expected.items() if skip_from_ts is None or s[1] < skip_from_ts}
    right = sum(1 for s, v in got.items() if wanted.get(s) == v)
    return right, len(got) - right, len(wanted) - right


def run_sluice(n: int, work: Path) -> dict[str, Any]:
    run = work / f"sluice-{time.monotonic_ns()}"
    out, chk = run / "out", run / "chk"
    job = BenchJob(
        W6,
        "--arg",
        f"n={n}",
        "--arg",
        f"out={out}",
        "--parallelism",
        "2",
        "--host",
        "processes",
        "--checkpoint-dir",
        f"file://{chk}",
        "--checkpoint-interval",
        "1s",
        "--job-id",
        "w6",
    )
    job.wait_ready()
    started_ms = job.get("/v1/job")["startTime"]
    wall = job.wait(1800)
    ended_ms = json.loads((chk / "w6" / "job-result.json").read_text())["timestamp"]
    job_s = (ended_ms - started_ms) / 1000
    return {
        "events_per_s": n / job_s,
        "job_s": job_s,
        "wall_s": wall,
        "cpu_s": sum(job.cpu.values()),
        "peak_rss": job.max_peak_rss(),
        "sessions": _sluice_sessions(out),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.n < 3 * BLOCK:
        parser.error(f"--n must be at least {3 * BLOCK} (three blocks of events)")
    work = Path(tempfile.mkdtemp(prefix="sluice-w6-"))
    expected = reference_sessions(args.n)
    last_block_ts = ((args.n - 1) // BLOCK) * (BLOCK // 10 + 1000)
    print(f"# W6, n = {args.n:,}, {len(expected):,} sessions ({environment_note()})\n")
    runs: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    try:
        for _ in range(args.repeat):
            sluice = run_sluice(args.n, work)
            sluice["check"] = _check(sluice.pop("sessions"), expected, None)
            runs["Sluice, process host"].append(sluice)
            ss = run_w6_structured_streaming(args.n, work / "ss")
            runs["Spark Structured Streaming"].append(
                {
                    "events_per_s": args.n / ss["query_s"],
                    "job_s": ss["query_s"],
                    "wall_s": ss["query_s"] + ss["startup_s"],
                    "cpu_s": ss["query_cpu_s"],
                    "peak_rss": ss["peak_rss_bytes"],
                    # Its last block's sessions are never emitted (see the module docstring).
                    "check": _check(ss["sessions"], expected, last_block_ts),
                }
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    peer = statistics.median(r["events_per_s"] for r in runs["Spark Structured Streaming"])
    print(
        "| engine | events/s (median) | vs Structured Streaming | job s | wall s | CPU s | peak RSS "
        "| sessions right / wrong / missing |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for engine, samples in runs.items():
        rate = statistics.median(r["events_per_s"] for r in samples)
        job_s, wall_s, cpu_s = (
            statistics.median(r[k] for r in samples) for k in ("job_s", "wall_s", "cpu_s")
        )
        peak = max(r["peak_rss"] for r in samples) / 2**20
        right, wrong, missing = samples[-1]["check"]
        print(
            f"| {engine} | {rate:,.0f} | {rate / peer:.2f}x | {job_s:.2f} | {wall_s:.2f} | {cpu_s:.2f} "
            f"| {peak:.0f} MiB | {right:,} / {wrong:,} / {missing:,} |"
        )
    print(f"\nTarget: Sluice >= {TARGET_RATIO:.0f}x Structured Streaming events/s, every session right.")
    print("Spark's sessions of the last block are left out of its check: append mode never emits them.")
    print("\nEach run:")
    for engine, samples in runs.items():
        print(f"- {engine}: " + ", ".join(f"{r['events_per_s']:,.0f}/s {r['check']}" for r in samples))


if __name__ == "__main__":
    main()

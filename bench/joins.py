"""Benchmark W7: an interval join of two W1-shaped streams (+-500 ms), Sluice against Structured
Streaming's stream-stream join, in one command.

    .venv/bin/python bench/joins.py [--n 2000000] [--repeat 3] [--files-per-trigger 2]

Runs, interleaved `--repeat` times: Sluice (bench/pipelines/w7_interval_join.py, process host,
parallelism 2, checkpoints every second) and Structured Streaming (bench/_w7_structured_streaming.py,
local[2], each side in files of 50,000 events, `--files-per-trigger` of them per micro-batch). Events
per second count both sides (2 n events) over each engine's job time, as bench/w1.py does (Sluice: the
coordinator's start of the job to its result; Spark: start() to the end of awaitTermination(),
SparkSession start-up apart). Both outputs are checked against plain Python
(bench/_w7_events.py): the number of pairs and a checksum over them.

State over time: while Sluice runs, the state size of each completed checkpoint (`stateSize` of
GET /v1/job's last completed checkpoint) is sampled; an interval join drops the rows the watermark has
passed beyond the bound, so it stays flat while the input grows (steady state), and the table shows it
at a quarter, half and three quarters of the run. Spark's join state rows after each micro-batch are
shown the same way: its watermark drops them between micro-batches.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _harness import REPO, BenchJob, environment_note
from _w7_events import reference_pairs
from _w7_structured_streaming import FILES_PER_TRIGGER, run_w7_structured_streaming

W7 = REPO / "bench" / "pipelines" / "w7_interval_join.py"
TARGET_RATIO = 3.0


def _sluice_pairs(out: Path, n: int) -> tuple[int, int]:
    count = checksum = 0
    for part in out.glob("part-*"):
        for line in part.read_text().splitlines():
            i, j = json.loads(line)
            count += 1
            checksum += i * n + j
    return count, checksum


def _sample_state(job: BenchJob, samples: list[tuple[float, int]], done: threading.Event) -> None:
    seen: set[int] = set()
    while not done.is_set():
        try:
            last = job.get("/v1/job")["checkpoints"]["lastCompleted"]
        except (OSError, KeyError, TypeError):
            last = None
        if last and last.get("id") not in seen and last.get("stateSize") is not None:
            seen.add(last["id"])
            samples.append((time.monotonic(), int(last["stateSize"])))
        done.wait(0.2)


def run_sluice(n: int, work: Path) -> dict[str, Any]:
    run = work / f"sluice-{time.monotonic_ns()}"
    out, chk = run / "out", run / "chk"
    job = BenchJob(
        W7,
        "--arg", f"n={n}",
        "--arg", f"out={out}",
        "--parallelism", "2",
        "--host", "processes",
        "--checkpoint-dir", f"file://{chk}",
        "--checkpoint-interval", "1s",
        "--job-id", "w7",
    )  # fmt: skip
    job.wait_ready()
    started_ms = job.get("/v1/job")["startTime"]
    samples: list[tuple[float, int]] = []
    done = threading.Event()
    sampler = threading.Thread(target=_sample_state, args=(job, samples, done), daemon=True)
    sampler.start()
    try:
        wall = job.wait(3600)
    finally:
        done.set()
        sampler.join()
    ended_ms = json.loads((chk / "w7" / "job-result.json").read_text())["timestamp"]
    job_s = (ended_ms - started_ms) / 1000
    return {
        "events_per_s": 2 * n / job_s,
        "job_s": job_s,
        "wall_s": wall,
        "cpu_s": sum(job.cpu.values()),
        "peak_rss": job.max_peak_rss(),
        "pairs": _sluice_pairs(out, n),
        "state": [size for _, size in samples],
    }


def _quartiles(state: list[int], unit: float = 2**20, suffix: str = " MiB", digits: int = 1) -> str:
    if len(state) < 4:
        return "too few samples"
    return " / ".join(f"{state[len(state) * q // 4] / unit:,.{digits}f}" for q in (1, 2, 3)) + suffix


def _progress(engine: str, run: dict[str, Any]) -> None:
    """One run as soon as it ended: a long run's figures are not lost if a later one is stopped."""
    print(
        f"({engine}: {run['events_per_s']:,.0f} events/s, job {run['job_s']:.1f} s, "
        f"CPU {run['cpu_s']:.1f} s, {run['pairs'][0]:,} pairs)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2_000_000, help="events per side")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--files-per-trigger",
        type=int,
        default=FILES_PER_TRIGGER,
        help="Structured Streaming's maxFilesPerTrigger (files of 50,000 events, per side)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sluice-w7-"))
    expected = reference_pairs(args.n)
    print(f"# W7, n = {args.n:,} events per side, {expected[0]:,} pairs ({environment_note()})\n")
    runs: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    try:
        for _ in range(args.repeat):
            sluice = run_sluice(args.n, work)
            runs["Sluice, process host"].append(sluice)
            _progress("Sluice", sluice)
            ss = run_w7_structured_streaming(args.n, work / "ss", files_per_trigger=args.files_per_trigger)
            peer_run = {
                "events_per_s": 2 * args.n / ss["query_s"],
                "job_s": ss["query_s"],
                "wall_s": ss["query_s"] + ss["startup_s"],
                "cpu_s": ss["query_cpu_s"],
                "peak_rss": ss["peak_rss_bytes"],
                "pairs": ss["pairs"],
                "batches": ss["batches"],
            }
            runs["Spark Structured Streaming"].append(peer_run)
            _progress("Structured Streaming", peer_run)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    peer = statistics.median(r["events_per_s"] for r in runs["Spark Structured Streaming"])
    print(
        "| engine | events/s (median) | vs Structured Streaming | job s | wall s | CPU s | peak RSS "
        "| pairs right |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for engine, samples in runs.items():
        rate = statistics.median(r["events_per_s"] for r in samples)
        job_s, wall_s, cpu_s = (
            statistics.median(r[k] for r in samples) for k in ("job_s", "wall_s", "cpu_s")
        )
        peak = max(r["peak_rss"] for r in samples) / 2**20
        right = all(r["pairs"] == expected for r in samples)
        print(
            f"| {engine} | {rate:,.0f} | {rate / peer:.2f}x | {job_s:.2f} | {wall_s:.2f} | {cpu_s:.2f} "
            f"| {peak:.0f} MiB | {'yes' if right else 'NO'} |"
        )
    print(f"\nTarget: Sluice >= {TARGET_RATIO:.0f}x Structured Streaming events/s, every pair right.")
    print(
        "\nSluice's checkpointed state at 1/4, 1/2, 3/4 of each run "
        "(steady state: flat while the input grows):"
    )
    for r in runs["Sluice, process host"]:
        print(f"- {_quartiles(r['state'])} over {len(r['state'])} checkpoints")
    print(
        f"\nStructured Streaming's join state rows after 1/4, 1/2, 3/4 of its micro-batches "
        f"({args.files_per_trigger} files of 50,000 events per side each):"
    )
    for r in runs["Spark Structured Streaming"]:
        rows = [b["state_rows"] for b in r["batches"]]
        peak = max(rows, default=0)
        print(f"- {_quartiles(rows, 1, ' rows', 0)} over {len(rows)} micro-batches, at most {peak:,}")
    print("\nEach run:")
    for engine, samples in runs.items():
        print(
            f"- {engine}: "
            + ", ".join(f"{r['events_per_s']:,.0f}/s pairs {r['pairs'][0]:,}" for r in samples)
        )


if __name__ == "__main__":
    main()

"""Benchmark W4: keyed state at 10k, 2M and 20M keys, checkpointing every second, one command.

    .venv/bin/python bench/state.py [--keys 10000,2000000,20000000] [--seconds 60]
        [--state-backend heap,heap,disk] [--kill / --no-kill] [--fill] [--peer / --no-peer]

For each key count, `sluice run --host processes --parallelism 2 --checkpoint-interval 1s` runs
bench/_state_w4.py (a generator keyed by `i % keys` into a keyed process function counting per key in
ValueState, nothing emitted) for `--seconds` after its first record, then is cancelled. Reported:
records/s through the counting operator over the run (after a warm-up of a fifth of it), the keys in
state at its end, how many checkpoints completed while it was timed and the longest time between two
completions (is there one every interval?), checkpoint duration p50/max, the synchronous part
p50/max (the time record processing stopped for the snapshot), bytes written per checkpoint (p50), the
full state size of the last checkpoint, and the peak RSS of a TaskManager (alone, and sampled with
its compaction process's). At the end of the largest
key count a TaskManager is SIGKILLed and the time until the restarted job counts records again is
reported. By default 10k and 2M keys use the heap backend (the default of `sluice run`) and 20M keys
the disk backend. Then the peer, Spark Structured Streaming with
the RocksDB state store, on the same count (bench/_state_spark.py).

In 60 s the largest key count does not reach every key; `--fill` times its run only once every key is
in state (a record then updates a key it holds, rather than adding one).
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import signal
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import REPO, BenchJob, environment_note

W4 = REPO / "bench" / "_state_w4.py"


def _records_in(job: BenchJob) -> int:
    view = job.get("/v1/job")
    return sum(v["metrics"]["recordsIn"] for v in view["vertices"] if "count" in v["uids"])


def _recover(job: BenchJob) -> float:
    """SIGKILLs a TaskManager; seconds until the restarted job counts records again."""
    before = job.get("/v1/job")
    victim = before["taskManagers"][-1]["pid"]
    started = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    while job.get("/v1/job")["restarts"] <= before["restarts"]:
        time.sleep(0.05)
    last = None
    while True:
        view = job.get("/v1/job")
        counted = sum(v["metrics"]["recordsIn"] for v in view["vertices"] if "count" in v["uids"])
        if view["state"] == "RUNNING" and last is not None and counted > last:
            return time.monotonic() - started
        last = counted if view["state"] == "RUNNING" else None
        time.sleep(0.05)


def run_sluice(
    keys: int, seconds: float, work: Path, backend: str | None, kill: bool, fill: bool = False
) -> dict[str, Any]:
    chk = work / f"chk-{keys}-{time.monotonic_ns()}"
    options = ["--arg", f"keys={keys}", "--parallelism", "2", "--host", "processes"]
    options += ["--checkpoint-dir", f"file://{chk}", "--checkpoint-interval", "1s", "--job-id", "w4"]
    if backend is not None:
        options += ["--state-backend", backend]
    job = BenchJob(W4, *options)
    try:
        job.wait_ready()
        while _records_in(job) == 0:
            time.sleep(0.1)
        filled_s = None
        if fill:  # every key in state before the run is timed: each record then updates a known key
            started = time.monotonic()
            while _records_in(job) < keys:
                time.sleep(0.5)
            filled_s = time.monotonic() - started
        warmup = seconds / 5
        time.sleep(warmup)
        t0, n0, t0_ms = time.monotonic(), _records_in(job), time.time() * 1000
        time.sleep(seconds - warmup)
        t1, n1, t1_ms = time.monotonic(), _records_in(job), time.time() * 1000
        history = job.get("/v1/checkpoints")["history"]
        recovery = _recover(job) if kill else None
        job.post("/v1/job/cancel", {})
        job.process.wait(120)  # a canceled job exits non-zero by design
    finally:
        if job.process.poll() is None:
            job.process.kill()
        shutil.rmtree(chk, ignore_errors=True)
    done = [c for c in history if c["status"] == "COMPLETED" and c["kind"] == "checkpoint"]
    # Whether a checkpoint completed every interval: completions while the run was timed, against the
    # seconds it was timed, and the longest time between two completions in the whole run.
    ends = sorted(c["completionTime"] for c in done)
    timed = [e for e in ends if t0_ms <= e <= t1_ms]
    failed = sum(c["status"] == "FAILED" for c in history)
    durations = [c["completionTime"] - c["triggerTime"] for c in done]
    sync = [c["syncMs"] for c in done if c.get("syncMs") is not None]
    # Where a checkpoint's time goes: the barrier queued behind records in flight (start delay), the
    # barriers of the two inputs aligned, the state written beside processing (async).
    parts = {
        name: statistics.median(values) if (values := [c.get(key) or 0.0 for c in done]) else None
        for name, key in (("delay", "startDelayMs"), ("alignment", "alignmentMs"), ("async", "asyncMs"))
    }
    written = [c["bytesWritten"] for c in done if c.get("bytesWritten") is not None]
    full = [c["stateSize"] for c in done if c.get("stateSize") is not None]
    return {
        "keys": keys,
        "records_per_s": (n1 - n0) / (t1 - t0),
        "checkpoints": len(done),
        "timed_completions": len(timed),
        "timed_s": (t1_ms - t0_ms) / 1000,
        "longest_gap_ms": max((b - a for a, b in itertools.pairwise(ends)), default=None),
        "keys_in_state": min(n1, keys),
        "filled_s": filled_s,
        "failed": failed,
        "duration_ms": (statistics.median(durations), max(durations)) if durations else None,
        "sync_ms": (statistics.median(sync), max(sync)) if sync else None,
        "parts_p50": parts,
        "written_p50": statistics.median(written) if written else None,
        "state_size": full[0] if full else None,
        "peak_rss": job.max_peak_rss(),
        "peak_rss_with_compaction": job.max_peak_rss_with_children(),
        "backend": backend or "heap",
        "recovery_s": recovery,
    }


def _mib(n: float | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:,.1f} MiB"


def _pair(p: tuple[float, float] | None) -> str:
    return "n/a" if p is None else f"{p[0]:,.0f} / {p[1]:,.0f}"


def _parts(parts: dict[str, float | None]) -> str:
    return "p50 of " + ", ".join(
        f"{name} {'n/a' if v is None else f'{v:,.0f}'} ms" for name, v in parts.items()
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keys", default="10000,2000000,20000000", help="key counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=60.0, help="run time per key count")
    parser.add_argument(
        "--state-backend",
        default="heap,heap,disk",
        help="sluice run --state-backend per key count, comma-separated (the last one repeats)",
    )
    parser.add_argument(
        "--kill",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="at the end of the largest key count, SIGKILL a TaskManager and time the recovery",
    )
    parser.add_argument(
        "--fill",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="at the largest key count, time the run only once every key is in state",
    )
    parser.add_argument("--peer", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--sluice", action=argparse.BooleanOptionalAction, default=True, help="--no-sluice: peer only"
    )
    args = parser.parse_args()
    keys = [int(k) for k in args.keys.split(",")]
    work = Path(tempfile.mkdtemp(prefix="sluice-w4-"))
    print(f"# W4, {args.seconds:g} s per key count ({environment_note()})\n")
    rows = []
    try:
        backends = args.state_backend.split(",")
        for i, k in enumerate(keys if args.sluice else []):
            backend = backends[min(i, len(backends) - 1)]
            last = i == len(keys) - 1
            rows.append(run_sluice(k, args.seconds, work, backend, args.kill and last, args.fill and last))
            base = rows[0]["records_per_s"]
            r = rows[-1]
            print(
                f"keys {k:,}: {r['records_per_s']:,.0f} records/s ({r['records_per_s'] / base:.2f}x), "
                f"keys in state {r['keys_in_state']:,}"
                + ("" if r["filled_s"] is None else f" (filled in {r['filled_s']:.0f} s before timing)")
                + f", checkpoints {r['checkpoints']} completed / {r['failed']} failed, "
                f"{r['timed_completions']} completed in the {r['timed_s']:.0f} s timed, longest time "
                f"between completions {r['longest_gap_ms'] or 0:,.0f} ms, duration p50/max "
                f"{_pair(r['duration_ms'])} ms ({_parts(r['parts_p50'])}), "
                f"sync p50/max {_pair(r['sync_ms'])} ms, written p50 "
                f"{_mib(r['written_p50'])}, state {_mib(r['state_size'])}, TaskManager peak RSS "
                f"{_mib(r['peak_rss'])}, with its compaction process {_mib(r['peak_rss_with_compaction'])} "
                f"({r['backend']} backend)"
                + ("" if r["recovery_s"] is None else f", recovery after SIGKILL {r['recovery_s']:.1f} s"),
                flush=True,
            )
        peers = []
        if args.peer:
            from _state_spark import run_w4_structured_streaming

            for k in keys:
                peers.append(run_w4_structured_streaming(k, args.seconds, work / f"ss-{k}"))
                p = peers[-1]
                if p["records_per_s"] is None:
                    print(f"peer keys {k:,}: {p['note']}", flush=True)
                    continue
                print(
                    f"peer keys {k:,}: {p['records_per_s']:,.0f} records/s, "
                    f"batch p50 {p['batch_ms_p50']} ms, "
                    f"state commit p50/max {p['commit_ms_p50']} / {p['commit_ms_max']} ms, peak RSS "
                    f"{_mib(p['peak_rss_bytes'])}",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        "\n| keys | backend | records/s | vs 10k | checkpoint p50 / max ms | sync part p50 / max ms "
        "| written per checkpoint p50 | full state | TaskManager peak RSS (alone / with compaction) "
        "| peer records/s | Sluice / peer |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    base = rows[0]["records_per_s"] if rows else 0.0
    for i, r in enumerate(rows):
        peer = peers[i]["records_per_s"] if i < len(peers) else None
        shown = f"{peer:,.0f}" if peer else ("n/a" if i >= len(peers) else peers[i]["note"])
        ratio = f"{r['records_per_s'] / peer:.2f}x" if peer else "n/a"
        print(
            f"| {r['keys']:,} | {r['backend']} | {r['records_per_s']:,.0f} "
            f"| {r['records_per_s'] / base:.2f}x "
            f"| {_pair(r['duration_ms'])} | {_pair(r['sync_ms'])} | {_mib(r['written_p50'])} "
            f"| {_mib(r['state_size'])} | {_mib(r['peak_rss'])} / {_mib(r['peak_rss_with_compaction'])} "
            f"| {shown} "
            f"| {ratio} |"
        )
    print(
        "\nGoals (issue 12): 2M keys >= 0.70x the 10k rate with checkpoint p50 < 300 ms; 20M keys at <= 1 GiB"
        " per TaskManager with a checkpoint completing every interval. The peer's peak RSS is its whole JVM"
        " + driver; its 'state commit' is RocksDB's flush + checkpoint latency per batch."
    )
    for r in rows:
        if r["recovery_s"] is not None:
            print(
                f"Recovery at {r['keys']:,} keys ({r['backend']} backend): {r['recovery_s']:.1f} s from "
                "SIGKILL of a TaskManager to records counted again (restart, restore of the last checkpoint)."
            )


if __name__ == "__main__":
    main()

"""State TTL steady state: ever-new keys with a 10 s time-to-live for 10 minutes, one command.

    .venv/bin/python bench/ttl_steady_state.py [--minutes 10] [--every 30] [--rate 2000]
        [--ttl-ms 10000] [--state-backend heap,disk]

Per backend, `sluice run --host processes --parallelism 2 --checkpoint-interval 5s` runs
bench/_ttl_job.py: `--rate` new keys a second, each kept in a ValueState and a MapState with a TTL of
`--ttl-ms`. Every `--every` seconds it samples the state's size in the last completed checkpoint
(bytes, from REST), the keys the backends hold (entries, the job's own probe), and the TaskManagers'
resident memory (RSS), alone and with their compaction processes (the disk backend's, while one
runs). It prints the series, then per figure the mean of the last third of the samples over the mean
of the first third: a steady state is ~1.0, while without expiry the entries would grow with every key
seen (rate x seconds). Expected entries at steady state are about rate x TTL per state (plus what
expires between cleanups): `held/expected` is the entries over 2 x TTL x the arrival rate since the
previous sample, ~1.0 at steady state whatever the rate a shared machine allows.

The machine may be shared: the figures are sizes, not rates, so other load does not change them much.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import REPO, BenchJob, environment_note, rss_bytes, with_children_rss_bytes

JOB = REPO / "bench" / "_ttl_job.py"


def _checkpoint_bytes(job: BenchJob) -> int | None:
    history = job.get("/v1/checkpoints")["history"]
    done = [c for c in history if c["status"] == "COMPLETED" and c.get("stateSize") is not None]
    return max(done, key=lambda c: c["completionTime"])["stateSize"] if done else None


def _entries(probe: Path) -> int | None:
    counts = []
    for file in probe.glob("entries-*"):
        if not file.name.endswith(".new"):
            counts.append(int(file.read_text()))
    return sum(counts) if counts else None


def _sample(job: BenchJob, probe: Path, started: float) -> dict[str, Any]:
    view = job.get("/v1/job")
    records = sum(v["metrics"]["recordsIn"] for v in view["vertices"] if "remember" in v["uids"])
    return {
        "s": time.monotonic() - started,
        "records": records,
        "checkpoint_bytes": _checkpoint_bytes(job),
        "entries": _entries(probe),
        "rss": sum(rss_bytes(tm["pid"]) for tm in view["taskManagers"]),
        "rss_with_compaction": sum(with_children_rss_bytes(tm["pid"]) for tm in view["taskManagers"]),
    }


def run(backend: str, args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    probe = work / f"probe-{backend}"
    probe.mkdir()
    options = ["--host", "processes", "--parallelism", "2", "--state-backend", backend]
    options += ["--checkpoint-dir", f"file://{work / f'chk-{backend}'}", "--checkpoint-interval", "5s"]
    options += ["--arg", f"rate={args.rate}", "--arg", f"ttl_ms={args.ttl_ms}", "--arg", f"probe={probe}"]
    job = BenchJob(JOB, *options, "--job-id", f"ttl-{backend}")
    samples: list[dict[str, Any]] = []
    try:
        job.wait_ready()
        while _sample(job, probe, 0.0)["records"] == 0:  # TaskManagers starting: time from the first key
            time.sleep(0.2)
        started = time.monotonic()
        end = started + args.minutes * 60
        while (due := started + (len(samples) + 1) * args.every) <= end + 0.5:
            time.sleep(max(0.0, due - time.monotonic()))
            sample = _sample(job, probe, started)
            previous = samples[-1] if samples else {"s": 0.0, "records": 0}
            # The arrival rate since the previous sample: on a shared machine it varies, and the entries
            # held follow it. Held over expected is the steady-state figure independent of it.
            recent_rate = (sample["records"] - previous["records"]) / (sample["s"] - previous["s"])
            expected = 2 * recent_rate * args.ttl_ms / 1000
            sample["held"] = sample["entries"] / expected if sample["entries"] and expected else None
            samples.append(sample)
            print(f"  {backend}: {_row(sample)}", flush=True)
        job.post("/v1/job/cancel", {})
        job.process.wait(120)  # a cancelled job exits non-zero by design
    finally:
        if job.process.poll() is None:
            job.process.kill()
    return samples


def _mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**20:.1f} MiB"


def _row(s: dict[str, Any]) -> str:
    entries = "-" if s["entries"] is None else f"{s['entries']:,}"
    return (
        f"{s['s']:6.0f} s  keys seen {s['records']:>10,}  checkpoint {_mib(s['checkpoint_bytes']):>10}  "
        f"entries {entries:>8}  RSS {_mib(s['rss'])} (with compaction {_mib(s['rss_with_compaction'])})"
        f"  held/expected {'-' if s.get('held') is None else format(s['held'], '.2f')}"
    )


def _third_ratio(samples: list[dict[str, Any]], figure: str, settled_s: float) -> str:
    """Mean of the last third over mean of the first third, of the samples taken once the state had
    time to settle (two TTLs after the first key: before that the first keys have not expired yet)."""
    known = [s[figure] for s in samples if s["s"] >= settled_s and s[figure] is not None]
    third = len(known) // 3
    if third == 0:
        return "- (fewer than 3 samples)"
    first, last = statistics.mean(known[:third]), statistics.mean(known[-third:])
    return f"{last / first:.2f}" if first else "-"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="run time per backend")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--rate", type=float, default=2000.0, help="new keys a second")
    parser.add_argument("--ttl-ms", type=int, default=10_000, help="the states' time-to-live")
    parser.add_argument("--state-backend", default="heap,disk", help="backends to run, comma-separated")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sluice-ttl-"))
    print(
        f"# TTL steady state: {args.rate:g} new keys/s, TTL {args.ttl_ms} ms, {args.minutes:g} min per "
        f"backend, a sample every {args.every:g} s ({environment_note()})\n",
        flush=True,
    )
    try:
        results = {backend: run(backend, args, work) for backend in args.state_backend.split(",")}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    settled_s = 2 * args.ttl_ms / 1000
    print(f"\nRatios over the samples from {settled_s:g} s on (two TTLs after the first key).")
    print("\n| backend | samples | last/first third: checkpoint bytes | entries | RSS | RSS with compaction "
          "| held/expected, mean | entries max | keys seen |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for backend, samples in results.items():
        entries = [s["entries"] for s in samples if s["entries"] is not None]
        figures = ("checkpoint_bytes", "entries", "rss", "rss_with_compaction")
        ratios = [_third_ratio(samples, f, settled_s) for f in figures]
        held = [x["held"] for x in samples if x["s"] >= settled_s and x["held"] is not None]
        ratios.append(f"{statistics.mean(held):.2f}" if held else "-")
        seen = samples[-1]["records"] if samples else 0
        rate = seen / samples[-1]["s"] if samples else 0.0
        print(
            f"| {backend} | {len(samples)} | {' | '.join(ratios)} | {max(entries, default=0):,} "
            f"(rate x TTL x 2 states: {int(rate * args.ttl_ms / 1000) * 2:,}) | {seen:,} |"
        )


if __name__ == "__main__":
    main()

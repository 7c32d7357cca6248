"""What Spark's own authentication costs on the default host: W1 before and after it was turned on.

    .venv/bin/python bench/spark_auth_cost.py [--n 2000000] [--repeat 3] [--baseline REF] [--candidate REF]

Runs W1 (examples/w1_window_counts.py, parallelism 2, checkpoints every second) on the Spark host
(`local[2]`) on two commits, each from a temporary git worktree, interleaved `--repeat` times:

- `before`: REF, by default the parent of the commit that added
  `runtime/sluice/hosts/spark/_launch_file.py` (Spark's RPC and block transfer unauthenticated, the
  launch settings in the task closure);
- `authenticated`: `--candidate` REF, default HEAD (`spark.authenticate` and
  `spark.network.crypto.enabled` on, the launch settings in a private file).

Each run is a fresh `sluice run` process; the rate is n over the coordinator's job time, which includes
submitting the TaskManager stage and starting its Python workers (where Spark's authentication does its
handshakes) but not the driver JVM's start. Beside it, the CPU seconds of the whole run (the driver,
its JVM, the Python daemon and the TaskManager workers, each process sampled from /proc every 50 ms):
on a machine shared with other work the rate swings by a factor of two or more from run to run, the
CPU a run needs much less. HEAD differs from the baseline in everything committed since: give the
commit that turned authentication on as candidate to measure it alone.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _harness import TreeCpu, environment_note
from _w1_trees import git, parent_of_commit_adding, run_w1, worktrees

_LAUNCH_FILE = "runtime/sluice/hosts/spark/_launch_file.py"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", default=None, help="git ref before Spark's authentication")
    parser.add_argument("--candidate", default="HEAD", help="git ref with it")
    args = parser.parse_args()
    commits = {
        "before": git("rev-parse", "--short", args.baseline or parent_of_commit_adding(_LAUNCH_FILE)),
        "authenticated": git("rev-parse", "--short", args.candidate),
    }
    work = Path(tempfile.mkdtemp(prefix="sluice-spark-auth-"))
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in commits}
    title = f"W1 on the Spark host before and with Spark's authentication, n = {args.n:,}"
    print(f"# {title} ({environment_note()})\n")
    try:
        with worktrees(commits, work) as trees:
            order = list(commits)
            for r in range(args.repeat):
                for variant in order if r % 2 == 0 else order[::-1]:
                    log = work / f"spark-{variant.replace(' ', '')}-{r}.log"
                    spark = ("--host", "spark", "--spark-log", str(log))
                    with TreeCpu() as cpu:
                        run = run_w1(args.n, work, variant, trees[variant], *spark)
                    runs[variant].append({**run, "tree_cpu_s": cpu.total()})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = {key: statistics.median(r[key] for r in runs["before"]) for key in ("events_per_s", "tree_cpu_s")}
    print("| variant | commit | events/s (median) | vs before | CPU s of the run (median) | vs before |")
    print("|---|---|---|---|---|---|")
    for variant, samples in runs.items():
        rate = statistics.median(r["events_per_s"] for r in samples)
        cpu = statistics.median(r["tree_cpu_s"] for r in samples)
        print(
            f"| {variant} | {commits[variant]} | {rate:,.0f} | {rate / base['events_per_s']:.3f}x "
            f"| {cpu:.1f} | {cpu / base['tree_cpu_s']:.3f}x |"
        )
    print("\nEach run:")
    for variant, samples in runs.items():
        print(
            f"- {variant}: "
            + ", ".join(f"{r['events_per_s']:,.0f}/s ({r['tree_cpu_s']:.1f} CPU s)" for r in samples)
        )


if __name__ == "__main__":
    main()

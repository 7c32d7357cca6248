"""What subtask metrics cost: W1 on the runtime before and after they were added, one command.

    .venv/bin/python bench/metrics_cost.py [--n 2000000] [--repeat 3] [--baseline REF] [--candidate REF]

Runs W1 (examples/w1_window_counts.py, parallelism 2, process host, checkpoints every second) on two
commits, each from a temporary git worktree, interleaved `--repeat` times:

- `before`: REF, by default the parent of the commit that added `runtime/sluice/engine/_task_metrics.py`
  (the task loop's wait clocks, the heartbeat's extra figures, the coordinator's rate window);
- `with metrics`: `--candidate` REF, default HEAD.

Each run is a fresh `sluice run` process; the rate is n over the coordinator's job time. The ratio is
the candidate's median events/s over the baseline's. Give as candidate the commit that completed the
metrics to measure them alone: HEAD differs from the baseline in everything committed since.
"""

from __future__ import annotations

import argparse
import statistics

from _harness import environment_note
from _w1_trees import git, interleaved_w1, parent_of_commit_adding

_TASK_METRICS = "runtime/sluice/engine/_task_metrics.py"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", default=None, help="git ref without subtask metrics")
    parser.add_argument("--candidate", default="HEAD", help="git ref with them")
    args = parser.parse_args()
    commits = {
        "before": git("rev-parse", "--short", args.baseline or parent_of_commit_adding(_TASK_METRICS)),
        "with metrics": git("rev-parse", "--short", args.candidate),
    }
    print(f"# W1 before and with subtask metrics, n = {args.n:,} ({environment_note()})\n")
    runs = interleaved_w1(commits, args.n, args.repeat, "sluice-metrics-")
    base = statistics.median(r["events_per_s"] for r in runs["before"])
    print("| variant | commit | events/s (median) | vs before | TaskManager CPU s (median) |")
    print("|---|---|---|---|---|")
    for variant, samples in runs.items():
        rate = statistics.median(r["events_per_s"] for r in samples)
        cpu = statistics.median(r["cpu_s"] for r in samples)
        print(f"| {variant} | {commits[variant]} | {rate:,.0f} | {rate / base:.3f}x | {cpu:.2f} |")
    print("\nEach run:")
    for variant, samples in runs.items():
        print(
            f"- {variant}: "
            + ", ".join(f"{r['events_per_s']:,.0f}/s ({r['cpu_s']:.2f} CPU s)" for r in samples)
        )


if __name__ == "__main__":
    main()

"""W1 on two commits side by side: what a change to the engine costs or saves, in CPU seconds too.

    .venv/bin/python bench/ab_w1.py --baseline REF [--candidate REF] [--n 2000000] [--repeat 5]
        [--host processes|spark]

Runs W1 (examples/w1_window_counts.py, parallelism 2, checkpoints every second; the process host
unless `--host spark`) on two commits, each from a temporary git worktree, interleaved `--repeat` times
(the order alternates). Per variant it prints the medians of: events/s over the coordinator's job time;
the CPU seconds of the TaskManagers (sampled while they run); the CPU seconds of the whole run
(coordinator, TaskManagers and their compaction processes, and on the Spark host its JVMs and PySpark's
worker daemon); the seconds from the start of `sluice run` to the first record a source read, and to its
exit; the seconds from its last line (the job's verdict) to its exit; each with its ratio to the baseline.

On a machine shared with other work the events/s of two runs of one commit can differ by a factor of
two; CPU seconds move much less with the load, so they are the figure to judge a change by there.
"""

from __future__ import annotations

import argparse
import statistics

from _harness import environment_note
from _w1_trees import git, interleaved_w1

FIGURES = (
    ("events_per_s", "events/s"),
    ("cpu_s", "TaskManager CPU s"),
    ("tree_cpu_s", "whole run CPU s"),
    ("first_record_s", "s to first record"),
    ("wall_s", "wall s"),
    ("exit_s", "s from its last line to exit"),
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", required=True, help="git ref to compare against")
    parser.add_argument("--candidate", default="HEAD", help="git ref with the change (default HEAD)")
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--host", choices=("processes", "spark"), default="processes")
    args = parser.parse_args()
    commits = {
        "baseline": git("rev-parse", "--short", args.baseline),
        "candidate": git("rev-parse", "--short", args.candidate),
    }
    print(
        f"# W1 on the {args.host} host, {commits['baseline']} against {commits['candidate']}, "
        f"n = {args.n:,} ({environment_note()})\n"
    )
    runs = interleaved_w1(commits, args.n, args.repeat, "sluice-ab-", "--host", args.host, first_record=True)
    medians = {v: {k: statistics.median(r[k] for r in runs[v]) for k, _ in FIGURES} for v in commits}
    print("| variant | commit | " + " | ".join(f"{title} (median) | ratio" for _, title in FIGURES) + " |")
    print("|---|---|" + "---|---|" * len(FIGURES))
    for variant, commit in commits.items():
        cells = [
            f"{medians[variant][k]:,.2f} | {medians[variant][k] / medians['baseline'][k]:.3f}x"
            for k, _ in FIGURES
        ]
        print(f"| {variant} | {commit} | " + " | ".join(cells) + " |")
    print(
        "\ns to first record: from the start of the `sluice run` process to the first batch a source read "
        "(start-up included: interpreter, Spark's JVM on the Spark host, TaskManagers)."
    )
    print("\nEach run (events/s, TaskManager CPU s, whole run CPU s, s to first record, wall s, s to exit):")
    for variant, samples in runs.items():
        print(
            f"- {variant}: "
            + ", ".join(
                f"{r['events_per_s']:,.0f} ({r['cpu_s']:.2f}, {r['tree_cpu_s']:.2f}, "
                f"{r['first_record_s']:.2f}, {r['wall_s']:.2f}, {r['exit_s']:.3f})"
                for r in samples
            )
        )


if __name__ == "__main__":
    main()

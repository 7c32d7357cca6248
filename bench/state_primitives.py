"""Keyed state operations on two commits side by side: what a change to the state handles or the
backends' tables costs per call, heap and disk.

    .venv/bin/python bench/state_primitives.py --baseline REF [--candidate REF] [--ops 200000] [--repeat 5]

For each commit (a temporary git worktree) it runs `bench/_state_ops.py` in a fresh process per
backend and moment: the heap with nothing frozen, the heap while a snapshot is held (its copy-on-write
layer takes the writes), and the disk backend (`--ops` / 10 calls: each one pickles and goes to LMDB).
The variants alternate, the order reversed every other round, `--repeat` rounds. Figures are CPU
nanoseconds per call (the process's CPU time, which moves less with the machine's load than the wall
clock does), the loop's own cost taken off; per cell the median over the rounds, and the candidate's
ratio to the baseline. A ratio above 1 is a slowdown.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _harness import environment_note
from _w1_trees import git, worktrees

_OPS = Path(__file__).resolve().with_name("_state_ops.py")
CASES = (("heap", "idle", 1), ("heap", "frozen", 1), ("disk", "idle", 10))
"""Backend, moment, and by how much fewer calls than `--ops` to make."""


def _measure(tree: Path, backend: str, moment: str, ops: int, state_dir: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree / "runtime"), "SLUICE_STATE_DIR": str(state_dir)}
    command = [sys.executable, str(_OPS), "--backend", backend, "--moment", moment, "--ops", str(ops)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", required=True, help="git ref to compare against")
    parser.add_argument("--candidate", default="HEAD", help="git ref with the change (default HEAD)")
    parser.add_argument("--ops", type=int, default=200_000, help="calls per operation and run (heap)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    commits = {
        "baseline": git("rev-parse", "--short", args.baseline),
        "candidate": git("rev-parse", "--short", args.candidate),
    }
    print(
        f"# Keyed state operations, {commits['baseline']} against {commits['candidate']}, "
        f"{args.ops:,} calls per operation ({environment_note()})\n"
    )
    runs: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    work = Path(tempfile.mkdtemp(prefix="sluice-state-ops-"))
    try:
        with worktrees(commits, work) as trees:
            order = list(commits)
            for r in range(args.repeat):
                for variant in order if r % 2 == 0 else order[::-1]:
                    for backend, moment, fewer in CASES:
                        figures = _measure(trees[variant], backend, moment, args.ops // fewer, work)
                        runs.setdefault((variant, backend, moment), []).append(figures)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| backend | operation | baseline ns/call | candidate ns/call | ratio |")
    print("|---|---|---|---|---|")
    for backend, moment, _ in CASES:
        label = backend if moment == "idle" else f"{backend}, snapshot held"
        base, cand = runs[("baseline", backend, moment)], runs[("candidate", backend, moment)]
        ratios = []
        for name in base[0]:
            b = statistics.median(f[name] for f in base)
            c = statistics.median(f[name] for f in cand)
            if name != "loop":
                ratios.append(c / b)
            print(f"| {label} | {name} | {b:,.1f} | {c:,.1f} | {c / b:.3f}x |")
        geomean = math.exp(statistics.fmean(math.log(r) for r in ratios))
        print(f"| {label} | all but the loop (geometric mean) | | | {geomean:.3f}x |")


if __name__ == "__main__":
    main()

"""The window operators' state layouts on two commits, and on the heap against the disk backend.

    .venv/bin/python bench/window_layouts.py --baseline REF [--candidate REF] [--n 300000] [--repeat 5]

Drives the two window operators directly (no engine, no channels), in a fresh interpreter per run:
`tumbling`, W1's shape (tumbling 1 s windows, reduce, 1,000 keys), on the per-end accumulator layout;
`sessions`, sessions (gap 500 ms, aggregate, 1,000 keys) on the per-key layout. Batches of 512 records,
a watermark after each, a checkpoint's synchronous part every 50 batches. Each run reports the CPU
seconds of the operator calls. Variants, interleaved `--repeat` times (the order rotates): the baseline
commit on the heap, the candidate on the heap, the candidate on disk; a commit's runtime comes from a
temporary git worktree. Printed: the median records per CPU second, its ratio to the baseline's, and
the median of the ratios of each round's runs (paired: a round's runs are seconds apart, so they see
about the same load on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _harness import environment_note
from _w1_trees import git, worktrees

CASES = ("tumbling", "sessions")
DRIVER = r"""
import json, sys, time
from sluice.engine.context import Metrics, OperatorContext
from sluice.engine.operators.keyed_window import KeyedWindowOperator
from sluice.engine.operators.window import WindowOperator
from sluice.functions import AggregateFunction
from sluice.windows import EventTimeSessionWindows, TumblingEventTimeWindows

case, backend, n = sys.argv[1], sys.argv[2], int(sys.argv[3])


class CountSum(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return (acc[0] + 1, acc[1] + value[1])

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


class Discard:
    def emit(self, values, timestamps): pass
    def emit_watermark(self, timestamp): pass
    def emit_idle(self, idle): pass
    def emit_side(self, tag, values, timestamps): pass


if case == "tumbling":
    op = WindowOperator("w", TumblingEventTimeWindows.of_millis(1000), lambda r: r[0],
                        reduce=lambda a, b: (a[0], a[1] + b[1]))
    stamp = lambda i: i // 2  # 2,000 records per second of event time: 2 per key per window
else:
    op = KeyedWindowOperator("w", EventTimeSessionWindows.with_gap_millis(500), lambda r: r[0],
                             aggregate=CountSum())
    stamp = lambda i: i // 4 + (i // 20_000) * 1000  # a key every 250 ms, a 1 s pause every 20,000
ctx = OperatorContext(operator_uid="w", subtask_index=0, parallelism=1, max_parallelism=128, attempt=0,
                      metrics=Metrics(), keyed=True, state_backend=backend)
op.setup(ctx, Discard())
op.initialize_state(None)
op.open()
records = [(f"k{i % 1000}", i) for i in range(n)]
stamps = [stamp(i) for i in range(n)]
started = time.process_time()
for batch, at in enumerate(range(0, n, 512)):
    op.process_batch(records[at:at + 512], stamps[at:at + 512])
    op.process_watermark(stamps[min(at + 511, n - 1)] - 600)
    if batch % 50 == 49:
        snapshot = op.snapshot_state(batch)
        if snapshot is not None and snapshot.deferred is not None:
            snapshot.deferred.snapshot.release()
op.process_watermark(2**62)
cpu = time.process_time() - started
op.close()
print(json.dumps({"cpu_s": cpu}))
"""


def run(tree: Path, case: str, backend: str, n: int, state_dir: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree / "runtime"), "SLUICE_STATE_DIR": str(state_dir)}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, case, backend, str(n)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{case} on {backend} ({tree}) failed:\n{done.stderr}")
    cpu_s: float = json.loads(done.stdout.strip().splitlines()[-1])["cpu_s"]
    return cpu_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", required=True, help="git ref to compare against")
    parser.add_argument("--candidate", default="HEAD", help="git ref with the change (default HEAD)")
    parser.add_argument("--n", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    commits = {
        "baseline": git("rev-parse", "--short", args.baseline),
        "candidate": git("rev-parse", "--short", args.candidate),
    }
    variants = [("baseline", "heap"), ("candidate", "heap"), ("candidate", "disk")]
    print(f"# Window layouts, {commits['baseline']} against {commits['candidate']}, n = {args.n:,}")
    print(f"# {environment_note()}\n")
    rates: dict[tuple[str, str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="sluice-layouts-") as scratch:
        work = Path(scratch)
        with worktrees(commits, work / "trees") as trees:
            for round_ in range(args.repeat):
                for case in CASES:
                    shift = round_ % len(variants)
                    for tree_name, backend in variants[shift:] + variants[:shift]:
                        cpu = run(trees[tree_name], case, backend, args.n, work / "state")
                        rates.setdefault((case, tree_name, backend), []).append(args.n / cpu)
    print("| case | variant | records per CPU s (median) | ratio to baseline heap | paired ratio | runs |")
    print("|---|---|---|---|---|---|")
    for case in CASES:
        base_runs = rates[(case, "baseline", "heap")]
        base = statistics.median(base_runs)
        for tree_name, backend in variants:
            runs = rates[(case, tree_name, backend)]
            median = statistics.median(runs)
            paired = statistics.median(r / b for r, b in zip(runs, base_runs, strict=True))
            listed = ", ".join(f"{r:,.0f}" for r in runs)
            print(
                f"| {case} | {tree_name} {backend} | {median:,.0f} | {median / base:.3f}x | {paired:.3f}x "
                f"| {listed} |"
            )


if __name__ == "__main__":
    main()

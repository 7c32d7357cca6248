"""Issue 3's measurements of the finishing protocol, side by side in one command.

1. bounded job, 1 h checkpoint interval: delay from the source's last record to FINISHED with every
   record committed; beside it the same job with --no-checkpoints-after-tasks-finish (ends without a
   final checkpoint, as before FLIP-147: its last records are never committed).
2. stop-with-savepoint latency (request -> FINISHED) for SUSPEND and TERMINATE on W1 running unbounded
   at 50,000 events/s; beside it a plain savepoint (job keeps running) and a cancel.
3. the checkpoint plan for graphs of 10k, 100k and 1M subtasks with some finished; beside it the
   O(n^2) predecessor scan at the sizes it can do.

  .venv/bin/python bench/finishing.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _harness import REPO, BenchJob, environment_note
from sluice.checkpoint.plan import finished_by_vertex, plan_checkpoint
from sluice.graph.jobgraph import POINTWISE, JobEdge, JobGraph, JobVertex, OperatorSpec
from sluice.graph.transformations import Partitioning, PartitionKind

PIPELINES = REPO / "bench" / "pipelines"


def end_of_input_delay(work: Path, flag_on: bool, n: int) -> tuple[float, int]:
    """Seconds from the last record to the job result, and how many windows were committed."""
    run = work / f"eoi-{flag_on}-{time.monotonic_ns()}"
    mark, out = run / "mark", run / "out"
    run.mkdir(parents=True)
    options = [
        "--arg",
        f"n={n}",
        "--arg",
        f"out={out}",
        "--arg",
        f"mark={mark}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{run / 'chk'}",
        "--checkpoint-interval",
        "1h",
        "--job-id",
        "eoi",
    ]
    if not flag_on:
        options.append("--no-checkpoints-after-tasks-finish")
    job = BenchJob(PIPELINES / "bounded_last_record.py", *options)
    job.wait(600)
    last_record = max(float(line) for line in mark.read_text().split())
    finished = json.loads((run / "chk" / "eoi" / "job-result.json").read_text())["timestamp"] / 1000
    committed = sum(1 for f in out.glob("part-*") for _ in f.open()) if out.exists() else 0
    return finished - last_record, committed


def stop_latency(work: Path, mode: str) -> float:
    run = work / f"stop-{mode}-{time.monotonic_ns()}"
    job = BenchJob(
        PIPELINES / "w1_unbounded.py",
        "--arg",
        f"out={run / 'out'}",
        "--arg",
        "rate=50000",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{run / 'chk'}",
        "--checkpoint-interval",
        "1s",
        "--savepoint-dir",
        f"file://{run / 'sp'}",
    )
    job.wait_ready()
    while job.get("/v1/checkpoints")["counts"]["completed"] < 2:
        time.sleep(0.05)
    started = time.monotonic()
    if mode == "cancel":
        job.post("/v1/job/cancel", {})
        job.process.wait(60)
        return time.monotonic() - started
    stop = {"suspend": "suspend", "terminate": "terminate", "savepoint": False}[mode]
    trigger = job.post("/v1/savepoints", {"stop": stop})["triggerId"]
    if mode == "savepoint":
        while job.get(f"/v1/savepoints/{trigger}")["status"] == "IN_PROGRESS":
            time.sleep(0.005)
        elapsed = time.monotonic() - started
        job.post("/v1/job/cancel", {})
        job.process.wait(60)
        return elapsed
    while job.get("/v1/job")["state"] != "FINISHED":
        time.sleep(0.005)
    elapsed = time.monotonic() - started
    job.get(f"/v1/savepoints/{trigger}")  # lets the coordinator exit at once
    job.wait(60)
    return elapsed


def synthetic_graph(subtasks: int) -> JobGraph:
    """Ten vertices in a chain of alternating POINTWISE and ALL_TO_ALL edges, `subtasks` in all."""
    parallelism = max(1, subtasks // 10)
    spec = OperatorSpec("op", "op", "map", False, lambda uid: None)
    vertices = [JobVertex(v, [spec], parallelism, max(128, parallelism)) for v in range(10)]
    for v in range(1, 10):
        kind = PartitionKind.FORWARD if v % 2 else PartitionKind.HASH
        edge = JobEdge(v - 1, v, Partitioning(kind), 0)
        vertices[v].inputs.append(edge)
        vertices[v - 1].outputs.append(edge)
    return JobGraph("synthetic", vertices, max(128, parallelism))


def finished_set(graph: JobGraph, fraction: float) -> set[tuple[int, int]]:
    rng = random.Random(7)
    first = graph.vertices[0]
    return {(first.id, s) for s in range(first.parallelism) if rng.random() < fraction}


def quadratic_plan(graph: JobGraph, finished: set[tuple[int, int]]) -> int:
    """Each running subtask scans all its predecessors: the plan without the appendix's observation."""
    triggered = 0
    for vertex in graph.vertices:
        for s in range(vertex.parallelism):
            if (vertex.id, s) in finished:
                continue
            predecessors = []
            for edge in vertex.inputs:
                upstream = graph.vertex(edge.source)
                if edge.pattern == POINTWISE:
                    predecessors.append((upstream.id, s))
                else:
                    predecessors.extend((upstream.id, u) for u in range(upstream.parallelism))
            if all(p in finished for p in predecessors):
                triggered += 1
    return triggered


def timed(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and smaller inputs")
    args = parser.parse_args()
    repeats = 1 if args.quick else 3
    print(f"# Sluice finishing benchmarks ({environment_note()})\n")
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-"))
    try:
        n = 100_000 if args.quick else 400_000
        on = [end_of_input_delay(work, True, n) for _ in range(repeats)]
        off = [end_of_input_delay(work, False, n) for _ in range(repeats)]
        windows = (n // 10) // 1000 * 1000 + (1000 if (n // 10) % 1000 else 0)
        print("## 1. Last record to FINISHED, checkpoint interval 1 h (target < 1 s)\n")
        print(f"| run | median delay | windows committed (of {windows}) |")
        print("|---|---|---|")
        print(f"| Sluice (final checkpoint) | {statistics.median(d for d, _ in on):.3f} s | {on[0][1]} |")
        flag_off = statistics.median(d for d, _ in off)
        print(f"| --no-checkpoints-after-tasks-finish | {flag_off:.3f} s | {off[0][1]} |")
        print("\n## 2. Stop-with-savepoint on W1 at 50,000 events/s, request to FINISHED (target < 2 s)\n")
        print("| operation | median | runs |")
        print("|---|---|---|")
        for mode in ("suspend", "terminate", "savepoint", "cancel"):
            samples = [stop_latency(work, mode) for _ in range(repeats)]
            label = {
                "suspend": "stop (SUSPEND)",
                "terminate": "stop --drain (TERMINATE)",
                "savepoint": "savepoint, job keeps running",
                "cancel": "cancel, no savepoint",
            }[mode]
            print(
                f"| {label} | {statistics.median(samples):.3f} s | {', '.join(f'{s:.3f}' for s in samples)} |"
            )
        print("\n## 3. Checkpoint plan with 1/2 of the first vertex finished (target < 100 ms at 100k)\n")
        print("| subtasks | O(n) plan | O(n^2) scan | ratio |")
        print("|---|---|---|---|")
        for size in (1_000, 10_000, 100_000, 1_000_000):
            graph = synthetic_graph(size)
            finished = finished_set(graph, 0.5)
            by_vertex = finished_by_vertex(finished)
            fast = timed(lambda g=graph, f=by_vertex: plan_checkpoint(g, f), repeats)
            if size <= 10_000:
                slow = timed(lambda g=graph, f=finished: quadratic_plan(g, f), 1)
                print(f"| {size:,} | {fast * 1000:.2f} ms | {slow * 1000:.1f} ms | {slow / fast:.0f}x |")
            else:
                print(f"| {size:,} | {fast * 1000:.2f} ms | (too slow) | |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

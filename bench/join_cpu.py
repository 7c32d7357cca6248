"""Where one TaskManager's CPU goes on W7's interval join, in CPU seconds of this one process.

    .venv/bin/python bench/join_cpu.py [--n 200000] [--repeat 3] [--state-backend heap]

Rates of whole runs on a shared machine move by a factor of two between runs; the CPU time one piece
of code takes moves far less. This runs the engine's own code on W7 (bench/pipelines/w7_interval_join.py,
parallelism 2) as subtask 0 of the join vertex sees it: both sources' subtasks read their splits into
hash-partitioning writers (not timed), and the batches and watermarks bound for join subtask 0 are fed
to it as its task would, the four input channels taken in turn, their watermarks combined by the task's
own `WatermarkValve`, the garbage collector set up as in a TaskManager. Timed with the process's CPU clock:

- `join`: the interval join operator alone, its output counted and dropped;
- `join + sink`: the join vertex's chain as it runs, the pairs written by the FileSink (a temporary
  directory).

The event loop, the network, checkpoints and the coordinator are not here (bench/joins.py runs them).
Both stages are checked to make every pair of subtask 0 (bench/_w7_events.py's rule); the medians are
printed, per input record and per pair.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import REPO, environment_note
from _w7_events import BOUND_MS, w7_event
from sluice._pipeline import build_graph
from sluice.api.environment import StreamEnvironment
from sluice.engine._collector import tune_for_records
from sluice.engine._watermarks import WatermarkValve
from sluice.engine.chain import OperatorChain
from sluice.engine.channels import OutputChannel
from sluice.engine.context import Metrics
from sluice.engine.events import Event, RecordBatch, Watermark
from sluice.engine.writer import BATCH_SIZE, RecordWriter
from sluice.graph.jobgraph import JobGraph, JobVertex

W7 = REPO / "bench" / "pipelines" / "w7_interval_join.py"
PARALLELISM = 2


class _Unsent(OutputChannel):
    """A channel whose batches stay in the writer's outbox, taken from there by the benchmark."""


class _Counted:
    """The join's output when the sink is left out: pairs counted, then dropped."""

    def __init__(self) -> None:
        self.pairs = 0

    def emit(self, values: list[Any], timestamps: list[int] | None) -> None:
        self.pairs += len(values)

    def emit_watermark(self, timestamp: int) -> None:
        pass

    def emit_idle(self, idle: bool) -> None:
        pass

    def emit_side(self, tag: str, values: list[Any], timestamps: list[int] | None) -> None:
        pass


def _channel_events(graph: JobGraph, vertex: JobVertex, subtask: int) -> list[Event]:
    """What source subtask `subtask` of `vertex` sends to join subtask 0."""
    (edge,) = vertex.outputs
    writer = RecordWriter(edge.partitioning, [_Unsent() for _ in range(PARALLELISM)], graph.max_parallelism)
    chain = OperatorChain(vertex, subtask, 0, "bench", [writer], Metrics(), {})
    chain.open()
    while chain.head.emit_next(BATCH_SIZE) >= 0:  # type: ignore[attr-defined]
        pass
    chain.end_of_input(drain=True, watermark_done=False)
    for buffer in writer.buffers:
        buffer.seal()
    chain.close()
    return list(writer.buffers[0].outbox)


def _inputs(graph: JobGraph) -> list[tuple[int, list[Event]]]:
    """(side, events) of each of join subtask 0's four input channels."""
    join = graph.vertices[2]
    return [
        (edge.side, _channel_events(graph, graph.vertices[edge.source], subtask))
        for edge in join.inputs
        for subtask in range(PARALLELISM)
    ]


def _feed(chain: OperatorChain, channels: list[tuple[int, list[Event]]]) -> None:
    """The channels' events in turn, one event of each at a time, as a task's input gate would."""
    head = chain.head
    valve = WatermarkValve(len(channels))
    cursors = [iter(events) for _, events in channels]
    live = list(range(len(channels)))
    while live:
        for channel in list(live):
            event = next(cursors[channel], None)
            if event is None:
                live.remove(channel)
                continue
            if type(event) is RecordBatch:
                head.process_input(channels[channel][0], event.values, event.timestamps)
            elif type(event) is Watermark:
                advanced = valve.on_watermark(channel, event.timestamp)
                if advanced is not None:
                    head.process_watermark(advanced)
    chain.end_of_input(drain=True, watermark_done=False)


def _expected_pairs(channels: list[tuple[int, list[Event]]]) -> int:
    """Pairs of the keys subtask 0 holds, by bench/_w7_events.py's rule."""
    sides: list[dict[int, list[int]]] = [{}, {}]
    for side, events in channels:
        for event in events:
            if type(event) is RecordBatch:
                for key, ts, _ in event.values:
                    sides[side].setdefault(key, []).append(ts)
    count = 0
    for key, lefts in sides[0].items():
        rights = sorted(sides[1].get(key, []))
        for ts in lefts:
            count += sum(1 for other in rights if abs(other - ts) <= BOUND_MS)
    return count


def run_once(n: int, work: Path, backend: str) -> dict[str, float]:
    env = StreamEnvironment({"n": str(n), "out": str(work / "out")}, parallelism=PARALLELISM)
    graph = build_graph(str(W7), env)
    join_vertex = graph.vertices[2]
    join_vertex.state_backend = backend
    channels = _inputs(graph)
    records = sum(len(e.values) for _, events in channels for e in events if type(e) is RecordBatch)
    expected = _expected_pairs(channels)

    alone = OperatorChain(join_vertex, 0, 0, "bench", [], Metrics(), {})
    counted = _Counted()
    alone.head.output = counted
    alone.open()
    started = time.process_time()
    _feed(alone, channels)
    join_s = time.process_time() - started
    alone.close()
    if counted.pairs != expected:
        raise SystemExit(f"the join alone made {counted.pairs:,} pairs, {expected:,} expected")

    whole = OperatorChain(join_vertex, 0, 0, "bench", [], Metrics(), {})
    whole.open()
    started = time.process_time()
    _feed(whole, channels)
    whole_s = time.process_time() - started
    whole.close()
    return {"records": records, "pairs": expected, "join": join_s, "join + sink": whole_s}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200_000, help="events per side")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--state-backend", choices=("heap", "disk"), default="heap")
    args = parser.parse_args()
    assert w7_event(0) == (0, 0, 0)
    tune_for_records()  # as a TaskManager process does
    runs = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="sluice-join-cpu-") as work:
            runs.append(run_once(args.n, Path(work), args.state_backend))
    records, pairs = runs[0]["records"], runs[0]["pairs"]
    print(
        f"# W7's join subtask 0, n = {args.n:,} per side: {records:,} records in, {pairs:,} pairs out, "
        f"{args.state_backend} state; CPU seconds, medians of {args.repeat}"
    )
    print(f"# ({environment_note()})\n")
    print("| stage | CPU s | ns per record in | ns per pair |")
    print("|---|---|---|---|")
    for stage in ("join", "join + sink"):
        seconds = statistics.median(r[stage] for r in runs)
        print(f"| {stage} | {seconds:.3f} | {seconds / records * 1e9:,.0f} | {seconds / pairs * 1e9:,.0f} |")
    print(
        "\nEach run (join, join + sink): "
        + ", ".join(f"{r['join']:.3f}/{r['join + sink']:.3f}" for r in runs)
    )


if __name__ == "__main__":
    main()

"""Where one TaskManager's CPU goes on W1's records, in CPU seconds, beside the tight loop.

    .venv/bin/python bench/engine_cpu.py [--n 2000000] [--repeat 5]

Wall-clock rates on a machine shared with other work move by a factor of two between runs; the CPU
time a piece of code takes moves far less. This benchmark runs, in this one process, the engine's own
code on W1 (examples/w1_window_counts.py, parallelism 2) as subtask 0 of each vertex does, one stage
at a time, and times each stage with the process's CPU clock:

- `source chain`: the source reads its splits (half of the n events) and runs them through the chained
  operators (parse, timestamps, ones) into the hash-partitioning writer, batches sealed per channel;
- `encode` / `decode`: the batches bound for the other TaskManager pickled as a remote channel sends
  them (`sluice.engine.network.encode_event`) and unpickled as its receiver does;
- `window chain`: every batch and watermark the source chain produced, through the window and the
  FileSink (its files in a temporary directory);

then, for the same n/2 events, W1's functions in the plain loop of `bench/_tight_loop.py`. What is not
here: the event loop and its socket I/O, checkpoints, the coordinator, process start-up. Each stage is
run `--repeat` times, interleaved with the loop; the medians are printed, per stage and per record, and
the engine's total as a multiple of the loop.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _harness import REPO, environment_note
from _tight_loop import run_tight_loop
from sluice._pipeline import build_graph
from sluice.api.environment import StreamEnvironment
from sluice.engine.chain import OperatorChain
from sluice.engine.channels import OutputChannel
from sluice.engine.context import Metrics
from sluice.engine.events import Event, RecordBatch, Watermark
from sluice.engine.network import encode_event
from sluice.engine.task import SOURCE_BATCH
from sluice.engine.writer import RecordWriter

W1 = REPO / "examples" / "w1_window_counts.py"
PARALLELISM = 2


class _Unsent(OutputChannel):
    """A channel whose batches stay in the writer's outbox, taken from there by the benchmark."""


def _cpu(stage: Callable[[], Any]) -> tuple[float, Any]:
    started = time.process_time()
    result = stage()
    return time.process_time() - started, result


def run_once(n: int, out: Path) -> dict[str, float]:
    env = StreamEnvironment({"n": str(n), "out": str(out)}, parallelism=PARALLELISM)
    graph = build_graph(str(W1), env)
    source_vertex, window_vertex = graph.vertices
    (edge,) = source_vertex.outputs
    writer = RecordWriter(edge.partitioning, [_Unsent() for _ in range(PARALLELISM)], graph.max_parallelism)
    source_chain = OperatorChain(source_vertex, 0, 0, "bench", [writer], Metrics(), {})
    window_chain = OperatorChain(window_vertex, 0, 0, "bench", [], Metrics(), {})
    source_chain.open()
    window_chain.open()
    per_channel: list[list[Event]] = [[] for _ in range(PARALLELISM)]

    def read_source() -> int:
        records = 0
        while (emitted := source_chain.head.emit_next(SOURCE_BATCH)) >= 0:  # type: ignore[attr-defined]
            records += emitted
            for buffer, events in zip(writer.buffers, per_channel, strict=True):
                if buffer.outbox:
                    events.extend(buffer.outbox)
                    buffer.outbox = []
        source_chain.end_of_input(drain=True, watermark_done=False)
        for buffer, events in zip(writer.buffers, per_channel, strict=True):
            buffer.seal()
            events.extend(buffer.outbox)
        return records

    source_s, records = _cpu(read_source)
    remote = per_channel[1]
    encode_s, frames = _cpu(lambda: [encode_event(e, 1 << 30) for e in remote])
    # A frame is a 4-byte length and the pickle: the receiver unpickles what follows the length.
    decode_s, decoded = _cpu(lambda: [pickle.loads(memoryview(f)[4:]) for f in frames])
    assert decoded == remote, "a batch changed on its way through the encoding"
    events = [e for channel in per_channel for e in channel]

    def run_window() -> None:
        head = window_chain.head
        for event in events:
            if type(event) is RecordBatch:
                head.process_batch(event.values, event.timestamps)
            elif type(event) is Watermark:
                head.process_watermark(event.timestamp)
        window_chain.end_of_input(drain=True, watermark_done=False)

    window_s, _ = _cpu(run_window)
    source_chain.close()
    window_chain.close()
    return {
        "records": records,
        "source chain": source_s,
        "encode": encode_s,
        "decode": decode_s,
        "window chain": window_s,
        "bytes": sum(len(f) for f in frames),
        "remote records": sum(len(e.values) for e in remote if type(e) is RecordBatch),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    runs: list[dict[str, float]] = []
    loops: list[float] = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="sluice-engine-cpu-") as work:
            runs.append(run_once(args.n, Path(work) / "out"))
        loops.append(run_tight_loop(args.n // PARALLELISM)["cpu_s"])
    records = runs[0]["records"]
    print(f"# W1's subtask 0 on n = {args.n:,} ({records:,} records), CPU seconds, medians of {args.repeat}")
    print(f"# ({environment_note()})\n")
    print("| stage | CPU s | ns per record | x tight loop |")
    print("|---|---|---|---|")
    loop_s = statistics.median(loops)
    total = 0.0
    for stage in ("source chain", "encode", "decode", "window chain"):
        seconds = statistics.median(r[stage] for r in runs)
        total += seconds
        print(f"| {stage} | {seconds:.3f} | {seconds / records * 1e9:.0f} | {seconds / loop_s:.2f} |")
    print(f"| engine, all stages | {total:.3f} | {total / records * 1e9:.0f} | {total / loop_s:.2f} |")
    print(f"| tight loop | {loop_s:.3f} | {loop_s / records * 1e9:.0f} | 1.00 |")
    remote = runs[0]["remote records"]
    print(f"\nRemote channel: {remote:,} records in {runs[0]['bytes']:,} bytes of frames.")
    print(
        "Each run: " + ", ".join(f"{sum(r[s] for s in r if s.endswith(('chain', 'code'))):.3f}" for r in runs)
    )


if __name__ == "__main__":
    main()

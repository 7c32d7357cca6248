"""W1's logic as one plain Python loop, record by record: the ceiling a Python engine is held against.

The functions are W1's own: examples/w1_window_counts.py is built into its job graph and its operators'
functions are taken from there (the two maps, the timestamp extractor, the key selector and the window's
reduce), so an edit to the example changes this loop too. The loop applies them to every record in turn
with no engine around it: no batches, no serialization, no checkpoints, no threads; each 1 s window is a
dict entry reduced in place, and the windows are emitted (to a list) once the input ends. That is what one
core of this machine can do with W1's functions; W1 runs on two TaskManagers, so the row `bench/w1.py`
prints is twice this rate ("one core, times two").

    .venv/bin/python bench/_tight_loop.py --n 2000000
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _harness import REPO
from sluice._pipeline import build_graph
from sluice.api.environment import StreamEnvironment
from sluice.engine.operators.base import StreamOperator
from sluice.engine.operators.basic import MapOperator
from sluice.engine.operators.timestamps import TimestampsOperator
from sluice.engine.operators.window import WindowOperator

W1 = REPO / "examples" / "w1_window_counts.py"
WINDOW_MS = 1000


def w1_functions(pipeline: Path = W1) -> dict[str, Callable[..., Any]]:
    """parse, ones (the maps in order), timestamp, key and reduce, as the example defines them."""
    graph = build_graph(str(pipeline), StreamEnvironment({"n": "1", "out": "unused"}, parallelism=1))
    operators = [spec.create(StreamOperator) for v in graph.vertices for spec in v.operators]
    maps = [op.fn for op in operators if isinstance(op, MapOperator)]
    (extract,) = [op.extract for op in operators if isinstance(op, TimestampsOperator)]
    (window,) = [op for op in operators if isinstance(op, WindowOperator)]
    if len(maps) != 2 or window.reduce_fn is None:
        raise SystemExit(f"{pipeline} is no longer W1's shape (two maps, timestamps, a window reduce)")
    return {
        "parse": maps[0],
        "ones": maps[1],
        "timestamp": extract,
        "key": window.key_selector,
        "reduce": window.reduce_fn,
    }


def run_tight_loop(n: int) -> dict[str, Any]:
    """One core, record by record; the rate is n over the loop's own time (the build is not counted)."""
    fns = w1_functions()
    parse, ones, timestamp, key_of, reduce = (
        fns[name] for name in ("parse", "ones", "timestamp", "key", "reduce")
    )
    windows: dict[tuple[Any, int], Any] = {}
    started = time.perf_counter()
    cpu_started = time.process_time()
    for i in range(n):
        event = parse(i)
        ts = timestamp(event)
        value = ones(event)
        slot = (key_of(value), ts - ts % WINDOW_MS)
        current = windows.get(slot)
        windows[slot] = value if current is None else reduce(current, value)
    emitted = list(windows.values())
    loop_s = time.perf_counter() - started
    return {
        "events_per_s": n / loop_s,
        "loop_s": loop_s,
        "cpu_s": time.process_time() - cpu_started,
        "windows": len(emitted),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2_000_000)
    print(json.dumps(run_tight_loop(parser.parse_args().n)))


if __name__ == "__main__":
    main()

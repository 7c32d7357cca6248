"""The side-output pipeline of the chaos harness: tests/integration/pipelines/side_outputs.py.

It writes four FileSinks under the run's output directory: main/ (a keyed process function's running
count per key), dead/ (dead letters of a map with `on_error=tag`), big/ (that process function's
`ctx.output` side output) and big-counts/ (a window over that side output). The harness compares
multisets of rows, so each sink's rows carry its name; the main rows' running counts depend on how the
two source splits interleave, so they are compared as two order-free multisets per key: its values,
and its counts 1..n (a record lost or replayed into state shows in either).
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable

from testkit.jobs import REPO

PIPELINE = REPO / "tests" / "integration" / "pipelines" / "side_outputs.py"
OUTPUTS = ("main", "dead", "big", "big-counts")
KEYS = 20  # as side_outputs.py


def rows(read: Callable[[str], collections.Counter[str]]) -> collections.Counter[str]:
    """Every sink's rows, each named by its sink, from `read(sub-directory)`."""
    out: collections.Counter[str] = collections.Counter()
    for name in OUTPUTS:
        for line, times in read(name).items():
            if name == "main":
                key, value, running = json.loads(line)
                out[f"main value {json.dumps([key, value])}"] += times
                out[f"main count {json.dumps([key, running])}"] += times
            else:
                out[f"{name} {line}"] += times
    return out


def reference(count: int) -> collections.Counter[str]:
    good = [i for i in range(count) if i % 7 != 3]
    out: collections.Counter[str] = collections.Counter()
    per_key: collections.Counter[int] = collections.Counter(i % KEYS for i in good)
    for i in good:
        out[f"main value {json.dumps([i % KEYS, i])}"] += 1
    for key, n in per_key.items():
        out.update(f"main count {json.dumps([key, running])}" for running in range(1, n + 1))
    for i in range(count):
        if i % 7 == 3:
            out[f"dead {json.dumps([i, f'ValueError: record {i} is malformed', 'parse'])}"] += 1
    big = [i for i in good if i >= 1000]
    out.update(f"big {json.dumps([i % KEYS, i])}" for i in big)
    windows: collections.Counter[tuple[int, int]] = collections.Counter(
        (i % KEYS, i * 10 // 1000) for i in big
    )
    out.update(f"big-counts {json.dumps([k, n])}" for (k, _), n in windows.items())
    return out

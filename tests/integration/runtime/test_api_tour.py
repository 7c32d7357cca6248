"""examples/api_tour.py end to end against results computed in plain Python (the job in the test process)."""

from __future__ import annotations

import collections
import json
from pathlib import Path

from testkit.inprocess import run_thread_job
from testkit.jobs import REPO
from testkit.outputs import assert_same_output, read_output

USERS, N = 37, 40_000


def purchase(i: int) -> tuple[int, int, int]:
    return (i % USERS, i % 13, i // 4)


def test_api_tour_matches_plain_python(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_thread_job(
        REPO / "examples" / "api_tour.py",
        "--arg",
        f"out={out}",
        "--arg",
        f"n={N}",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "300ms",
    )
    assert done.returncode == 0, done.stderr
    purchases = [purchase(i) for i in range(N)]

    per_second: dict[tuple[int, int], list[int]] = collections.defaultdict(lambda: [0, 0])
    for user, amount, ts in purchases:
        per_second[(user, ts // 1000)][0] += 1
        per_second[(user, ts // 1000)][1] += amount
    assert_same_output(
        read_output(str(out / "per-second")),
        collections.Counter(json.dumps(["user", u, s, r, m]) for (u, s), (r, m) in per_second.items()),
    )

    windows: dict[tuple[int, int], list[int]] = collections.defaultdict(lambda: [0, 0])
    for user, amount, ts in purchases:
        last_start = ts - ts % 1000
        for start in (last_start, last_start - 1000):
            windows[(user, start)][0] += amount
            windows[(user, start)][1] += 1
    assert_same_output(
        read_output(str(out / "averages")),
        collections.Counter(
            json.dumps([u, round(total / count, 6)]) for (u, _), (total, count) in windows.items()
        ),
    )

    assert_same_output(
        read_output(str(out / "broadcast")),
        collections.Counter({json.dumps(["rule", r]): 3 for r in range(5)}),
    )

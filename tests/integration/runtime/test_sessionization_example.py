"""examples/sessionization.py end to end against results computed in plain Python (the job in the test
process)."""

from __future__ import annotations

import collections
import json
from pathlib import Path

from testkit.inprocess import run_thread_job
from testkit.jobs import REPO
from testkit.outputs import assert_same_output, read_output

N, USERS, GAP = 30_000, 50, 1500


def clicks(n: int) -> list[tuple[str, str]]:
    """(what the click is: ok, malformed or late; its line): the example's input, written out again here
    so that the test does not trust the example's own code."""
    out = []
    for i in range(n):
        user, page = i % USERS, f"/page/{i % 7}"
        if i % 97 == 13:
            out.append(("malformed", f"user-{user};{i};{page}"))
        elif i % 500 == 250 and i > 10_000:
            out.append(("late", f"user-{user},{user},{page}"))
        else:
            out.append(("ok", f"user-{user},{i * 20 + (i // 2000) * 5000},{page}"))
    return out


def test_sessionization_example_matches_plain_python(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_thread_job(
        REPO / "examples" / "sessionization.py",
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
    stream = clicks(N)
    error = "ValueError: not enough values to unpack (expected 3, got 1)"
    assert_same_output(
        read_output(str(out / "malformed")),
        collections.Counter(json.dumps([line, error]) for kind, line in stream if kind == "malformed"),
    )
    parsed = {
        kind: [(u, int(t), p) for k, line in stream if k == kind for u, t, p in [line.split(",")]]
        for kind in ("ok", "late")
    }
    assert_same_output(
        read_output(str(out / "late")), collections.Counter(json.dumps(list(c)) for c in parsed["late"])
    )
    by_user: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    for user, ts, page in parsed["ok"]:
        by_user[user].append((ts, page))
    sessions: collections.Counter[str] = collections.Counter()
    for user, items in by_user.items():
        items.sort()
        current: list[tuple[int, str]] = []
        for ts, page in items:
            if current and ts > current[-1][0] + GAP:
                sessions[_session(user, current)] += 1
                current = []
            current.append((ts, page))
        sessions[_session(user, current)] += 1
    assert_same_output(read_output(str(out / "sessions")), sessions)


def _session(user: str, items: list[tuple[int, str]]) -> str:
    """[user, start, end, clicks, distinct pages]: the session window ends a gap after its last click."""
    return json.dumps([user, items[0][0], items[-1][0] + GAP, len(items), len({p for _, p in items})])

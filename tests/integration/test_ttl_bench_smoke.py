"""bench/ttl_steady_state.py at a small size, both backends: with ever-new keys and a 1 s TTL, the keys
the backends hold stay within what one TTL of arrivals can leave, far below the keys seen. Sizes only:
rates are measured by the benchmark, never in tests. One test per backend: each runs a job for 15 s, and
pytest-xdist can give the two to both workers."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from testkit.jobs import REPO

pytestmark = pytest.mark.timeout(600)  # a job starts: slow on a loaded machine
RATE, TTL_MS = 1_000, 1_000
SAMPLE = re.compile(r"^  (heap|disk): +(\d+) s  keys seen +([\d,]+)  checkpoint .*entries +([\d,]+)  RSS")


@pytest.mark.parametrize("backend", ["heap", "disk"])
def test_keyed_state_with_a_ttl_holds_about_one_ttl_of_new_keys(backend: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "ttl_steady_state.py"),
            *("--minutes", "0.25", "--every", "5", "--rate", str(RATE), "--ttl-ms", str(TTL_MS)),
            *("--state-backend", backend),
        ],
        capture_output=True,
        text=True,
        timeout=560,
        check=False,
        cwd=REPO,
    )
    out = done.stdout
    assert done.returncode == 0, f"{out}\n{done.stderr[-3000:]}"
    samples = [m.groups() for line in out.splitlines() if (m := SAMPLE.match(line))]
    assert {name for name, *_ in samples} == {backend}, out
    # Two states per key; a key leaves at its next cleanup after the TTL. The source never goes above
    # RATE keys a second, so at most RATE x (TTL + 2 s of slack) keys per state can be held.
    bound = 2 * RATE * (TTL_MS + 2_000) // 1_000
    for _, seconds, _seen, entries in samples:
        if int(seconds) >= 2 * TTL_MS // 1_000:
            assert int(entries.replace(",", "")) <= bound, f"{backend} at {seconds} s holds too much:\n{out}"
    seen = int(samples[-1][2].replace(",", ""))
    # Without expiry the backend would hold two entries per key seen: more than the bound.
    assert 2 * seen > bound, f"{backend}: too few keys seen for the bound to tell anything:\n{out}"

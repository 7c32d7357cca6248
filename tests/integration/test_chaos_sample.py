"""A small seeded sample of the chaos harness (bench/chaos.py): 4 randomized fault runs on the process
host, each output equal to the plain-Python reference, nothing left behind.

The seed fixes the scenarios (sinks, rates, faults and their moments), and a run's scenario does not
depend on the runs before it, so each run is a test of its own: pytest-xdist can give them to both
workers, where one test of four runs in a row was the longest test of the tier. A failure here replays
with `.venv/bin/python bench/chaos.py --seed 7 --host processes --only <run> --verbose`.
"""

from __future__ import annotations

import importlib
import re
import sys

import pytest

from testkit.jobs import REPO

pytestmark = [pytest.mark.postgres, pytest.mark.s3, pytest.mark.timeout(420)]
SEED, RUNS = 7, 4
LAST_LINE = re.compile(
    r"^chaos: (\d+) runs, (\d+) faults, (\d+) lost, (\d+) duplicated, "
    r"(\d+) leftover prepared transactions, (\d+) leftover files$"
)


@pytest.mark.parametrize("run", range(1, RUNS + 1))
def test_a_seeded_chaos_run_loses_and_duplicates_nothing(
    run: int, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        chaos = importlib.import_module("chaos")
        code = chaos.main(["--seed", str(SEED), "--host", "processes", "--only", str(run)])
    finally:
        sys.path.remove(str(REPO / "bench"))
    out = capsys.readouterr().out
    last = out.rstrip().splitlines()[-1]
    match = LAST_LINE.match(last)
    assert match, f"unexpected last line {last!r}:\n{out}"
    runs, faults, lost, duplicated, prepared, files = map(int, match.groups())
    # Every run of this seed strikes its first fault early, while its rate-limited input still flows.
    assert runs == 1 and faults > 0, out
    assert (lost, duplicated, prepared, files) == (0, 0, 0, 0), out
    assert code == 0, out

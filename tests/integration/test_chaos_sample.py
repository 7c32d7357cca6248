"""A small seeded sample of the chaos harness (bench/chaos.py): 4 randomized fault runs on the process
host, each output equal to the plain-Python reference, nothing left behind.

The seed fixes the scenarios (sinks, rates, faults and their moments): a failure here replays with
`.venv/bin/python bench/chaos.py --seed 7 --host processes --only <run> --verbose`.
"""

from __future__ import annotations

import importlib
import re
import sys

import pytest

from testkit.jobs import REPO

pytestmark = [pytest.mark.postgres, pytest.mark.s3, pytest.mark.timeout(420)]
LAST_LINE = re.compile(
    r"^chaos: (\d+) runs, (\d+) faults, (\d+) lost, (\d+) duplicated, "
    r"(\d+) leftover prepared transactions, (\d+) leftover files$"
)


def test_a_seeded_chaos_sample_loses_and_duplicates_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        chaos = importlib.import_module("chaos")
        code = chaos.main(["--runs", "4", "--seed", "7", "--host", "processes"])
    finally:
        sys.path.remove(str(REPO / "bench"))
    out = capsys.readouterr().out
    last = out.rstrip().splitlines()[-1]
    match = LAST_LINE.match(last)
    assert match, f"unexpected last line {last!r}:\n{out}"
    runs, faults, lost, duplicated, prepared, files = map(int, match.groups())
    assert runs == 4 and faults > 0, out
    assert (lost, duplicated, prepared, files) == (0, 0, 0, 0), out
    assert code == 0, out

"""bench/join_cpu.py feeds W7's join subtask what its sources send it, and the join makes every pair of
that subtask's keys, on both state backends."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from testkit.jobs import REPO


@pytest.fixture(scope="module")
def join_cpu() -> Iterator[ModuleType]:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        yield importlib.import_module("join_cpu")
    finally:
        sys.path.remove(str(REPO / "bench"))


@pytest.mark.parametrize("backend", ["heap", "disk"])
def test_the_join_subtask_makes_every_pair_of_its_keys(
    join_cpu: ModuleType, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path / "local-state"))
    # run_once stops with SystemExit when the join's pairs differ from the plain-Python count.
    run = join_cpu.run_once(6000, tmp_path, backend)
    # Subtask 0 holds about half of the 1,000 keys, so about half of both sides' records.
    assert 4000 < run["records"] < 8000
    assert run["pairs"] > 5 * run["records"] / 2
    assert run["join"] > 0 and run["join + sink"] > 0

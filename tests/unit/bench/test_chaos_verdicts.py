"""How the chaos harness (bench/chaos.py) judges a run: rows missing from a run that never finished are
not a loss, rows missing from a finished run are, and a duplicate is always one."""

from __future__ import annotations

import collections
import importlib
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from testkit.jobs import REPO


@pytest.fixture(scope="module")
def bench() -> Iterator[tuple[ModuleType, ModuleType, ModuleType]]:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        yield (
            importlib.import_module("chaos"),
            importlib.import_module("_chaos_run"),
            importlib.import_module("_chaos_scenario"),
        )
    finally:
        sys.path.remove(str(REPO / "bench"))


def _result(bench: tuple[ModuleType, ModuleType, ModuleType], **fields: object) -> object:
    _, run, scenario = bench
    sc = scenario.Scenario(
        run=1,
        seed=7,
        host="processes",
        sink="file",
        count=10,
        rate=10,
        keys=2,
        interval_ms=100,
        heartbeat_s=1,
    )
    return run.RunResult(sc, **fields)


def _verdict(bench: tuple[ModuleType, ModuleType, ModuleType], result: object) -> str:
    return str(bench[0].report(result).split()[4])


def test_a_finished_run_with_every_row_is_ok(bench: tuple[ModuleType, ModuleType, ModuleType]) -> None:
    assert _verdict(bench, _result(bench, completed=True)) == "ok"


def test_a_finished_run_missing_rows_lost_them(bench: tuple[ModuleType, ModuleType, ModuleType]) -> None:
    result = _result(bench, completed=True, lost=collections.Counter({"a": 1}))
    assert _verdict(bench, result) == "LOST/DUP"


def test_a_run_stopped_at_its_budget_is_an_error_not_a_loss(
    bench: tuple[ModuleType, ModuleType, ModuleType],
) -> None:
    result = _result(
        bench, error="RuntimeError: sluice run exited -9", unwritten=collections.Counter({"a": 1, "b": 2})
    )
    report = bench[0].report(result)
    assert _verdict(bench, result) == "ERROR", report
    assert "lost 0" in report and "rows not yet written when the run was stopped (3)" in report, report


def test_a_duplicate_is_a_violation_even_in_a_run_that_never_finished(
    bench: tuple[ModuleType, ModuleType, ModuleType],
) -> None:
    result = _result(bench, error="budget", duplicated=collections.Counter({"a": 1}))
    assert _verdict(bench, result) == "LOST/DUP"


def test_a_run_that_did_not_finish_is_never_ok(bench: tuple[ModuleType, ModuleType, ModuleType]) -> None:
    assert _verdict(bench, _result(bench)) != "ok"

"""The pieces of a failed task's report: which record a batch loop was at, the first mark, the repr."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.engine._failure_context import (
    RECORD_REPR_LIMIT,
    FailureContext,
    capped_repr,
    index_reached,
    mark_record,
)


@pytest.mark.parametrize("failing", [0, 1, 6, 9])
def test_index_reached_is_the_record_a_comprehension_raised_on(failing: int) -> None:
    values = list(range(10))
    records = iter(values)
    with pytest.raises(ZeroDivisionError):
        [1 // (v - failing) for v in records]
    assert index_reached(values, records) == failing


def test_the_first_mark_stays() -> None:
    error = ValueError("bad")
    mark_record(error, ["a", "b", "c"], 2)
    mark_record(error, ["x"], 0)  # an operator further up the chain, which the error passed through
    assert error._sluice_failed_record.index == 2  # type: ignore[attr-defined]
    assert error._sluice_failed_record.value == "c"  # type: ignore[attr-defined]


def test_a_repr_that_raises_does_not_hide_the_error() -> None:
    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert capped_repr(Hostile()).startswith("<Hostile ")


def test_a_long_repr_is_cut() -> None:
    class Wide:
        def __repr__(self) -> str:
            return "w" * 10_000

    assert len(capped_repr([Wide()] * 50)) <= RECORD_REPR_LIMIT
    assert len(capped_repr({"k": "v" * 10_000})) <= RECORD_REPR_LIMIT


def test_the_name_shows_only_when_it_is_not_the_uid() -> None:
    record: Any = "record 3 of a batch of 5: 7"
    described = FailureContext("parse", "parse", 1, record).describe()
    assert described == f"in operator 'parse', subtask 1: {record}"
    assert FailureContext("parse", "Parse lines", 0, None).describe() == (
        "in operator 'parse' (Parse lines), subtask 0"
    )
    assert FailureContext(None, None, 2, None).describe() == "subtask 2"

"""Two subtasks of one PostgresSink creating the marker table at the same moment: the loser goes on.

`CREATE TABLE IF NOT EXISTS` is not atomic in PostgreSQL; the subtask that loses the race fails on
whichever catalog entry the winner wrote first. The integration tier saw one of them, the table's row
type ("type sluice_transactions already exists", DuplicateObject), fail a job at its start. The race
itself cannot be provoked on demand, so the connection here answers as the loser's does.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from sluice.connectors.postgres import PostgresSink


class _Lost:
    def __init__(self, error: type[Exception]) -> None:
        self.error = error
        self.statements: list[str] = []

    def execute(self, sql: str, params: Any = None) -> Any:
        self.statements.append(sql)
        if sql.startswith("SELECT to_regclass"):
            return self  # not there yet when looked up
        raise self.error("already exists")

    def fetchone(self) -> tuple[None]:
        return (None,)


@pytest.mark.parametrize(
    "error",
    [psycopg.errors.DuplicateObject, psycopg.errors.DuplicateTable, psycopg.errors.UniqueViolation],
)
def test_the_subtask_that_loses_the_race_to_create_the_marker_table_goes_on(error: type[Exception]) -> None:
    sink = PostgresSink("postgresql://unused", "counts", ["k"])
    lost = _Lost(error)
    sink._ensure_marker_table(lost)
    assert lost.statements[-1].startswith("CREATE TABLE IF NOT EXISTS sluice_transactions")


def test_any_other_error_creating_it_still_fails_the_task() -> None:
    sink = PostgresSink("postgresql://unused", "counts", ["k"])
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        sink._ensure_marker_table(_Lost(psycopg.errors.InsufficientPrivilege))

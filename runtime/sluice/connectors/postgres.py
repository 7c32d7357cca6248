"""Exactly-once rows into PostgreSQL through prepared transactions (PREPARE TRANSACTION / COMMIT PREPARED).

Rows of a transaction are inserted in an ordinary transaction that is prepared at the checkpoint
(pre-commit: durable, invisible, surviving a crash of the writer) and committed with COMMIT PREPARED
when the checkpoint completes. The server needs `max_prepared_transactions > 0`.

A transaction's global id is `<prefix>-<attempt token>-<subtask>-<checkpoint id>-<n>`. After a restore
from checkpoint c, prepared transactions with this prefix from other attempts and for checkpoints after c
never became part of a completed checkpoint: they are rolled back, so they hold no locks and their rows
never appear. The prefix must therefore be unique per job writing into the database.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sluice.connectors.base import TransactionContext, TwoPhaseCommitSink

_PREFIX = re.compile(r"^[A-Za-z0-9_.\-]{1,120}$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


@dataclass
class _Transaction:
    connection: Any
    name: str
    rows: int = 0


class PostgresSink(TwoPhaseCommitSink[_Transaction, str]):
    def __init__(
        self, dsn: str, table: str, columns: Sequence[str], transaction_prefix: str | None = None
    ) -> None:
        if not _IDENTIFIER.match(table):
            raise ValueError(
                f"PostgresSink: {table!r} is not a plain table name (letters, digits, _; schema.table)"
            )
        bad = [c for c in columns if not _IDENTIFIER.match(c)]
        if not columns or bad:
            raise ValueError(
                f"PostgresSink: give the column names as plain identifiers (bad: {bad or 'none given'})"
            )
        self.dsn = dsn
        self.table = table
        self.columns = list(columns)
        self.prefix = transaction_prefix or f"sluice-{table}"
        if not _PREFIX.match(self.prefix):
            raise ValueError(
                f"PostgresSink: transaction_prefix {self.prefix!r} may use only letters, digits, _ . and -"
            )
        placeholders = ", ".join(["%s"] * len(self.columns))
        self._insert = f"INSERT INTO {table} ({', '.join(self.columns)}) VALUES ({placeholders})"
        self._connection: Any = None
        self._token = ""
        self._subtask = 0

    def _connect(self) -> Any:
        if self._connection is None or self._connection.closed:
            import psycopg

            self._connection = psycopg.connect(self.dsn, autocommit=False)
        return self._connection

    def _row(self, value: Any) -> Sequence[Any]:
        if isinstance(value, dict):
            return [value.get(c) for c in self.columns]
        if isinstance(value, (tuple, list)) and len(value) == len(self.columns):
            return value
        raise ValueError(
            f"PostgresSink({self.table}): a record must be a tuple/list of {len(self.columns)} values "
            f"({', '.join(self.columns)}) or a dict, got {value!r}"
        )

    def begin(self, ctx: TransactionContext) -> _Transaction:
        self._token, self._subtask = ctx.attempt_token, ctx.subtask_index
        return _Transaction(self._connect(), ctx.next_name())

    def write(self, txn: _Transaction, values: list[Any], timestamps: list[int] | None) -> None:
        with txn.connection.cursor() as cursor:
            cursor.executemany(self._insert, [self._row(v) for v in values])
        txn.rows += len(values)

    def pre_commit(self, txn: _Transaction, checkpoint_id: int) -> str:
        gid = f"{self.prefix}-{self._token}-{self._subtask}-{checkpoint_id}-{txn.name.rsplit('-', 1)[-1]}"
        # PREPARE TRANSACTION takes no parameters; the id is built from validated parts only.
        txn.connection.execute(f"PREPARE TRANSACTION '{gid}'")
        return gid

    def commit(self, committable: str) -> None:
        connection = self._connect()
        if committable in self._prepared(connection):
            connection.commit()
            connection.autocommit = True
            try:
                connection.execute(f"COMMIT PREPARED '{committable}'")
            finally:
                connection.autocommit = False
        # Not prepared any more: committed before (commit is called again after a restore).

    def abort(self, txn: _Transaction) -> None:
        txn.connection.rollback()

    def recover(self, ctx: TransactionContext, committed: list[str], restored_checkpoint: int) -> None:
        connection = self._connect()
        keep = set(committed)
        stale = []
        for gid in self._prepared(connection):
            parsed = self._parse(gid)
            if parsed is None or gid in keep:
                continue
            token, checkpoint = parsed
            if token != ctx.attempt_token and checkpoint > restored_checkpoint:
                stale.append(gid)
        if stale:
            connection.commit()
            connection.autocommit = True
            try:
                for gid in stale:
                    if gid in self._prepared(connection):
                        connection.execute(f"ROLLBACK PREPARED '{gid}'")
            finally:
                connection.autocommit = False

    def _prepared(self, connection: Any) -> set[str]:
        rows = connection.execute(
            "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE %s AND database = current_database()",
            [self.prefix.replace("%", r"\%").replace("_", r"\_") + "-%"],
        ).fetchall()
        connection.commit()
        return {row[0] for row in rows}

    def _parse(self, gid: str) -> tuple[str, int] | None:
        rest = gid[len(self.prefix) + 1 :].split("-")
        if len(rest) != 4 or not rest[2].isdigit():
            return None
        return rest[0], int(rest[2])

    def __getstate__(self) -> dict[str, Any]:
        # A sink travels to TaskManagers inside the job graph: never with a live connection.
        state = dict(self.__dict__)
        state["_connection"] = None
        return state

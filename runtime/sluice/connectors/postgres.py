"""Exactly-once rows into PostgreSQL through prepared transactions (PREPARE TRANSACTION / COMMIT PREPARED).

Rows of a transaction are inserted in an ordinary transaction that is prepared at the checkpoint
(pre-commit: durable, invisible, surviving a crash of the writer) and committed with COMMIT PREPARED
when the checkpoint completes. The server needs `max_prepared_transactions > 0`.

Two connections per subtask: one carries the transaction being written, the other (autocommit) looks
up, commits and rolls back prepared transactions. They must not share one: between a checkpoint's
snapshot and its completion the writing connection already holds the *next* checkpoint's rows, and any
COMMIT on it would make them visible outside two-phase commit (a restore then writes them again).

A transaction's global id is `<prefix>-<attempt token>-<subtask>-<checkpoint id>-<n>`; the default
prefix names the job and the sink's operator uid, so two jobs (or two sinks of one job) writing into one
database never roll back each other's transactions. After a restore from checkpoint c, prepared
transactions with this prefix from other attempts and for checkpoints after c never became part of a
completed checkpoint: they are rolled back, so they hold no locks and their rows never appear.

Each transaction also inserts its id into a marker table (`sluice_transactions` unless told otherwise,
created when missing). A committable that is no longer prepared is then known to be committed when its
marker is visible; when it is not, the transaction was rolled back or lost and `commit` fails loudly
instead of dropping the checkpoint's rows in silence.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sluice.connectors.base import TransactionContext, TwoPhaseCommitSink

_PREFIX = re.compile(r"^[A-Za-z0-9_.\-]{1,120}$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
MARKER_TABLE = "sluice_transactions"


class TransactionLost(RuntimeError):
    """A committable of a completed checkpoint was neither prepared nor committed: its rows are gone."""


@dataclass
class _Transaction:
    connection: Any
    name: str
    rows: int = 0


def default_prefix(job_id: str, operator_uid: str) -> str:
    """`sluice-<job id>-<operator uid>`, kept to the characters and length a prefix may have."""
    return f"sluice-{_UNSAFE.sub('_', job_id)[:40]}-{_UNSAFE.sub('_', operator_uid)[:60]}"


class PostgresSink(TwoPhaseCommitSink[_Transaction, str]):
    def __init__(
        self,
        dsn: str,
        table: str,
        columns: Sequence[str],
        transaction_prefix: str | None = None,
        marker_table: str = MARKER_TABLE,
    ) -> None:
        if not _IDENTIFIER.match(table):
            raise ValueError(
                f"PostgresSink: {table!r} is not a plain table name (letters, digits, _; schema.table)"
            )
        if not _IDENTIFIER.match(marker_table):
            raise ValueError(f"PostgresSink: marker_table {marker_table!r} is not a plain table name")
        bad = [c for c in columns if not _IDENTIFIER.match(c)]
        if not columns or bad:
            raise ValueError(
                f"PostgresSink: give the column names as plain identifiers (bad: {bad or 'none given'})"
            )
        if transaction_prefix is not None and not _PREFIX.match(transaction_prefix):
            raise ValueError(
                f"PostgresSink: transaction_prefix {transaction_prefix!r} may use only letters, digits, "
                "_ . and - (at most 120)"
            )
        self.dsn = dsn
        self.table = table
        self.columns = list(columns)
        self.marker_table = marker_table
        self.transaction_prefix = transaction_prefix
        placeholders = ", ".join(["%s"] * len(self.columns))
        self._insert = f"INSERT INTO {table} ({', '.join(self.columns)}) VALUES ({placeholders})"
        self._writer: Any = None
        self._admin: Any = None
        self._prefix = transaction_prefix or ""
        self._token = ""
        self._subtask = 0

    @property
    def prefix(self) -> str:
        """The transaction id prefix (the default one is known once the sink knows its job and uid)."""
        return self._prefix

    def _bind(self, ctx: TransactionContext) -> None:
        self._token, self._subtask = ctx.attempt_token, ctx.subtask_index
        if not self._prefix:
            self._prefix = default_prefix(ctx.job_id, ctx.operator_uid)

    def _connect_writer(self) -> Any:
        if self._writer is None or self._writer.closed:
            import psycopg

            self._writer = psycopg.connect(self.dsn, autocommit=False)
        return self._writer

    def _connect_admin(self) -> Any:
        if self._admin is None or self._admin.closed:
            import psycopg

            self._admin = psycopg.connect(self.dsn, autocommit=True)
            self._ensure_marker_table(self._admin)
        return self._admin

    def _ensure_marker_table(self, connection: Any) -> None:
        import psycopg

        # Looked up first: CREATE ... IF NOT EXISTS needs the CREATE privilege even when the table
        # exists, and a database admin may have created it for a sink that may not create tables.
        if connection.execute("SELECT to_regclass(%s)", [self.marker_table]).fetchone()[0] is not None:
            return
        # Another subtask may create it at the same moment: IF NOT EXISTS is not atomic, and the loser
        # sees the table, its primary key's index or its row type (DuplicateObject, seen) already there.
        with contextlib.suppress(
            psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable, psycopg.errors.DuplicateObject
        ):
            connection.execute(
                f"CREATE TABLE IF NOT EXISTS {self.marker_table} "
                "(gid text PRIMARY KEY, prepared_at timestamptz NOT NULL DEFAULT now())"
            )

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
        self._bind(ctx)
        self._connect_admin()  # the marker table exists before the first transaction needs it
        return _Transaction(self._connect_writer(), ctx.next_name())

    def write(self, txn: _Transaction, values: list[Any], timestamps: list[int] | None) -> None:
        with txn.connection.cursor() as cursor:
            cursor.executemany(self._insert, [self._row(v) for v in values])
        txn.rows += len(values)

    def pre_commit(self, txn: _Transaction, checkpoint_id: int) -> str:
        gid = f"{self._prefix}-{self._token}-{self._subtask}-{checkpoint_id}-{txn.name.rsplit('-', 1)[-1]}"
        txn.connection.execute(f"INSERT INTO {self.marker_table} (gid) VALUES (%s)", [gid])
        # PREPARE TRANSACTION takes no parameters; the id is built from validated parts only.
        txn.connection.execute(f"PREPARE TRANSACTION '{gid}'")
        return gid

    def commit(self, committable: str) -> None:
        connection = self._connect_admin()
        if self._is_prepared(connection, committable):
            connection.execute(f"COMMIT PREPARED '{committable}'")
            return
        # Not prepared any more: committed before (commit runs again after a restore) if its marker
        # row is visible; otherwise it was rolled back or lost, and with it the rows of a checkpoint.
        found = connection.execute(
            f"SELECT 1 FROM {self.marker_table} WHERE gid = %s", [committable]
        ).fetchone()
        if found is None:
            raise TransactionLost(
                f"PostgresSink({self.table}): transaction {committable!r} of a completed checkpoint is "
                "neither prepared nor committed (rolled back by someone else, or the database lost it); "
                "its rows are missing"
            )

    def discard(self, committable: str) -> None:
        import psycopg

        with contextlib.suppress(psycopg.errors.UndefinedObject):  # already gone: nothing to discard
            self._connect_admin().execute(f"ROLLBACK PREPARED '{committable}'")

    def abort(self, txn: _Transaction) -> None:
        txn.connection.rollback()

    def recover(self, ctx: TransactionContext, committed: list[str], restored_checkpoint: int) -> None:
        import psycopg

        self._bind(ctx)
        connection = self._connect_admin()
        keep = set(committed)
        for gid in self._prepared(connection):
            parsed = self._parse(gid)
            if parsed is None or gid in keep:
                continue
            token, checkpoint = parsed
            if token != ctx.attempt_token and checkpoint > restored_checkpoint:
                # Every subtask recovers at the same time; another one may have rolled it back first.
                with contextlib.suppress(psycopg.errors.UndefinedObject):
                    connection.execute(f"ROLLBACK PREPARED '{gid}'")

    def close(self) -> None:
        # A prepared transaction lives on in the server without its connection; one still open (never
        # pre-committed) was rolled back when the task closed, and would be by closing its connection.
        for connection in (self._writer, self._admin):
            if connection is not None:
                with contextlib.suppress(Exception):
                    connection.close()
        self._writer = self._admin = None

    @staticmethod
    def _is_prepared(connection: Any, gid: str) -> bool:
        row = connection.execute(
            "SELECT 1 FROM pg_prepared_xacts WHERE gid = %s AND database = current_database()", [gid]
        ).fetchone()
        return row is not None

    def _prepared(self, connection: Any) -> set[str]:
        rows = connection.execute(
            "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE %s AND database = current_database()",
            [self._prefix.replace("\\", "\\\\").replace("%", r"\%").replace("_", r"\_") + "-%"],
        ).fetchall()
        return {row[0] for row in rows}

    def _parse(self, gid: str) -> tuple[str, int] | None:
        if not gid.startswith(self._prefix + "-"):
            return None
        rest = gid[len(self._prefix) + 1 :].split("-")
        if len(rest) != 4 or not rest[1].isdigit() or not rest[2].isdigit() or not rest[3].isdigit():
            return None  # the prefix of another sink that starts with ours
        return rest[0], int(rest[2])

    def __getstate__(self) -> dict[str, Any]:
        # A sink travels to TaskManagers inside the job graph: never with a live connection.
        state = dict(self.__dict__)
        state["_writer"] = state["_admin"] = None
        return state

"""The PostgreSQL fixture gives a real server on which two-phase commit works across sessions."""

from __future__ import annotations

import psycopg
import pytest

from testkit.postgres import PostgresServer

pytestmark = pytest.mark.postgres


def test_server_accepts_connections_with_prepared_transactions_enabled(
    postgres_server: PostgresServer,
) -> None:
    with psycopg.connect(postgres_server.dsn) as conn:
        assert conn.execute("SELECT 1 + 1").fetchone() == (2,)
        setting = conn.execute("SHOW max_prepared_transactions").fetchone()
    assert setting == ("10",)
    assert postgres_server.execute("SELECT current_user") == [("postgres",)]


def test_each_test_gets_a_fresh_empty_database(postgres_server: PostgresServer, postgres_db: str) -> None:
    with psycopg.connect(postgres_db) as conn:
        dbname = conn.execute("SELECT current_database()").fetchone()
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
    assert dbname is not None and dbname[0] != "postgres"
    assert postgres_server.dsn_for(dbname[0]) == postgres_db
    assert tables == (0,)


def test_prepare_then_commit_prepared(postgres_db: str) -> None:
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (v int)")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO t VALUES (1), (2)")
        conn.execute("PREPARE TRANSACTION 'x'")
        # Prepared but not committed: the rows are not visible yet.
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        conn.execute("COMMIT PREPARED 'x'")
        assert conn.execute("SELECT sum(v) FROM t").fetchone() == (3,)
        assert conn.execute("SELECT count(*) FROM pg_prepared_xacts").fetchone() == (0,)


def test_prepared_transaction_survives_disconnect_and_commits_from_another_session(
    postgres_db: str,
) -> None:
    with psycopg.connect(postgres_db, autocommit=True) as setup:
        setup.execute("CREATE TABLE t (v int)")

    preparing = psycopg.connect(postgres_db, autocommit=True)
    preparing.execute("BEGIN")
    preparing.execute("INSERT INTO t VALUES (42)")
    preparing.execute("PREPARE TRANSACTION 'sink-chk-7'")
    backend_pid = preparing.info.backend_pid
    preparing.close()

    with psycopg.connect(postgres_db, autocommit=True) as other:
        assert other.info.backend_pid != backend_pid
        prepared = other.execute(
            "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()"
        ).fetchall()
        assert prepared == [("sink-chk-7",)]
        assert other.execute("SELECT count(*) FROM t").fetchone() == (0,)
        other.execute("COMMIT PREPARED 'sink-chk-7'")
        assert other.execute("SELECT v FROM t").fetchall() == [(42,)]
        assert other.execute("SELECT count(*) FROM pg_prepared_xacts").fetchone() == (0,)


def test_database_with_a_leftover_prepared_transaction_is_still_dropped(
    postgres_server: PostgresServer,
) -> None:
    dsn = postgres_server.create_database("leftover_2pc")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("BEGIN")
        conn.execute("CREATE TABLE t (v int)")
        conn.execute("PREPARE TRANSACTION 'left-behind'")

    postgres_server.drop_database("leftover_2pc")

    assert postgres_server.execute("SELECT count(*) FROM pg_prepared_xacts") == [(0,)]
    assert postgres_server.execute("SELECT 1 FROM pg_database WHERE datname = 'leftover_2pc'") == []

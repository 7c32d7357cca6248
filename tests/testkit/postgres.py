"""A real PostgreSQL server for tests: ``initdb`` + ``pg_ctl`` in a temporary directory on loopback.

The server comes from the Debian packages (``scripts/install-system-deps.sh``). PostgreSQL refuses to run
as root, so when the tests run as root every server command runs as the ``postgres`` system user that the
Debian package creates, and the temporary directory is handed to that user.

``max_prepared_transactions`` is set so that ``PREPARE TRANSACTION`` works (the two-phase-commit sink
needs it); the server listens on 127.0.0.1 on a free port and on a Unix socket inside the temporary
directory, so it never collides with a system cluster.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from testkit.ports import free_loopback_port

SUPERUSER = "postgres"
INSTALL_HINT = "install it with scripts/install-system-deps.sh (Debian package 'postgresql')"


def find_postgres_bin() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` (Debian layout), else the directory of ``initdb``."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if found:
        newest = max(found, key=lambda p: int(re.sub(r"\D", "", Path(p).parts[-3]) or 0))
        return Path(newest).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise RuntimeError(
        f"PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin: {INSTALL_HINT}"
    )


@dataclass
class PostgresServer:
    """A running server. ``dsn`` connects as the superuser to the ``postgres`` database."""

    bin_dir: Path
    base_dir: Path
    port: int
    run_as: str | None  # the system user the server runs as, when the tests run as root

    host = "127.0.0.1"
    user = SUPERUSER

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def socket_dir(self) -> Path:
        return self.base_dir / "socket"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "server.log"

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, dbname: str) -> str:
        """A libpq URI for psycopg 3 (``psycopg.connect(dsn)``)."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{dbname}"

    def execute(
        self, statement: str | sql.Composed, params: Sequence[Any] | None = None, dbname: str = "postgres"
    ) -> list[Any]:
        """Run one statement in autocommit mode and return its rows (empty when it returns none)."""
        with psycopg.connect(self.dsn_for(dbname), autocommit=True) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description is not None else []

    def create_database(self, name: str) -> str:
        """Create a database and return its DSN."""
        self.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn_for(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, first rolling back prepared transactions left in it (they would block the drop).

        ROLLBACK PREPARED only works from a session connected to the transaction's own database.
        """
        gids = self.execute("SELECT gid FROM pg_prepared_xacts WHERE database = %s", [name])
        for (gid,) in gids:
            # A utility statement: the gid cannot be a bound parameter, so it is quoted client-side.
            self.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)), dbname=name)
        self.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    # --- lifecycle -----------------------------------------------------------------------------------

    def _command(self, args: list[str]) -> list[str]:
        return ["runuser", "-u", self.run_as, "--", *args] if self.run_as else args

    def _run(self, args: list[str]) -> None:
        done = subprocess.run(self._command(args), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log = self.log_file.read_text() if self.log_file.exists() else ""
            raise RuntimeError(
                f"{' '.join(args[:2])} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}{log}"
            )

    def start(self) -> None:
        self.socket_dir.mkdir()
        if self.run_as:
            user = pwd.getpwnam(self.run_as)
            for path in (self.base_dir, self.socket_dir):
                os.chown(path, user.pw_uid, user.pw_gid)
        # Trust authentication: the server only listens on loopback and a private socket directory.
        self._run(
            [str(self.bin_dir / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER, "--auth=trust",
             "--encoding=UTF8", "--locale=C", "--no-sync"]
        )  # fmt: skip
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.socket_dir}'",
            # PREPARE TRANSACTION is disabled at 0 (the default); the 2PC sink needs a few per test.
            "max_prepared_transactions": "10",
            # Durability against an OS crash is not under test; skipping fsync makes the suite faster.
            # A server crash or restart still keeps committed and prepared transactions (they are in WAL).
            "fsync": "off",
            "full_page_writes": "off",
            "synchronous_commit": "off",
        }
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write("\n# set by tests/testkit/postgres.py\n")
            conf.writelines(f"{k} = {v}\n" for k, v in settings.items())
        self._run(
            [str(self.bin_dir / "pg_ctl"), "start", "-D", str(self.data_dir), "-l", str(self.log_file),
             "-w", "-t", "60"]
        )  # fmt: skip

    def stop(self) -> None:
        if (self.data_dir / "postmaster.pid").exists():
            args = [str(self.bin_dir / "pg_ctl"), "stop", "-D", str(self.data_dir), "-w", "-t", "30"]
            done = subprocess.run(self._command([*args, "-m", "fast"]), capture_output=True, check=False)
            if done.returncode != 0:
                subprocess.run(self._command([*args, "-m", "immediate"]), capture_output=True, check=False)


def _server_user() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SUPERUSER)
    except KeyError:
        raise RuntimeError(
            f"PostgreSQL will not run as root and there is no '{SUPERUSER}' system user to run it as: "
            f"{INSTALL_HINT}, which creates that user"
        ) from None
    return SUPERUSER


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole session; stopped and deleted at the end, also after failures."""
    try:
        bin_dir, run_as = find_postgres_bin(), _server_user()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    base_dir = Path(tempfile.mkdtemp(prefix="sluice-pg-"))
    server = PostgresServer(bin_dir=bin_dir, base_dir=base_dir, port=free_loopback_port(), run_as=run_as)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(base_dir, ignore_errors=True)


@pytest.fixture
def postgres_db(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty database for one test; returns its DSN and drops it afterwards."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    dsn = postgres_server.create_database(name)
    try:
        yield dsn
    finally:
        postgres_server.drop_database(name)

"""Ledger fixtures: every store, fresh per test, and a throwaway PostgreSQL 15 cluster.

The cluster is started once per session by the tests themselves (issue 3 item 9). No
PostgreSQL binaries → the postgres-parametrised tests are skipped with a loud reason;
binaries present but the cluster will not start → an error, never a skip.
"""

from __future__ import annotations

import itertools
import os
from typing import TYPE_CHECKING

import pytest
from pgcluster import PgCluster, find_bindir, throwaway_cluster

from toolbound.ledger.memory import MemoryLedger
from toolbound.ledger.sqlite import SQLiteLedger

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from toolbound.ledger.store import Ledger

STORES = ["memory", "sqlite", "postgres"]
DATABASE = "toolbound_ledger_tests"
_schemas = itertools.count()


def _skip_without_postgres() -> Path:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip(
            "NO POSTGRESQL BINARIES FOUND (looked in $TOOLBOUND_PG_BINDIR, else "
            "/usr/lib/postgresql/15/bin and `pg_config --bindir`): the PostgreSQL ledger "
            "tests did NOT run. "
            "Install postgresql-15 to run them."
        )
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        pytest.skip(
            "psycopg / psycopg_pool NOT INSTALLED: the PostgreSQL ledger tests did NOT run. "
            "pip install -e '.[dev]' (it pulls in the postgres extra)."
        )
    return bindir


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One PostgreSQL cluster for the session, with fsync on, on a free loopback port."""
    bindir = _skip_without_postgres()
    # A ClusterError raised here is a test ERROR: the binaries exist, so this must work.
    with throwaway_cluster(bindir, databases=(DATABASE,)) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def pg_admin(pg_cluster: PgCluster):
    """An autocommit superuser connection to the test database, for set-up and faults."""
    import psycopg

    with psycopg.connect(pg_cluster.conninfo(DATABASE), autocommit=True) as conn:
        yield conn


@pytest.fixture
def pg_conninfo(pg_cluster: PgCluster, pg_admin) -> Iterator[str]:
    """A connection string whose search_path is a schema made fresh for this test."""
    schema = f"t{os.getpid()}_{next(_schemas)}"
    pg_admin.execute(f"CREATE SCHEMA {schema}".encode())
    yield pg_cluster.conninfo(DATABASE, options=f"-c search_path={schema}")
    pg_admin.execute(f"DROP SCHEMA {schema} CASCADE".encode())


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_ledger(store: str, request: pytest.FixtureRequest) -> Iterator[Callable[..., Ledger]]:
    """Open (another) ledger of this test's kind over this test's storage.

    For SQLite and PostgreSQL a second call reaches the same records (same file, same
    schema); for memory every call is a new, empty store.
    """
    opened: list[Ledger] = []
    if store == "sqlite":
        path = request.getfixturevalue("sqlite_path")

        def make(**kw: object) -> Ledger:
            return SQLiteLedger(path, **kw)  # type: ignore[arg-type]

    elif store == "postgres":
        conninfo = request.getfixturevalue("pg_conninfo")
        from toolbound.ledger.postgres import PostgresLedger

        def make(**kw: object) -> Ledger:
            return PostgresLedger(conninfo, **kw)  # type: ignore[arg-type]

    else:

        def make(**kw: object) -> Ledger:
            return MemoryLedger(**kw)  # type: ignore[arg-type]

    def opener(**kw: object) -> Ledger:
        ledger = make(**kw)
        opened.append(ledger)
        return ledger

    yield opener
    for ledger in opened:
        ledger.close()


@pytest.fixture
def ledger(open_ledger: Callable[..., Ledger]) -> Ledger:
    """A fresh, empty ledger of each kind."""
    return open_ledger()


class Business:
    """A real business table written through ``atomic().connection`` (R8).

    The memory store has no connection; there the table is absent and ``rows()`` is
    ``None``, so a test can assert the SQL stores' rows and the memory store's records
    with one body.
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.insert_sql = (
            "INSERT INTO orders VALUES (?, ?)"
            if isinstance(ledger, SQLiteLedger)
            else "INSERT INTO orders VALUES (%s, %s)"
        )
        with ledger.atomic() as tx:
            self.sql = tx.connection is not None
            if self.sql:
                tx.connection.execute("CREATE TABLE orders (id TEXT NOT NULL, racer TEXT)")

    def insert(self, tx, order_id: str, racer: str = "") -> None:
        if tx.connection is not None:
            tx.connection.execute(self.insert_sql, (order_id, racer))

    def rows(self) -> list[tuple[str, str]] | None:
        if not self.sql:
            return None
        with self.ledger.atomic() as tx:
            return [tuple(r) for r in tx.connection.execute("SELECT id, racer FROM orders")]


@pytest.fixture
def business(ledger: Ledger) -> Business:
    return Business(ledger)

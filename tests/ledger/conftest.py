"""Ledger fixtures: every store, fresh per test.

The PostgreSQL cluster fixtures are in ``tests/conftest.py``, shared with the other
suites.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from toolbound.ledger.memory import MemoryLedger
from toolbound.ledger.sqlite import SQLiteLedger

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from toolbound.ledger.store import Ledger

STORES = ["memory", "sqlite", "postgres"]


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

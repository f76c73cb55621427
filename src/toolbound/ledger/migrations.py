"""Versioned schema migrations for the SQL ledgers (R19).

Each store applies the migrations it has not seen, in order, when it opens, and
records each one in ``toolbound_schema_version``::

    toolbound_schema_version(version INTEGER PRIMARY KEY, description TEXT, applied_at TEXT)

A database already at a *higher* version than this code knows was written by a newer
toolbound: opening it raises ``LedgerError(code="unsupported_schema")`` rather than
guessing at a layout it cannot read. A database that holds ledger tables but no version
table is not one of ours (or was damaged) and raises ``corrupt_store``. Nothing here
ever drops or recreates a table: a migration only moves a schema forward.

The version table is prefixed because the ledger often shares a database with the
application's own tables (R8: the business write and the record commit in one
transaction), and ``schema_version`` is a name many applications already use.

This module is plain data and one pure function; the stores do the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from toolbound.ledger.store import LedgerError

__all__ = [
    "LEDGER_TABLE",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "VERSION_TABLE",
    "Dialect",
    "Migration",
    "pending",
]

Dialect = Literal["sqlite", "postgres"]

LEDGER_TABLE = "toolbound_ledger"
VERSION_TABLE = "toolbound_schema_version"


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    """One step forward in the schema, written once per SQL dialect."""

    version: int
    description: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]

    def statements(self, dialect: Dialect) -> tuple[str, ...]:
        """The DDL for ``dialect``, in order."""
        return self.sqlite if dialect == "sqlite" else self.postgres


_PHASES = "'intent', 'executing', 'committed', 'failed', 'unknown'"

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        version=1,
        description="idempotency records keyed by (scope, tool_version, key)",
        # Instants are integer microseconds since the epoch (UTC) in SQLite so that
        # sweeps and retention compare numbers, not text in mixed offsets. JSON columns
        # are TEXT: the stored result must come back exactly as written (R8 replay).
        sqlite=(
            f"""
            CREATE TABLE {LEDGER_TABLE} (
                scope         TEXT    NOT NULL,
                tool_version  TEXT    NOT NULL,
                key           TEXT    NOT NULL,
                digest        TEXT    NOT NULL,
                invocation_id TEXT    NOT NULL,
                tool          TEXT    NOT NULL,
                canonical     BLOB    NOT NULL,
                subject       TEXT    NOT NULL,
                phase         TEXT    NOT NULL CHECK (phase IN ({_PHASES})),
                deadline_us   INTEGER NOT NULL,
                created_us    INTEGER NOT NULL,
                updated_us    INTEGER NOT NULL,
                result        TEXT,
                evidence      TEXT    NOT NULL DEFAULT '[]',
                PRIMARY KEY (scope, tool_version, key)
            )
            """,
            f"CREATE INDEX {LEDGER_TABLE}_invocation ON {LEDGER_TABLE} (invocation_id)",
            (
                f"CREATE INDEX {LEDGER_TABLE}_unknown ON {LEDGER_TABLE} (created_us)"
                " WHERE phase = 'unknown'"
            ),
            (
                f"CREATE INDEX {LEDGER_TABLE}_open ON {LEDGER_TABLE} (deadline_us)"
                " WHERE phase IN ('intent', 'executing')"
            ),
        ),
        # ``result`` is ``json``, not ``jsonb``: jsonb rewrites numbers (-0.0 → 0) and
        # the replayed result must equal the original field by field (R8). ``seq``
        # keeps insertion order as a tie-break for records created at the same instant.
        postgres=(
            f"""
            CREATE TABLE {LEDGER_TABLE} (
                scope         text        NOT NULL,
                tool_version  text        NOT NULL,
                key           text        NOT NULL,
                digest        text        NOT NULL,
                invocation_id text        NOT NULL,
                tool          text        NOT NULL,
                canonical     bytea       NOT NULL,
                subject       json        NOT NULL,
                phase         text        NOT NULL CHECK (phase IN ({_PHASES})),
                deadline      timestamptz NOT NULL,
                created_at    timestamptz NOT NULL,
                updated_at    timestamptz NOT NULL,
                result        json,
                evidence      jsonb       NOT NULL DEFAULT '[]',
                seq           bigint      GENERATED ALWAYS AS IDENTITY,
                PRIMARY KEY (scope, tool_version, key)
            )
            """,
            f"CREATE INDEX {LEDGER_TABLE}_invocation ON {LEDGER_TABLE} (invocation_id)",
            (
                f"CREATE INDEX {LEDGER_TABLE}_unknown ON {LEDGER_TABLE} (created_at, seq)"
                " WHERE phase = 'unknown'"
            ),
            (
                f"CREATE INDEX {LEDGER_TABLE}_open ON {LEDGER_TABLE} (deadline)"
                " WHERE phase IN ('intent', 'executing')"
            ),
        ),
    ),
    Migration(
        version=2,
        description="epoch: each ownership of a key (claim or takeover) fences the ones before",
        # A record written before epochs existed is under its first ownership. Adding a
        # column with a constant default rewrites no row in either database.
        sqlite=(f"ALTER TABLE {LEDGER_TABLE} ADD COLUMN epoch INTEGER NOT NULL DEFAULT 1",),
        postgres=(f"ALTER TABLE {LEDGER_TABLE} ADD COLUMN epoch bigint NOT NULL DEFAULT 1",),
    ),
)
"""Every migration, oldest first; versions are 1, 2, 3, … with no gaps."""

SCHEMA_VERSION = MIGRATIONS[-1].version
"""The version this code writes and reads."""


def pending(current: int, *, where: str) -> tuple[Migration, ...]:
    """The migrations a database at ``current`` still needs (``0`` = empty).

    Raises ``LedgerError(code="unsupported_schema")`` when ``current`` is newer than
    this code: an older toolbound must not write into a layout it does not know.
    ``where`` names the database in the message.
    """
    if current > SCHEMA_VERSION:
        msg = (
            f"{where} holds ledger schema version {current}, but this toolbound reads only "
            f"versions up to {SCHEMA_VERSION}; upgrade toolbound to open it"
        )
        raise LedgerError(msg, code="unsupported_schema")
    if current < 0:
        msg = f"{where} records an impossible ledger schema version {current}"
        raise LedgerError(msg, code="corrupt_store")
    return MIGRATIONS[current:]

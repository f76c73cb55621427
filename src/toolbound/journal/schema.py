"""The journal's tables, and how a database made by an older release is brought forward.

Every store creates :data:`SCHEMA` when it opens, serialised between processes
(SQLite's write lock, a PostgreSQL advisory lock). Another module keeping its own
tables in the journal's database adds its ``CREATE … IF NOT EXISTS`` statements
with :func:`extend_schema` before the journal is opened.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Protocol

from toolbound._jsontext import compact
from toolbound.journal._records import JournalError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "COLUMNS",
    "COLUMN_MIGRATIONS",
    "FORMAT",
    "SCHEMA",
    "UNFINISHED",
    "Cursor",
    "dumps",
    "extend_schema",
    "migrate_traces",
    "plan",
    "refuse_newer",
    "stored_format",
]


class Cursor(Protocol):
    """What the journal needs of a DB-API cursor (sqlite3's and psycopg's both fit)."""

    rowcount: int

    def execute(self, sql: str, params: tuple[object, ...] = ...) -> object:
        """Run one statement."""
        ...

    def executemany(self, sql: str, params: Sequence[tuple[object, ...]]) -> object:
        """Run one statement for each row of parameters."""
        ...

    def fetchone(self) -> tuple[object, ...] | None:
        """The next row."""
        ...

    def fetchall(self) -> list[tuple[object, ...]]:
        """The remaining rows."""
        ...


SCHEMA: list[str] = [
    # The head row of each call: who, what, and where it stands (a projection of its
    # events, written with them). Ownership is added by COLUMN_MIGRATIONS.
    """CREATE TABLE IF NOT EXISTS toolbound_service_calls (
        invocation_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        subject TEXT NOT NULL,
        principal TEXT NOT NULL,
        tool TEXT NOT NULL,
        status TEXT NOT NULL,
        state TEXT NOT NULL,
        digest TEXT,
        decision TEXT,
        approver TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        body TEXT NOT NULL
    )""",
    """CREATE INDEX IF NOT EXISTS toolbound_service_calls_by_tenant
        ON toolbound_service_calls (tenant, created_at)""",
    # R14: the trace is the record. Rows are only ever inserted; a whole call's are
    # deleted together with its head by retention, never one by one.
    """CREATE TABLE IF NOT EXISTS toolbound_call_events (
        invocation_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        at TEXT NOT NULL,
        kind TEXT NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (invocation_id, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS toolbound_service_requests (
        tenant TEXT NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        status_code INTEGER,
        response TEXT,
        created_at TEXT NOT NULL,
        PRIMARY KEY (tenant, key)
    )""",
    # Data migrations done once per database (a schema change is idempotent DDL).
    """CREATE TABLE IF NOT EXISTS toolbound_journal_migrations (
        name TEXT PRIMARY KEY
    )""",
    # The feed of what happened to calls, per tenant (Journal.notices): at most one row
    # per call and kind, ordered by pos (see SQLJournal._pos for what it holds).
    """CREATE TABLE IF NOT EXISTS toolbound_call_notices (
        invocation_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        tenant TEXT NOT NULL,
        pos BIGINT NOT NULL,
        at TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (invocation_id, kind)
    )""",
    """CREATE INDEX IF NOT EXISTS toolbound_call_notices_by_tenant
        ON toolbound_call_notices (tenant, pos, invocation_id, kind)""",
    """CREATE TABLE IF NOT EXISTS toolbound_console_sessions (
        session_hash TEXT PRIMARY KEY,
        principal TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
    )""",
]
"""Every statement a journal runs as it opens, in order; each must be idempotent."""

COLUMN_MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("owner", "TEXT"),
    ("lease_until", "DOUBLE PRECISION"),
    ("request_key", "TEXT"),
    ("surface", "TEXT"),
)
"""Columns added to ``toolbound_service_calls`` after its first release, in order.

A journal opened on an older table adds what is missing, then hands every call an
older process left unfinished an expired lease, so the first sweep settles it as a
dead owner's call.
"""

UNFINISHED = "status = 'running' OR (status = 'awaiting_confirmation' AND decision IS NOT NULL)"
COLUMNS = (
    "invocation_id, tenant, subject, principal, tool, status, state, digest, decision,"
    " approver, created_at, updated_at, body, owner, lease_until, request_key, surface"
)
_LATE_INDEXES = (
    # Only the calls someone holds: a call written as it ends (a read, an answer) leaves
    # it untouched, one page fewer for its commit. The first releases indexed every row.
    "DROP INDEX IF EXISTS toolbound_service_calls_by_lease",
    """CREATE INDEX IF NOT EXISTS toolbound_service_calls_leased
        ON toolbound_service_calls (lease_until) WHERE lease_until IS NOT NULL""",
    """CREATE INDEX IF NOT EXISTS toolbound_service_calls_by_request
        ON toolbound_service_calls (tenant, request_key)""",
    # The inbox's hand-over: parked calls decided elsewhere, not yet taken by their
    # holder. Each holder asks every half second; the index holds only those rows.
    """CREATE INDEX IF NOT EXISTS toolbound_service_calls_handed_over
        ON toolbound_service_calls (owner)
        WHERE status = 'awaiting_confirmation' AND decision IS NOT NULL""",
)


def extend_schema(*statements: str) -> None:
    """Have every journal opened from now on also run ``statements`` (idempotent DDL)."""
    SCHEMA.extend(s for s in statements if s not in SCHEMA)


FORMAT = 1
"""The layout of records this code writes and reads.

A release that changes how a call is kept (say, a write's events in one row) raises
it and marks the database ``format-<N>`` in ``toolbound_journal_migrations`` when it
first writes that way; a release that finds a mark above its own refuses to open the
database (``unsupported_schema``) rather than misread or write into it. Format 1, this
one, writes no mark.
"""

_MARKS = "CREATE TABLE IF NOT EXISTS toolbound_journal_migrations (name TEXT PRIMARY KEY)"


def create(cur: Cursor, present: Callable[[Cursor], set[str]], mark: str) -> None:
    """Create what is missing and bring an older database forward (one transaction).

    Raises ``JournalError`` (``unsupported_schema``) for a database a newer release
    has written in a format this one does not read; nothing in it is changed.
    """
    cur.execute(_MARKS)
    refuse_newer(cur)
    for statement in SCHEMA:
        cur.execute(statement)
    columns = present(cur)
    added = False
    for column, kind in COLUMN_MIGRATIONS:
        if column not in columns:
            cur.execute(f"ALTER TABLE toolbound_service_calls ADD COLUMN {column} {kind}")
            added = True
    if added:
        # Calls an older process left unfinished: a lease that has already passed.
        cur.execute(f"UPDATE toolbound_service_calls SET lease_until = 0 WHERE {UNFINISHED}")  # noqa: S608 - fixed SQL
    for statement in _LATE_INDEXES:
        cur.execute(statement)
    cur.execute("SELECT name FROM toolbound_journal_migrations WHERE name = 'trace_events'")
    if cur.fetchone() is None:
        # Once: opening scans every head, which a CLI run should not pay each time.
        migrate_traces(cur, mark)
        cur.execute("INSERT INTO toolbound_journal_migrations (name) VALUES ('trace_events')")


def plan(cur: Cursor, names: set[str], columns: set[str]) -> list[str]:
    """What :func:`create` would do to this database, each step as its statement or in words.

    ``names`` are the tables and indexes the database holds, ``columns`` those of
    ``toolbound_service_calls``. Only reads; raises ``unsupported_schema`` as
    :func:`create` does for a database in a newer format. An empty list: nothing to do.
    """
    if "toolbound_journal_migrations" in names:
        refuse_newer(cur)
    steps = [s for s in SCHEMA if _created(s) not in names]
    missing = [(c, kind) for c, kind in COLUMN_MIGRATIONS if c not in columns]
    steps += [f"ALTER TABLE toolbound_service_calls ADD COLUMN {c} {kind}" for c, kind in missing]
    if missing and "toolbound_service_calls" in names:
        unfinished = _count(cur, f"SELECT count(*) FROM toolbound_service_calls WHERE {UNFINISHED}")  # noqa: S608 - fixed SQL
        if unfinished:
            steps.append(
                f"give the {unfinished} call(s) an older process left unfinished an expired lease"
            )
    for statement in _LATE_INDEXES:
        dropped = statement.removeprefix("DROP INDEX IF EXISTS ")
        if dropped in names if dropped != statement else _created(statement) not in names:
            steps.append(statement)
    if "toolbound_service_calls" in names and not _traces_moved(cur, names):
        kept = _count(
            cur, """SELECT count(*) FROM toolbound_service_calls WHERE body LIKE '%"trace":%'"""
        )
        steps.append(
            f"move the traces kept in {kept} call body(ies) into toolbound_call_events (once)"
        )
    return steps


def stored_format(cur: Cursor) -> int:
    """The newest record format the database is marked with (``FORMAT`` when unmarked)."""
    cur.execute("SELECT name FROM toolbound_journal_migrations WHERE name LIKE 'format-%'")
    found = [str(name).removeprefix("format-") for (name,) in cur.fetchall()]
    return max((int(n) for n in found if n.isdecimal()), default=FORMAT)


def _traces_moved(cur: Cursor, names: set[str]) -> bool:
    if "toolbound_journal_migrations" not in names:
        return False
    cur.execute("SELECT name FROM toolbound_journal_migrations WHERE name = 'trace_events'")
    return cur.fetchone() is not None


def _count(cur: Cursor, sql: str) -> int:
    cur.execute(sql)
    row = cur.fetchone()
    return int(str(row[0])) if row else 0


_CREATED = re.compile(r"CREATE (?:TABLE|INDEX) IF NOT EXISTS (\w+)")


def _created(statement: str) -> str:
    """The table or index a ``CREATE … IF NOT EXISTS`` statement makes ("" for another)."""
    found = _CREATED.search(statement)
    return found.group(1) if found else ""


def refuse_newer(cur: Cursor) -> None:
    """Raise ``unsupported_schema`` if the database holds records of a newer format."""
    newest = stored_format(cur)
    if newest > FORMAT:
        msg = (
            f"the journal holds records in format {newest}, written by a newer toolbound;"
            f" this one reads formats up to {FORMAT}: upgrade toolbound to open it"
        )
        raise JournalError(msg, code="unsupported_schema")


def migrate_traces(cur: Cursor, mark: str) -> int:
    """Move traces an older release kept in ``body["trace"]`` into the event table.

    Each such call's events are inserted in their order and the trace is taken out
    of its body, in the opening transaction of the first journal to open the
    database; a call already moved is not matched again. How many calls were moved.
    """
    # `"trace":` never occurs inside a JSON string value (its quotes would be escaped).
    cur.execute(
        """SELECT invocation_id, body FROM toolbound_service_calls WHERE body LIKE '%"trace":%'"""
    )
    moved = 0
    for invocation_id, text in cur.fetchall():
        body = json.loads(str(text))
        trace = body.pop("trace", None) if isinstance(body, dict) else None
        if not isinstance(trace, list):
            continue
        rows = [
            (
                str(invocation_id),
                seq,
                str(event.get("at", "")),
                str(event.get("kind", "")),
                dumps(event),
            )
            for seq, event in enumerate(e for e in trace if isinstance(e, dict))
        ]
        if rows:
            cur.executemany(
                "INSERT INTO toolbound_call_events (invocation_id, seq, at, kind, event)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (invocation_id, seq) DO NOTHING".replace(
                    "?", mark
                ),
                rows,
            )
        cur.execute(
            "UPDATE toolbound_service_calls SET body = ? WHERE invocation_id = ?".replace(
                "?", mark
            ),
            (dumps(body), str(invocation_id)),
        )
        moved += 1
    return moved


# One encoder for every record (without cycle checks: a record is a tree of the
# call's JSON values).
_ENCODE = compact(allow_nan=True)


def dumps(value: object) -> str:
    """Compact JSON, as the journal stores it."""
    return _ENCODE(value)

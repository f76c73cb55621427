"""The service's own records: calls as the API saw them, and HTTP idempotency keys.

The ledger (R8) keeps what a *write* did; the journal keeps what the *service* said:
every invocation a caller submitted, with its proposal, context, answer, human
evidence and trace, so any process can list it, show it and — for a parked call —
resume it after a person decides. It also keeps the ``Idempotency-Key`` of each
request (the IETF draft's semantics: same key and payload → the same answer; another
payload → 422; still running → 409), and the console's sessions: a session lives here,
not in its cookie, so logging out ends it in every process sharing the store, and an
operator can end every session of a principal.

Two stores share one SQL layout: SQLite (WAL, one file beside or inside the ledger's)
and PostgreSQL (psycopg 3). Both sit behind :class:`Journal`. It is a store like the
ledger, not part of any surface: the HTTP service writes it and the CLI's ``trace``
reads it, each opening it from the store URL with :func:`toolbound.wiring.journal_for`.

Decisions are compare-and-set: a parked call takes exactly one decision, once, from
whichever process records it first (R7).

**Ownership.** A call being worked on — running, or decided and not yet finished — is
owned by one service process (``owner``) until ``lease_until``, seconds since the
epoch by the *database's* clock (replicas' own clocks may disagree). The owner renews
its leases while it lives (:meth:`Journal.renew`); another process takes a call over
only once its lease has passed, by one compare-and-set (:meth:`Journal.take_over`),
and a write that carries an owner lands only while that owner still holds the call.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, Protocol, cast

from toolbound._errors import ToolboundError

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path

__all__ = [
    "ClaimedRequest",
    "Finish",
    "Journal",
    "JournalError",
    "PostgresJournal",
    "SQLCursor",
    "SQLiteJournal",
    "StoredCall",
    "Surface",
    "open_journal",
]

_SCHEMA = (
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
    # Ownership (see the module docstring) is added by _COLUMN_MIGRATIONS.
    """CREATE INDEX IF NOT EXISTS toolbound_service_calls_by_tenant
        ON toolbound_service_calls (tenant, created_at)""",
    """CREATE TABLE IF NOT EXISTS toolbound_service_requests (
        tenant TEXT NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        status_code INTEGER,
        response TEXT,
        created_at TEXT NOT NULL,
        PRIMARY KEY (tenant, key)
    )""",
    """CREATE TABLE IF NOT EXISTS toolbound_console_sessions (
        session_hash TEXT PRIMARY KEY,
        principal TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
    )""",
)
_COLUMN_MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("owner", "TEXT"),
    ("lease_until", "DOUBLE PRECISION"),
    ("request_key", "TEXT"),
    ("surface", "TEXT"),
)
"""Columns added to ``toolbound_service_calls`` after its first release, in order.

A journal opened on an older table adds what is missing (serialised like the
``CREATE``s), then hands every call an older process left unfinished an expired
lease, so the first sweep settles it as a dead owner's call.
"""
_UNFINISHED = "status = 'running' OR (status = 'awaiting_confirmation' AND decision IS NOT NULL)"
_COLUMNS = (
    "invocation_id, tenant, subject, principal, tool, status, state, digest, decision,"
    " approver, created_at, updated_at, body, owner, lease_until, request_key, surface"
)
Surface = Literal["service", "mcp-gateway", "mcp-serve", "library"]
"""Which of toolbound's surfaces ran a call and recorded it."""


class JournalError(ToolboundError):
    """A journal operation that cannot be done; ``code`` says why."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredCall:
    """One invocation as the service recorded it. ``body`` is JSON the API returns."""

    invocation_id: str
    tenant: str
    subject: str
    principal: str
    tool: str
    status: str
    state: str
    digest: str | None
    decision: str | None
    approver: str | None
    created_at: datetime
    updated_at: datetime
    body: Mapping[str, object]
    owner: str | None = None
    """The service process that works on the call (see the module docstring)."""
    lease_until: float | None = None
    """Until when ``owner`` holds it, database clock; ``None``: nobody needs to."""
    request_key: str | None = None
    """The Idempotency-Key of the request that submitted it, if any."""
    surface: Surface = "service"
    """Which surface ran the call; rows from before surfaces were kept are the service's."""


@dataclass(frozen=True, slots=True)
class ClaimedRequest:
    """What a request's ``Idempotency-Key`` found.

    ``new``: go on and :meth:`Journal.finish_request` later; ``replay``: answer
    ``status_code``/``response`` again; ``in_progress``: 409; ``mismatch``: 422.
    """

    kind: Literal["new", "replay", "in_progress", "mismatch"]
    status_code: int | None = None
    response: str | None = None


@dataclass(frozen=True, slots=True)
class Finish:
    """The answer to keep for the request holding ``key`` (see :meth:`Journal.put_call`).

    With ``fingerprint`` the key was not claimed beforehand (a read, which may run
    twice harmlessly): it is claimed and answered in the same transaction, unless
    another request got it first.
    """

    tenant: str
    key: str
    status_code: int
    response: str
    fingerprint: str | None = None


class Journal(Protocol):
    """The service's records; every method is safe to call from several threads."""

    def claim_request(
        self, tenant: str, key: str, fingerprint: str, *, now: datetime, stale_after: float
    ) -> ClaimedRequest:
        """Claim ``key`` for a request, or say what an earlier one with it found.

        An unfinished claim older than ``stale_after`` seconds was abandoned (its
        process died) and is taken over.
        """
        ...

    def finish_request(self, tenant: str, key: str, status_code: int, response: str) -> None:
        """Keep the answer given to the request holding ``key``."""
        ...

    def release_request(self, tenant: str, key: str) -> None:
        """Forget an unfinished claim (the request failed before it had an answer)."""
        ...

    def peek_request(self, tenant: str, key: str, fingerprint: str) -> ClaimedRequest | None:
        """What an earlier request with ``key`` found, without claiming it (``None``: none)."""
        ...

    def put_call(
        self, call: StoredCall, *, finish: Finish | None = None, lease: float | None = None
    ) -> ClaimedRequest | None:
        """Insert or replace the record of one invocation.

        With ``finish``, the answer to the request holding that Idempotency-Key is
        kept in the same transaction: the call and its answer are durable together.
        If ``finish`` claims the key and another request holds it, nothing is written
        and that request's claim is returned.

        ``lease``: seconds ``call.owner`` holds the call from now (database clock);
        ``None`` clears the lease (nobody needs to hold the call). A stored call is
        replaced only by its owner: if another process took it over, nothing is
        written and :class:`JournalError` ``not_owner`` is raised.
        """
        ...

    def renew(self, owner: str, *, lease: float) -> int:
        """Extend every lease ``owner`` holds to ``lease`` seconds from now; how many."""
        ...

    def expired(self, *, limit: int = 100) -> list[StoredCall]:
        """Calls whose owner's lease has passed (database clock), oldest first."""
        ...

    def take_over(self, invocation_id: str, owner: str, *, lease: float) -> StoredCall | None:
        """Make ``owner`` the holder of a call whose lease has passed (compare-and-set).

        ``None`` if its lease has not passed or another process took it first.
        """
        ...

    def call_for_request(self, tenant: str, key: str) -> StoredCall | None:
        """The call submitted by the request holding ``key``, if it was stored."""
        ...

    def get_call(self, invocation_id: str) -> StoredCall | None:
        """The record of one invocation, whatever its tenant (callers check)."""
        ...

    def list_calls(
        self,
        tenant: str,
        *,
        status: str | None = None,
        tool: str | None = None,
        subject: str | None = None,
        limit: int = 100,
    ) -> list[StoredCall]:
        """A tenant's invocations, newest first, filtered."""
        ...

    def decide(
        self,
        invocation_id: str,
        *,
        decision: str,
        approver: str,
        now: datetime,
        owner: str | None = None,
        lease: float | None = None,
    ) -> StoredCall:
        """Record the one decision on a parked call; raise ``already_decided`` after.

        With ``owner``, the process recording it holds the call for ``lease`` seconds,
        to run it.
        """
        ...

    def purge(self, *, before: datetime) -> int:
        """Delete calls and request records last touched before ``before`` (retention)."""
        ...

    def open_session(
        self, session_id: str, principal: str, *, now: datetime, expires_at: datetime
    ) -> None:
        """Record a console session of ``principal`` until ``expires_at``."""
        ...

    def session_principal(self, session_id: str, *, now: datetime) -> str | None:
        """The principal a live session belongs to; ``None`` if ended, expired or unknown."""
        ...

    def end_session(self, session_id: str) -> None:
        """End one session (logging out)."""
        ...

    def end_sessions(self, principal: str) -> int:
        """End every session of ``principal``; how many there were."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...

    def transaction(self) -> AbstractContextManager[SQLCursor]:
        """A write transaction on the journal's database, for tables kept beside it.

        Stores with tables of their own in the same database (the service's session
        index, :mod:`toolbound.session_values`) use it: one connection pool, one file.
        Placeholders are :attr:`mark` (``?`` or ``%s``).
        """
        ...

    @property
    def mark(self) -> str:
        """The SQL placeholder of this database's driver."""
        ...


def open_journal(url: str) -> Journal:
    """The journal for a store URL: ``sqlite:///PATH`` or ``postgresql://…``."""
    if url.startswith("sqlite:///"):
        return SQLiteJournal(url.removeprefix("sqlite:///"))
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresJournal(url)
    msg = f"no journal for store URL {url!r}"
    raise JournalError(msg, code="unsupported_store")


# ---------------------------------------------------------------------------


class _SQLJournal:
    """The SQL both stores share; subclasses give connections, placeholder and clock."""

    _mark = "?"
    _now = "((julianday('now') - 2440587.5) * 86400.0)"
    """The database's clock in seconds since the epoch: leases never use a replica's."""

    def _create(self, cur: _Cursor) -> None:
        for statement in _SCHEMA:
            cur.execute(statement)
        present = self._column_names(cur)
        added = False
        for column, kind in _COLUMN_MIGRATIONS:
            if column not in present:
                cur.execute(f"ALTER TABLE toolbound_service_calls ADD COLUMN {column} {kind}")
                added = True
        if added:
            # Calls an older process left unfinished: a lease that has already passed.
            cur.execute(f"UPDATE toolbound_service_calls SET lease_until = 0 WHERE {_UNFINISHED}")  # noqa: S608 - fixed SQL
        cur.execute(
            "CREATE INDEX IF NOT EXISTS toolbound_service_calls_by_lease"
            " ON toolbound_service_calls (lease_until)"
        )
        cur.execute(
            "CREATE INDEX IF NOT EXISTS toolbound_service_calls_by_request"
            " ON toolbound_service_calls (tenant, request_key)"
        )

    def _column_names(self, cur: _Cursor) -> set[str]:
        cur.execute("SELECT name FROM pragma_table_info('toolbound_service_calls')")
        return {str(row[0]) for row in cur.fetchall()}

    @contextmanager
    def _tx(self, *, write: bool = True) -> Iterator[_Cursor]:  # noqa: ARG002 - an interface
        raise NotImplementedError
        yield

    def _q(self, sql: str) -> str:
        return sql.replace("?", self._mark)

    def transaction(self) -> AbstractContextManager[SQLCursor]:
        """A write transaction for a table kept beside the journal's (see :class:`Journal`)."""
        return self._tx()

    @property
    def mark(self) -> str:
        """The SQL placeholder of this database's driver."""
        return self._mark

    def claim_request(
        self, tenant: str, key: str, fingerprint: str, *, now: datetime, stale_after: float
    ) -> ClaimedRequest:
        stamp = _iso(now)
        with self._tx() as cur:
            cur.execute(
                self._q(
                    "INSERT INTO toolbound_service_requests (tenant, key, fingerprint, created_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (tenant, key) DO NOTHING"
                ),
                (tenant, key, fingerprint, stamp),
            )
            if cur.rowcount == 1:
                return ClaimedRequest("new")
            cur.execute(
                self._q(
                    "SELECT fingerprint, status_code, response, created_at"
                    " FROM toolbound_service_requests WHERE tenant = ? AND key = ?"
                ),
                (tenant, key),
            )
            row = cur.fetchone()
            if row is None:  # released between the two statements: claim it again
                cur.execute(
                    self._q(
                        "INSERT INTO toolbound_service_requests"
                        " (tenant, key, fingerprint, created_at) VALUES (?, ?, ?, ?)"
                    ),
                    (tenant, key, fingerprint, stamp),
                )
                return ClaimedRequest("new")
            stored_fp, status_code, response, created = row
            if stored_fp != fingerprint:
                return ClaimedRequest("mismatch")
            if status_code is not None:
                return ClaimedRequest("replay", int(str(status_code)), str(response))
            age = (now - datetime.fromisoformat(str(created))).total_seconds()
            if age < stale_after:
                return ClaimedRequest("in_progress")
            cur.execute(
                self._q(
                    "UPDATE toolbound_service_requests SET created_at = ?"
                    " WHERE tenant = ? AND key = ? AND created_at = ? AND status_code IS NULL"
                ),
                (stamp, tenant, key, created),
            )
            return ClaimedRequest("new" if cur.rowcount == 1 else "in_progress")

    def finish_request(self, tenant: str, key: str, status_code: int, response: str) -> None:
        with self._tx() as cur:
            cur.execute(
                self._q(
                    "UPDATE toolbound_service_requests SET status_code = ?, response = ?"
                    " WHERE tenant = ? AND key = ?"
                ),
                (status_code, response, tenant, key),
            )

    def release_request(self, tenant: str, key: str) -> None:
        with self._tx() as cur:
            cur.execute(
                self._q(
                    "DELETE FROM toolbound_service_requests"
                    " WHERE tenant = ? AND key = ? AND status_code IS NULL"
                ),
                (tenant, key),
            )

    def peek_request(self, tenant: str, key: str, fingerprint: str) -> ClaimedRequest | None:
        with self._tx(write=False) as cur:
            return self._existing(cur, tenant, key, fingerprint)

    def _existing(
        self, cur: _Cursor, tenant: str, key: str, fingerprint: str
    ) -> ClaimedRequest | None:
        cur.execute(
            self._q(
                "SELECT fingerprint, status_code, response"
                " FROM toolbound_service_requests WHERE tenant = ? AND key = ?"
            ),
            (tenant, key),
        )
        row = cur.fetchone()
        if row is None:
            return None
        stored_fp, status_code, response = row
        if stored_fp != fingerprint:
            return ClaimedRequest("mismatch")
        if status_code is None:
            return ClaimedRequest("in_progress")
        return ClaimedRequest("replay", int(str(status_code)), str(response))

    def put_call(
        self, call: StoredCall, *, finish: Finish | None = None, lease: float | None = None
    ) -> ClaimedRequest | None:
        values = _values(call)
        with self._tx() as cur:
            if finish is not None and finish.fingerprint is not None:
                cur.execute(
                    self._q(
                        "INSERT INTO toolbound_service_requests"
                        " (tenant, key, fingerprint, status_code, response, created_at)"
                        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, key) DO NOTHING"
                    ),
                    (
                        finish.tenant,
                        finish.key,
                        finish.fingerprint,
                        finish.status_code,
                        finish.response,
                        values[11],
                    ),
                )
                if cur.rowcount != 1:
                    # Another request holds the key: its answer stands, this one is not kept.
                    return self._existing(cur, finish.tenant, finish.key, finish.fingerprint)
            elif finish is not None:
                cur.execute(
                    self._q(
                        "UPDATE toolbound_service_requests SET status_code = ?, response = ?"
                        " WHERE tenant = ? AND key = ?"
                    ),
                    (finish.status_code, finish.response, finish.tenant, finish.key),
                )
            lease_sql = "NULL" if lease is None else f"{self._now} + ?"
            cur.execute(
                self._q(
                    f"INSERT INTO toolbound_service_calls ({_COLUMNS})"  # noqa: S608 - fixed columns
                    f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {lease_sql}, ?, ?)"
                    " ON CONFLICT (invocation_id) DO UPDATE SET tool = excluded.tool,"
                    " status = excluded.status, state = excluded.state, digest = excluded.digest,"
                    " decision = COALESCE(toolbound_service_calls.decision, excluded.decision),"
                    " approver = COALESCE(toolbound_service_calls.approver, excluded.approver),"
                    " updated_at = excluded.updated_at, body = excluded.body,"
                    " lease_until = excluded.lease_until,"
                    " request_key = COALESCE(toolbound_service_calls.request_key,"
                    " excluded.request_key)"
                    # Only the holder replaces a call: one taken over is not overwritten.
                    " WHERE COALESCE(toolbound_service_calls.owner, '')"
                    " = COALESCE(excluded.owner, '')"
                ),
                (
                    *values,
                    call.owner,
                    *(() if lease is None else (lease,)),
                    call.request_key,
                    call.surface,
                ),
            )
            if cur.rowcount != 1:
                msg = f"invocation {call.invocation_id} is held by another process"
                raise JournalError(msg, code="not_owner")
        return None

    def renew(self, owner: str, *, lease: float) -> int:
        with self._tx() as cur:
            cur.execute(
                self._q(
                    f"UPDATE toolbound_service_calls SET lease_until = {self._now} + ?"  # noqa: S608 - fixed SQL
                    " WHERE owner = ? AND lease_until IS NOT NULL"
                ),
                (lease, owner),
            )
            return max(cur.rowcount, 0)

    def expired(self, *, limit: int = 100) -> list[StoredCall]:
        with self._tx(write=False) as cur:
            cur.execute(
                self._q(
                    f"SELECT {_COLUMNS} FROM toolbound_service_calls"  # noqa: S608 - fixed columns
                    f" WHERE lease_until IS NOT NULL AND lease_until < {self._now}"
                    " ORDER BY lease_until LIMIT ?"
                ),
                (max(1, min(limit, 1000)),),
            )
            return [_call(row) for row in cur.fetchall()]

    def take_over(self, invocation_id: str, owner: str, *, lease: float) -> StoredCall | None:
        with self._tx() as cur:
            # One statement: of several processes seeing the same dead lease, one wins;
            # a lease renewed meanwhile by a live owner no longer matches.
            cur.execute(
                self._q(
                    f"UPDATE toolbound_service_calls SET owner = ?, lease_until = {self._now} + ?"  # noqa: S608 - fixed SQL
                    " WHERE invocation_id = ? AND lease_until IS NOT NULL"
                    f" AND lease_until < {self._now}"
                ),
                (owner, lease, invocation_id),
            )
            if cur.rowcount != 1:
                return None
        return self.get_call(invocation_id)

    def call_for_request(self, tenant: str, key: str) -> StoredCall | None:
        with self._tx(write=False) as cur:
            cur.execute(
                self._q(
                    f"SELECT {_COLUMNS} FROM toolbound_service_calls"  # noqa: S608 - fixed columns
                    " WHERE tenant = ? AND request_key = ?"
                ),
                (tenant, key),
            )
            row = cur.fetchone()
        return None if row is None else _call(row)

    def get_call(self, invocation_id: str) -> StoredCall | None:
        with self._tx() as cur:
            cur.execute(
                self._q(
                    f"SELECT {_COLUMNS} FROM toolbound_service_calls"  # noqa: S608 - fixed columns
                    " WHERE invocation_id = ?"
                ),
                (invocation_id,),
            )
            row = cur.fetchone()
        return None if row is None else _call(row)

    def list_calls(
        self,
        tenant: str,
        *,
        status: str | None = None,
        tool: str | None = None,
        subject: str | None = None,
        limit: int = 100,
    ) -> list[StoredCall]:
        where = ["tenant = ?"]
        params: list[object] = [tenant]
        for column, value in (("status", status), ("tool", tool), ("subject", subject)):
            if value:
                where.append(f"{column} = ?")
                params.append(value)
        params.append(max(1, min(limit, 1000)))
        with self._tx() as cur:
            cur.execute(
                self._q(
                    f"SELECT {_COLUMNS} FROM toolbound_service_calls"  # noqa: S608 - fixed columns
                    f" WHERE {' AND '.join(where)}"
                    " ORDER BY created_at DESC, invocation_id LIMIT ?"
                ),
                tuple(params),
            )
            return [_call(row) for row in cur.fetchall()]

    def decide(
        self,
        invocation_id: str,
        *,
        decision: str,
        approver: str,
        now: datetime,
        owner: str | None = None,
        lease: float | None = None,
    ) -> StoredCall:
        holds = owner is not None and lease is not None
        with self._tx() as cur:
            cur.execute(
                self._q(
                    "UPDATE toolbound_service_calls SET decision = ?, approver = ?, updated_at = ?"  # noqa: S608 - fixed SQL
                    + (f", owner = ?, lease_until = {self._now} + ?" if holds else "")
                    + " WHERE invocation_id = ? AND status = 'awaiting_confirmation'"
                    " AND decision IS NULL"
                ),
                (
                    decision,
                    approver,
                    _iso(now),
                    *((owner, lease) if holds else ()),
                    invocation_id,
                ),
            )
            won = cur.rowcount == 1
        call = self.get_call(invocation_id)
        if call is None:
            msg = f"no invocation {invocation_id}"
            raise JournalError(msg, code="not_found")
        if not won:
            msg = f"invocation {invocation_id} is not waiting for a decision"
            raise JournalError(msg, code="already_decided")
        return call

    def purge(self, *, before: datetime) -> int:
        stamp = _iso(before)
        with self._tx() as cur:
            cur.execute(
                self._q(
                    "DELETE FROM toolbound_service_calls WHERE updated_at < ?"
                    " AND status NOT IN ('awaiting_confirmation', 'outcome_unknown', 'running')"
                ),
                (stamp,),
            )
            count = max(cur.rowcount, 0)
            cur.execute(
                self._q("DELETE FROM toolbound_service_requests WHERE created_at < ?"), (stamp,)
            )
        return count

    # Only a hash of a session id is stored: reading the table gives no one a session.

    def open_session(
        self, session_id: str, principal: str, *, now: datetime, expires_at: datetime
    ) -> None:
        with self._tx() as cur:
            # Expired sessions are removed as new ones begin.
            cur.execute(
                self._q("DELETE FROM toolbound_console_sessions WHERE expires_at <= ?"),
                (_iso(now),),
            )
            cur.execute(
                self._q(
                    "INSERT INTO toolbound_console_sessions"
                    " (session_hash, principal, created_at, expires_at) VALUES (?, ?, ?, ?)"
                ),
                (_session_hash(session_id), principal, _iso(now), _iso(expires_at)),
            )

    def session_principal(self, session_id: str, *, now: datetime) -> str | None:
        with self._tx(write=False) as cur:
            cur.execute(
                self._q(
                    "SELECT principal FROM toolbound_console_sessions"
                    " WHERE session_hash = ? AND expires_at > ?"
                ),
                (_session_hash(session_id), _iso(now)),
            )
            row = cur.fetchone()
        return None if row is None else str(row[0])

    def end_session(self, session_id: str) -> None:
        with self._tx() as cur:
            cur.execute(
                self._q("DELETE FROM toolbound_console_sessions WHERE session_hash = ?"),
                (_session_hash(session_id),),
            )

    def end_sessions(self, principal: str) -> int:
        with self._tx() as cur:
            cur.execute(
                self._q("DELETE FROM toolbound_console_sessions WHERE principal = ?"),
                (principal,),
            )
            return max(cur.rowcount, 0)


class _Cursor(Protocol):
    rowcount: int

    def execute(self, sql: str, params: tuple[object, ...] = ...) -> object: ...
    def fetchone(self) -> tuple[object, ...] | None: ...
    def fetchall(self) -> list[tuple[object, ...]]: ...


SQLCursor = _Cursor
"""A DB-API cursor as the journal's transactions give it (:meth:`Journal.transaction`)."""


class SQLiteJournal(_SQLJournal):
    """The journal in an SQLite file.

    WAL with ``synchronous=NORMAL``: durable across a crash of the process, which is
    what a service restart must survive (the ledger, which guards effects, syncs fully).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        with self._tx() as cur:
            self._create(cur)

    def _connection(self) -> sqlite3.Connection:
        conn = cast("sqlite3.Connection | None", getattr(self._local, "conn", None))
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
            with self._guard:
                self._all.append(conn)
        return conn

    @contextmanager
    def _tx(self, *, write: bool = True) -> Iterator[_Cursor]:
        conn = self._connection()
        cur = conn.cursor()
        cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield cast("_Cursor", cur)
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    def close(self) -> None:
        """Close every thread's connection."""
        with self._guard:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()


class PostgresJournal(_SQLJournal):
    """The journal in PostgreSQL, through a psycopg 3 connection pool."""

    _mark = "%s"
    _now = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"

    def __init__(self, conninfo: str, *, max_size: int = 8) -> None:
        try:
            from psycopg_pool import ConnectionPool  # noqa: PLC0415
        except ImportError as exc:  # pragma: no cover - the extra is missing
            msg = "PostgresJournal needs psycopg: pip install 'toolbound[postgres]'"
            raise ImportError(msg) from exc
        self._pool = ConnectionPool(conninfo, min_size=1, max_size=max_size, open=True)
        with self._tx() as cur:
            # Two processes starting at once must not race on CREATE TABLE.
            cur.execute("SELECT pg_advisory_xact_lock(7210431)")
            self._create(cur)

    def _column_names(self, cur: _Cursor) -> set[str]:
        cur.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = 'toolbound_service_calls'"
        )
        return {str(row[0]) for row in cur.fetchall()}

    @contextmanager
    def _tx(self, *, write: bool = True) -> Iterator[_Cursor]:  # noqa: ARG002 - MVCC
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cast("_Cursor", cur)

    def close(self) -> None:
        """Close the pool."""
        self._pool.close()


def _iso(at: datetime) -> str:
    # UTC throughout, so that the text sorts as the instants do.
    return at.astimezone(UTC).isoformat()


def _session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def _values(call: StoredCall) -> tuple[object, ...]:
    return (
        call.invocation_id,
        call.tenant,
        call.subject,
        call.principal,
        call.tool,
        call.status,
        call.state,
        call.digest,
        call.decision,
        call.approver,
        _iso(call.created_at),
        _iso(call.updated_at),
        json.dumps(call.body, separators=(",", ":"), ensure_ascii=False),
    )


def _call(row: tuple[object, ...]) -> StoredCall:
    (
        invocation_id,
        tenant,
        subject,
        principal,
        tool,
        status,
        state,
        digest,
        decision,
        approver,
        created,
        updated,
        body,
        owner,
        lease_until,
        request_key,
        surface,
    ) = row
    return StoredCall(
        invocation_id=str(invocation_id),
        tenant=str(tenant),
        subject=str(subject),
        principal=str(principal),
        tool=str(tool),
        status=str(status),
        state=str(state),
        digest=None if digest is None else str(digest),
        decision=None if decision is None else str(decision),
        approver=None if approver is None else str(approver),
        created_at=datetime.fromisoformat(str(created)),
        updated_at=datetime.fromisoformat(str(updated)),
        body=cast("dict[str, object]", json.loads(str(body))),
        owner=None if owner is None else str(owner),
        lease_until=None if lease_until is None else float(cast("float", lease_until)),
        request_key=None if request_key is None else str(request_key),
        surface=cast("Surface", "service" if surface is None else str(surface)),
    )

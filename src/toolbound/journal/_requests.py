"""The SQL of HTTP idempotency keys and console sessions, shared by both stores."""

from __future__ import annotations

import hashlib
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from toolbound.journal._records import ClaimedRequest

if TYPE_CHECKING:
    from collections.abc import Iterator

    from toolbound.journal.schema import Cursor

__all__ = ["SQLBase", "iso"]


class SQLBase:
    """Connections, placeholder and clock: given by each store."""

    _mark = "?"
    _now = "((julianday('now') - 2440587.5) * 86400.0)"
    """The database's clock in seconds since the epoch: leases never use a replica's."""
    # A notice's place in its tenant's feed. SQLite commits one writer at a time, so
    # the next number in the write transaction is in commit order.
    _pos = "(SELECT COALESCE(MAX(pos), 0) + 1 FROM toolbound_call_notices)"
    # Which notices a reader may take: every committed one, here.
    _settled = ""

    @contextmanager
    def _tx(self, *, write: bool = True) -> Iterator[Cursor]:  # noqa: ARG002 - an interface
        raise NotImplementedError
        yield

    @contextmanager
    def _alone(self) -> Iterator[Cursor]:
        """A cursor for one statement run on its own: its own snapshot, its own commit.

        No ``BEGIN``/``COMMIT`` around it. Only for a single statement; statements that
        must agree with each other take ``_tx``.
        """
        with self._tx(write=False) as cur:
            yield cur

    def _q(self, sql: str) -> str:
        return sql.replace("?", self._mark)

    def transaction(self) -> AbstractContextManager[Cursor]:
        """A write transaction for a table kept beside the journal's (see ``Journal``)."""
        return self._tx()

    @property
    def mark(self) -> str:
        """The SQL placeholder of this database's driver."""
        return self._mark


_CLAIM = (
    "INSERT INTO toolbound_service_requests (tenant, key, fingerprint, created_at)"
    " VALUES (?, ?, ?, ?) ON CONFLICT (tenant, key) DO NOTHING"
)


class RequestsSQL(SQLBase):
    """Idempotency-Key claims: same key and payload → the same answer (IETF draft)."""

    def claim_request(
        self, tenant: str, key: str, fingerprint: str, *, now: datetime, stale_after: float
    ) -> ClaimedRequest:
        stamp = iso(now)
        # A new key, the common case: one statement, committed on its own.
        with self._alone() as cur:
            cur.execute(self._q(_CLAIM), (tenant, key, fingerprint, stamp))
            if cur.rowcount == 1:
                return ClaimedRequest("new")
        return self._claim_used(tenant, key, fingerprint, now=now, stale_after=stale_after)

    def _claim_used(
        self, tenant: str, key: str, fingerprint: str, *, now: datetime, stale_after: float
    ) -> ClaimedRequest:
        """A key found used, read and judged in one transaction (claimed if released)."""
        stamp = iso(now)
        with self._tx() as cur:
            cur.execute(self._q(_CLAIM), (tenant, key, fingerprint, stamp))
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
        """What an earlier request with ``key`` found: one statement, its own snapshot."""
        with self._alone() as cur:
            return self._existing(cur, tenant, key, fingerprint)

    def _existing(
        self, cur: Cursor, tenant: str, key: str, fingerprint: str
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


class SessionsSQL(SQLBase):
    """Console sessions; only a hash of a session id is stored.

    Reading the table gives no one a session.
    """

    def open_session(
        self, session_id: str, principal: str, *, now: datetime, expires_at: datetime
    ) -> None:
        with self._tx() as cur:
            # Expired sessions are removed as new ones begin.
            cur.execute(
                self._q("DELETE FROM toolbound_console_sessions WHERE expires_at <= ?"),
                (iso(now),),
            )
            cur.execute(
                self._q(
                    "INSERT INTO toolbound_console_sessions"
                    " (session_hash, principal, created_at, expires_at) VALUES (?, ?, ?, ?)"
                ),
                (_session_hash(session_id), principal, iso(now), iso(expires_at)),
            )

    def session_principal(self, session_id: str, *, now: datetime) -> str | None:
        with self._alone() as cur:
            cur.execute(
                self._q(
                    "SELECT principal FROM toolbound_console_sessions"
                    " WHERE session_hash = ? AND expires_at > ?"
                ),
                (_session_hash(session_id), iso(now)),
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


def iso(at: datetime) -> str:
    """UTC throughout, so that the text sorts as the instants do."""
    return at.astimezone(UTC).isoformat()


def _session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()

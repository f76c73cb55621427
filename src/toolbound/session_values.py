"""What the model of one session has seen, kept durably: the service's provenance index (R6).

An agent application that sends proposals to the service one at a time names its
session (``context.session`` in ``POST /v1/proposals``); everything that enters that
session — the user's messages sent with a proposal, earlier tool results it sends, and
the result of every call the service runs in the session — is kept here, labelled,
so that a later proposal in the session is examined against all of it, by whichever
replica receives it. :meth:`SessionValues.index` rebuilds the
:class:`~toolbound.provenance.Provenance` of a session from its rows.

The table lives in the journal's database (SQLite or PostgreSQL,
:meth:`toolbound.journal.Journal.transaction`), one row per labelled value::

    toolbound_session_values(id, tenant, session, origin, tool, version, invocation_id,
                             untrusted, private, note, content, size, created_at, digest)

Rows are tenant-scoped: a session id names a session of one tenant only. A value the
session already holds under the same label is kept once (``digest``): an application
may send the whole history with every proposal. A session
is **bounded** (:data:`MAX_VALUES` rows, :data:`MAX_BYTES` bytes of content): a value
that would pass the bound is not kept, and the session is marked overflowed instead —
from then on :meth:`~SessionValues.index` answers ``None`` (nothing tracked), so the
flow rules fail closed (``provenance_not_tracked``) rather than judge on a partial
record. Retention removes whole sessions idle since before the cut-off
(:meth:`~SessionValues.purge`), never part of one.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, cast

from toolbound.provenance import Label, Provenance

if TYPE_CHECKING:
    from collections.abc import Iterable

    from toolbound._model import JSONValue
    from toolbound.journal import Journal, SQLCursor
    from toolbound.provenance.labels import Origin

__all__ = ["MAX_BYTES", "MAX_VALUES", "SessionValues", "Value"]

MAX_VALUES: Final = 2000
"""The most labelled values one session keeps."""
MAX_BYTES: Final = 4 << 20
"""The most bytes of content (JSON) one session keeps."""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS toolbound_session_values (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        session TEXT NOT NULL,
        origin TEXT NOT NULL,
        tool TEXT,
        version TEXT,
        invocation_id TEXT,
        untrusted INTEGER NOT NULL,
        private INTEGER NOT NULL,
        note TEXT,
        content TEXT NOT NULL,
        size INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        digest TEXT NOT NULL
    )""",
    """CREATE INDEX IF NOT EXISTS toolbound_session_values_by_session
        ON toolbound_session_values (tenant, session, created_at)""",
    # A value seen again under the same label is kept once: clients resend the history.
    """CREATE UNIQUE INDEX IF NOT EXISTS toolbound_session_values_once
        ON toolbound_session_values (tenant, session, digest)""",
)
_OVERFLOW = "overflow"  # the origin of the row that marks a session past its bound
_COLUMNS = (
    "id, tenant, session, origin, tool, version, invocation_id, untrusted, private, note,"
    " content, size, created_at, digest"
)


class _Overflow(Exception):  # noqa: N818 - a signal inside one transaction, never raised out
    """The values being added would pass the session's bound: roll them back."""


@dataclass(frozen=True, slots=True)
class Value:
    """One value to keep, with the label it was seen under."""

    label: Label
    content: JSONValue


class SessionValues:
    """The labelled values of every session, in the journal's database."""

    def __init__(
        self, journal: Journal, *, max_values: int = MAX_VALUES, max_bytes: int = MAX_BYTES
    ) -> None:
        """Create the table if it is missing."""
        self.journal = journal
        self.max_values = max_values
        self.max_bytes = max_bytes
        with journal.transaction() as cur:
            for statement in _SCHEMA:
                cur.execute(statement)

    def _q(self, sql: str) -> str:
        return sql.replace("?", self.journal.mark)

    def add(self, tenant: str, session: str, values: Iterable[Value], *, now: datetime) -> bool:
        """Keep ``values`` in the session; ``False`` if they would pass its bound.

        Then none of them is kept and the session is marked overflowed (its index is
        ``None`` from now on). Values are kept in order, all or none; a value already
        kept under the same label (a user message sent again with the history) once.
        """
        rows = [(v.label, json.dumps(v.content, ensure_ascii=False)) for v in values]
        if not rows:
            return True
        stamp = now.astimezone(UTC).isoformat()
        where = (tenant, session)
        try:
            with self.journal.transaction() as cur:
                count, size, overflowed = self._measure(cur, tenant, session)
                if overflowed:
                    return False
                for i, (label, text) in enumerate(rows):
                    # One instant per batch: the id's prefix keeps the batch's order.
                    if self._insert(cur, where, label, text, stamp=stamp, order=i):
                        count, size = count + 1, size + len(text.encode())
                        if count > self.max_values or size > self.max_bytes:
                            raise _Overflow  # noqa: TRY301 - rolls this batch back
        except _Overflow:
            with self.journal.transaction() as cur:
                self._insert(
                    cur, where, Label(origin="runtime", note=_OVERFLOW), "null", stamp=stamp
                )
            return False
        return True

    def index(
        self, tenant: str, session: str, *, into: Provenance | None = None
    ) -> Provenance | None:
        """The session's index, every value labelled as it was kept; ``None`` if overflowed.

        ``into`` is an index to add the session's values to (one with the request's
        own context already in it); a new one otherwise.
        """
        with self.journal.transaction() as cur:
            cur.execute(
                self._q(
                    "SELECT origin, tool, version, invocation_id, untrusted, private, note, content"
                    " FROM toolbound_session_values WHERE tenant = ? AND session = ?"
                    " ORDER BY created_at, id"
                ),
                (tenant, session),
            )
            rows = cur.fetchall()
        index = into if into is not None else Provenance()
        for origin, tool, version, invocation_id, untrusted, private, note, content in rows:
            if note == _OVERFLOW and origin == "runtime":
                return None
            label = Label(
                origin=cast("Origin", origin),
                tool=cast("str | None", tool),
                version=cast("str | None", version),
                invocation_id=cast("str | None", invocation_id),
                untrusted=bool(untrusted),
                private=bool(private),
                note=cast("str | None", note),
            )
            index.add(label, json.loads(str(content)))
        return index

    def purge(self, *, before: datetime) -> int:
        """Remove every session with nothing added since ``before``; how many values went."""
        with self.journal.transaction() as cur:
            cur.execute(
                self._q(
                    "DELETE FROM toolbound_session_values WHERE (tenant, session) IN"
                    " (SELECT tenant, session FROM toolbound_session_values"
                    " GROUP BY tenant, session HAVING MAX(created_at) < ?)"
                ),
                (before.astimezone(UTC).isoformat(),),
            )
            return max(cur.rowcount, 0)

    def _measure(self, cur: SQLCursor, tenant: str, session: str) -> tuple[int, int, bool]:
        cur.execute(
            self._q(
                "SELECT COUNT(*), COALESCE(SUM(size), 0),"
                " COALESCE(SUM(CASE WHEN note = ? AND origin = 'runtime' THEN 1 ELSE 0 END), 0)"
                " FROM toolbound_session_values WHERE tenant = ? AND session = ?"
            ),
            (_OVERFLOW, tenant, session),
        )
        row = cur.fetchone()
        if row is None:
            return 0, 0, False
        count, size, overflowed = row
        return int(cast("int", count)), int(cast("int", size)), int(cast("int", overflowed)) > 0

    def _insert(
        self,
        cur: SQLCursor,
        where: tuple[str, str],
        label: Label,
        content: str,
        *,
        stamp: str,
        order: int = 0,
    ) -> bool:
        """Insert one value; ``False`` if the session already holds it under that label."""
        tenant, session = where
        fields = (
            label.origin,
            label.tool,
            label.version,
            label.invocation_id,
            label.untrusted,
            label.private,
            label.note,
            content,
        )
        digest = hashlib.sha256(json.dumps(fields).encode()).hexdigest()
        cur.execute(
            self._q(
                f"INSERT INTO toolbound_session_values ({_COLUMNS})"  # noqa: S608 - fixed columns
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (tenant, session, digest) DO NOTHING"
            ),
            (
                f"{order:06d}-{os.urandom(8).hex()}",
                tenant,
                session,
                label.origin,
                label.tool,
                label.version,
                label.invocation_id,
                int(label.untrusted),
                int(label.private),
                label.note,
                content,
                len(content.encode()),
                stamp,
                digest,
            ),
        )
        return cur.rowcount == 1

"""The SQL of calls — head rows and their append-only events — shared by both stores."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, cast

from toolbound.journal._records import (
    ClaimedRequest,
    Finish,
    JournalError,
    Notice,
    NoticeKind,
    StoredCall,
    Surface,
    call_event,
)
from toolbound.journal._requests import RequestsSQL, SessionsSQL, iso
from toolbound.journal._webhooks import WebhooksSQL
from toolbound.journal.schema import COLUMNS, dumps
from toolbound.trace import TraceEvent, encode_event

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from toolbound.journal.schema import Cursor

__all__ = ["SQLJournal"]

_KEPT = "('awaiting_confirmation', 'outcome_unknown', 'running')"
"""Statuses retention never removes: a person or a recovery still has to act."""

_NOTICE_OF: dict[str, NoticeKind] = {
    "awaiting_confirmation": "parked",
    "outcome_unknown": "outcome_unknown",
    "reconciled_committed": "reconciled",
    "reconciled_not_committed": "reconciled",
}
"""The notice a head written with this status gives (once per call and kind)."""

_ENDED = frozenset({"observed", "rejected", "failed", "cancelled", "interrupted"})
"""Statuses that end a call; a decided call ending so gives a ``finished`` notice."""

_ROWS_A_STATEMENT = 200
"""Events one ``INSERT`` writes at most (three parameters each, under SQLite's bound)."""

_SERVICE = "COALESCE(surface, 'service') = 'service'"
"""A call the service ran: only those does its recovery take over (rows from before
surfaces were kept are the service's)."""


class SQLJournal(RequestsSQL, SessionsSQL, WebhooksSQL):
    """Calls as one record: a head row and its events, written in one transaction."""

    def put_call(
        self,
        call: StoredCall,
        *,
        events: Sequence[Mapping[str, object] | TraceEvent] = (),
        finish: Finish | None = None,
        lease: float | None = None,
    ) -> ClaimedRequest | None:
        values = _values(call)
        with self._tx() as cur:
            if finish is not None:
                lost = self._finish(cur, finish, iso(call.updated_at))
                if lost is not None:
                    return lost
            lease_sql = "NULL" if lease is None else f"{self._now} + ?"
            cur.execute(
                self._q(
                    f"INSERT INTO toolbound_service_calls ({COLUMNS})"  # noqa: S608 - fixed columns
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
            # The head is row-locked (PostgreSQL) or the database is (SQLite) until the
            # commit: appends to one call never interleave.
            self._append(cur, call.invocation_id, events)
            self._notice_of(cur, call)
        return None

    def _notice_of(self, cur: Cursor, call: StoredCall) -> None:
        """The notice ``call``'s new status gives, in the transaction that wrote it."""
        kind = _NOTICE_OF.get(call.status)
        if kind is None and call.status in _ENDED:
            kind = "finished"  # only for a call a person decided (the WHERE below)
        if kind is None:
            return
        body = _notice_body(call, kind)
        decided_only = " AND decision IS NOT NULL" if kind == "finished" else ""
        cur.execute(
            self._q(
                "INSERT INTO toolbound_call_notices (invocation_id, kind, tenant, pos, at, body)"  # noqa: S608 - fixed SQL
                f" SELECT invocation_id, ?, tenant, {self._pos}, ?, ? FROM toolbound_service_calls"
                f" WHERE invocation_id = ?{decided_only}"
                " ON CONFLICT (invocation_id, kind) DO NOTHING"
            ),
            (kind, iso(call.updated_at), dumps(body), call.invocation_id),
        )

    def notices(self, tenant: str, *, after: str | None = None, limit: int = 100) -> list[Notice]:
        place = _cursor_of(after)
        with self._tx(write=False) as cur:
            cur.execute(
                self._q(
                    "SELECT pos, invocation_id, kind, at, body FROM toolbound_call_notices"  # noqa: S608 - fixed SQL
                    f" WHERE tenant = ? AND (pos, invocation_id, kind) > (?, ?, ?){self._settled}"
                    " ORDER BY pos, invocation_id, kind LIMIT ?"
                ),
                (tenant, *place, limit),
            )
            rows = cur.fetchall()
        return [_notice(tenant, row) for row in rows]

    def _finish(self, cur: Cursor, finish: Finish, stamp: str) -> ClaimedRequest | None:
        """Keep a request's answer; a claim another request holds instead is returned."""
        if finish.fingerprint is None:
            cur.execute(
                self._q(
                    "UPDATE toolbound_service_requests SET status_code = ?, response = ?"
                    " WHERE tenant = ? AND key = ?"
                ),
                (finish.status_code, finish.response, finish.tenant, finish.key),
            )
            return None
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
                stamp,
            ),
        )
        if cur.rowcount == 1:
            return None
        # Another request holds the key: its answer stands, this one is not kept.
        return self._existing(cur, finish.tenant, finish.key, finish.fingerprint)

    def _append(
        self, cur: Cursor, invocation_id: str, events: Sequence[Mapping[str, object] | TraceEvent]
    ) -> None:
        if not events:
            return
        # One statement for the rows: each numbered after the call's last, read in the
        # same statement (no round trip to read the number first), in the given order.
        for start in range(0, len(events), _ROWS_A_STATEMENT):
            rows = events[start : start + _ROWS_A_STATEMENT]
            values = ", ".join(f"({i}, ?, ?, ?)" for i in range(len(rows)))
            cur.execute(
                self._q(
                    "INSERT INTO toolbound_call_events (invocation_id, seq, at, kind, event)"  # noqa: S608 - fixed SQL, numbered rows
                    " SELECT ?, n.next + v.column1, v.column2, v.column3, v.column4"
                    " FROM (SELECT COALESCE(MAX(seq), -1) + 1 AS next FROM toolbound_call_events"
                    f" WHERE invocation_id = ?) AS n, (VALUES {values}) AS v"
                ),
                (invocation_id, invocation_id, *(v for e in rows for v in _row(e))),
            )

    def events(self, invocation_id: str) -> list[dict[str, object]]:
        with self._tx(write=False) as cur:
            cur.execute(
                self._q(
                    "SELECT seq, event FROM toolbound_call_events"
                    " WHERE invocation_id = ? ORDER BY seq"
                ),
                (invocation_id,),
            )
            rows = cur.fetchall()
            if not rows:
                rows = self._kept_in_body(cur, invocation_id)
        # Numbered by their place in the call's one trace, a resumed run's after the first.
        return [{**json.loads(str(event)), "seq": int(cast("int", seq))} for seq, event in rows]

    def _kept_in_body(self, cur: Cursor, invocation_id: str) -> list[tuple[object, ...]]:
        """A trace an older release wrote into the head after the database was moved on.

        (A replica of that release, still running while others were upgraded.)
        """
        cur.execute(
            self._q("SELECT body FROM toolbound_service_calls WHERE invocation_id = ?"),
            (invocation_id,),
        )
        row = cur.fetchone()
        body = json.loads(str(row[0])) if row is not None else None
        trace = body.get("trace") if isinstance(body, dict) else None
        if not isinstance(trace, list):
            return []
        return [(n, dumps(e)) for n, e in enumerate(e for e in trace if isinstance(e, dict))]

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
                    f"SELECT {COLUMNS} FROM toolbound_service_calls"  # noqa: S608 - fixed columns
                    f" WHERE lease_until IS NOT NULL AND lease_until < {self._now}"
                    # Another surface's parked call waits in its holder: never run here.
                    f" AND {_SERVICE} ORDER BY lease_until LIMIT ?"
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
                    f" AND lease_until < {self._now} AND {_SERVICE}"
                ),
                (owner, lease, invocation_id),
            )
            if cur.rowcount != 1:
                return None
        return self.get_call(invocation_id)

    def call_for_request(self, tenant: str, key: str) -> StoredCall | None:
        return self._one("tenant = ? AND request_key = ?", (tenant, key))

    def get_call(self, invocation_id: str) -> StoredCall | None:
        return self._one("invocation_id = ?", (invocation_id,))

    def _one(self, where: str, params: tuple[object, ...]) -> StoredCall | None:
        with self._alone() as cur:
            cur.execute(
                self._q(f"SELECT {COLUMNS} FROM toolbound_service_calls WHERE {where}"),  # noqa: S608 - fixed SQL
                params,
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
        digest: str | None = None,
    ) -> list[StoredCall]:
        where = ["tenant = ?"]
        params: list[object] = [tenant]
        filters = (("status", status), ("tool", tool), ("subject", subject), ("digest", digest))
        for column, value in filters:
            if value:
                where.append(f"{column} = ?")
                params.append(value)
        params.append(max(1, min(limit, 1000)))
        with self._alone() as cur:
            cur.execute(
                self._q(
                    f"SELECT {COLUMNS} FROM toolbound_service_calls"  # noqa: S608 - fixed columns
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
        digest: str | None = None,
        reason: str | None = None,
        owner: str | None = None,
        lease: float | None = None,
        running: bool = False,
        arguments: str | None = None,
    ) -> StoredCall:
        holds = owner is not None and lease is not None
        with self._tx() as cur:
            # R7: compare-and-set on the head, and the decision event with it, or neither.
            # Another surface's call takes a decision only while its holder lives.
            cur.execute(
                self._q(
                    "UPDATE toolbound_service_calls SET decision = ?, approver = ?, updated_at = ?"  # noqa: S608 - fixed SQL
                    + (f", owner = ?, lease_until = {self._now} + ?" if holds else "")
                    + (", status = 'running'" if running else "")
                    + " WHERE invocation_id = ? AND status = 'awaiting_confirmation'"
                    f" AND decision IS NULL AND ({_SERVICE} OR lease_until >= {self._now})"
                    f" RETURNING {COLUMNS}"
                ),
                (decision, approver, iso(now), *((owner, lease) if holds else ()), invocation_id),
            )
            # The head as the decision left it: the event, the notice and the answer are
            # made from it, with no second read of the row.
            row = cur.fetchone()
            won = None if row is None else _call(row)
            if won is not None:
                event = call_event(
                    "decision",
                    now,
                    {
                        "decision": decision,
                        "approver": approver,
                        "digest": digest if digest is not None else won.digest,
                        "reason": reason,
                        **({} if arguments is None else {"arguments": arguments}),
                        # Decided in the holder's own process: nothing was handed over.
                        **({"by_holder": True} if running else {}),
                    },
                )
                self._append(cur, invocation_id, [event])
                self._decided(cur, won, iso(now))
        if won is not None:
            return won
        found = self.get_call(invocation_id)
        if found is None:
            msg = f"no invocation {invocation_id}"
            raise JournalError(msg, code="not_found")
        if found.status == "awaiting_confirmation" and found.decision is None:
            msg = f"the {found.surface} process holding invocation {invocation_id} is gone"
            raise JournalError(msg, code="holder_gone")
        msg = f"invocation {invocation_id} is not waiting for a decision"
        raise JournalError(msg, code="already_decided")

    def decided_for(self, holder: str, *, limit: int = 100) -> list[StoredCall]:
        with self._tx(write=False) as cur:
            cur.execute(
                self._q(
                    f"SELECT {COLUMNS} FROM toolbound_service_calls"  # noqa: S608 - fixed columns
                    " WHERE owner = ? AND status = 'awaiting_confirmation'"
                    " AND decision IS NOT NULL ORDER BY updated_at LIMIT ?"
                ),
                (holder, max(1, min(limit, 1000))),
            )
            return [_call(row) for row in cur.fetchall()]

    def adopt_decided(self, invocation_id: str, holder: str, *, lease: float) -> StoredCall | None:
        with self._tx() as cur:
            # One statement: of the holder's own rounds, a restarted process resuming it
            # and a second replica, exactly one moves the decided call on to running.
            cur.execute(
                self._q(
                    "UPDATE toolbound_service_calls SET status = 'running', owner = ?,"  # noqa: S608 - fixed SQL
                    f" lease_until = {self._now} + ?"
                    " WHERE invocation_id = ? AND status = 'awaiting_confirmation'"
                    " AND decision IS NOT NULL AND (owner = ? OR owner IS NULL"
                    f" OR lease_until IS NULL OR lease_until < {self._now})"
                ),
                (holder, lease, invocation_id, holder),
            )
            if cur.rowcount != 1:
                return None
        return self.get_call(invocation_id)

    def _decided(self, cur: Cursor, call: StoredCall, stamp: str) -> None:
        """The ``decided`` notice, from the head the decision was just written into."""
        invocation_id, tenant = call.invocation_id, call.tenant
        head = {
            "invocation_id": invocation_id,
            "kind": "decided",
            "tenant": tenant,
            "subject": call.subject,
            "tool": call.tool,
            "status": call.status,
            "state": call.state,
            "digest": call.digest,
            "decision": call.decision,
            "approver": call.approver,
        }
        cur.execute(
            self._q(
                "INSERT INTO toolbound_call_notices (invocation_id, kind, tenant, pos, at, body)"  # noqa: S608 - fixed SQL
                f" VALUES (?, 'decided', ?, {self._pos}, ?, ?)"
                " ON CONFLICT (invocation_id, kind) DO NOTHING"
            ),
            (invocation_id, tenant, stamp, dumps(head)),
        )

    def purge(self, *, before: datetime) -> int:
        stamp = iso(before)
        with self._tx() as cur:
            # Whole calls only, head and events together; the head goes first, so a
            # call changed meanwhile (it no longer matches) keeps its events.
            cur.execute(
                self._q(
                    "DELETE FROM toolbound_service_calls WHERE updated_at < ?"  # noqa: S608 - fixed SQL
                    f" AND status NOT IN {_KEPT} RETURNING invocation_id"
                ),
                (stamp,),
            )
            gone = [(str(row[0]),) for row in cur.fetchall()]
            if gone:
                cur.executemany(
                    self._q("DELETE FROM toolbound_call_events WHERE invocation_id = ?"), gone
                )
                cur.executemany(
                    self._q("DELETE FROM toolbound_call_notices WHERE invocation_id = ?"), gone
                )
            cur.execute(
                self._q("DELETE FROM toolbound_service_requests WHERE created_at < ?"), (stamp,)
            )
        return len(gone)


def _row(event: Mapping[str, object] | TraceEvent) -> tuple[str, str, str]:
    """An event's ``at``, ``kind`` and JSON text; a runtime's event is encoded in one pass."""
    if isinstance(event, TraceEvent):
        at, text = encode_event(event)
        return at, event.kind, text
    return str(event.get("at", "")), str(event.get("kind", "")), dumps(event)


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
        iso(call.created_at),
        iso(call.updated_at),
        dumps({k: v for k, v in call.body.items() if k != "trace"}),
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


def _notice_body(call: StoredCall, kind: NoticeKind) -> dict[str, object]:
    return {
        "invocation_id": call.invocation_id,
        "kind": kind,
        "tenant": call.tenant,
        "subject": call.subject,
        "tool": call.tool,
        "status": call.status,
        "state": call.state,
        "digest": call.digest,
        "decision": call.decision,
        "approver": call.approver,
        "surface": call.surface,
    }


_START = (-1, "", "")
"""The place before every notice."""


def _cursor_of(after: str | None) -> tuple[int, str, str]:
    """A reader's place in the feed, from the cursor of the last notice it took."""
    if not after:
        return _START
    pos, _, rest = after.partition(".")
    invocation_id, _, kind = rest.partition(".")
    if not pos.lstrip("-").isdecimal() or not invocation_id or not kind:
        msg = f"not a notice cursor: {after!r}"
        raise JournalError(msg, code="bad_cursor")
    return int(pos), invocation_id, kind


def _notice(tenant: str, row: tuple[object, ...]) -> Notice:
    pos, invocation_id, kind, at, body = row
    return Notice(
        cursor=f"{pos}.{invocation_id}.{kind}",
        kind=cast("NoticeKind", str(kind)),
        tenant=tenant,
        invocation_id=str(invocation_id),
        at=datetime.fromisoformat(str(at)),
        body=cast("Mapping[str, object]", json.loads(str(body))),
    )

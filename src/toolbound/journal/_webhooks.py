"""The webhook outbox in the journal's database: deliveries, their attempts, each feed's place.

A delivery is one notice (:meth:`~toolbound.journal.Journal.notices`) for one
``[[webhook]]``. Deliveries are made from the feed, never from memory: a sender
copies the notices after its webhook's cursor into ``toolbound_webhook_deliveries``
and moves the cursor in one transaction, so a crash between the two repeats the copy
(which keeps one row per webhook, call and kind) and loses nothing. A delivery is
claimed by one process at a time with a lease (the database's clock), sent, and
either marked delivered or given its next try; each try is a row of its own in
``toolbound_webhook_attempts``, for operators to read.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from toolbound.journal._records import Delivery, DeliveryAttempt
from toolbound.journal._requests import SQLBase, iso
from toolbound.journal.schema import extend_schema

if TYPE_CHECKING:
    from collections.abc import Sequence

    from toolbound.journal._records import Notice

__all__ = ["WebhooksSQL"]

extend_schema(
    """CREATE TABLE IF NOT EXISTS toolbound_webhook_cursors (
        webhook TEXT NOT NULL,
        tenant TEXT NOT NULL,
        cursor TEXT NOT NULL,
        PRIMARY KEY (webhook, tenant)
    )""",
    """CREATE TABLE IF NOT EXISTS toolbound_webhook_deliveries (
        webhook TEXT NOT NULL,
        invocation_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        tenant TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        next_at DOUBLE PRECISION NOT NULL,
        owner TEXT,
        lease_until DOUBLE PRECISION,
        delivered_at TEXT,
        gave_up_at TEXT,
        last_status INTEGER,
        last_error TEXT,
        PRIMARY KEY (webhook, invocation_id, kind)
    )""",
    """CREATE INDEX IF NOT EXISTS toolbound_webhook_deliveries_due
        ON toolbound_webhook_deliveries (next_at)""",
    """CREATE TABLE IF NOT EXISTS toolbound_webhook_attempts (
        webhook TEXT NOT NULL,
        invocation_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        n INTEGER NOT NULL,
        at TEXT NOT NULL,
        status INTEGER,
        error TEXT,
        PRIMARY KEY (webhook, invocation_id, kind, n)
    )""",
)

_COLUMNS = (
    "webhook, invocation_id, kind, tenant, payload, created_at, attempts, next_at,"
    " delivered_at, gave_up_at, last_status, last_error"
)
_OPEN = "delivered_at IS NULL AND gave_up_at IS NULL"


class WebhooksSQL(SQLBase):
    """The outbox's statements, shared by the SQLite and PostgreSQL journals."""

    def webhook_cursor(self, webhook: str, tenant: str) -> str | None:
        with self._tx(write=False) as cur:
            cur.execute(
                self._q(
                    "SELECT cursor FROM toolbound_webhook_cursors WHERE webhook = ? AND tenant = ?"
                ),
                (webhook, tenant),
            )
            row = cur.fetchone()
        return None if row is None else str(row[0])

    def webhook_enqueue(
        self,
        webhook: str,
        tenant: str,
        notices: Sequence[Notice],
        *,
        cursor: str,
        payloads: Sequence[str],
        now: datetime,
    ) -> None:
        with self._tx() as cur:
            if notices:
                cur.executemany(
                    self._q(
                        f"INSERT INTO toolbound_webhook_deliveries ({_COLUMNS})"  # noqa: S608 - fixed columns
                        f" VALUES (?, ?, ?, ?, ?, ?, 0, {self._now}, NULL, NULL, NULL, NULL)"
                        " ON CONFLICT (webhook, invocation_id, kind) DO NOTHING"
                    ),
                    [
                        (webhook, n.invocation_id, n.kind, tenant, payload, iso(now))
                        for n, payload in zip(notices, payloads, strict=True)
                    ],
                )
            cur.execute(
                self._q(
                    "INSERT INTO toolbound_webhook_cursors (webhook, tenant, cursor)"
                    " VALUES (?, ?, ?) ON CONFLICT (webhook, tenant)"
                    " DO UPDATE SET cursor = excluded.cursor"
                ),
                (webhook, tenant, cursor),
            )

    def webhook_claim(self, owner: str, *, lease: float, limit: int = 20) -> list[Delivery]:
        claimed: list[Delivery] = []
        with self._tx() as cur:
            cur.execute(
                self._q(
                    f"SELECT {_COLUMNS} FROM toolbound_webhook_deliveries"  # noqa: S608 - fixed SQL
                    f" WHERE {_OPEN} AND next_at <= {self._now}"
                    f" AND (lease_until IS NULL OR lease_until < {self._now})"
                    " ORDER BY next_at LIMIT ?"
                ),
                (limit,),
            )
            for row in cur.fetchall():
                # Compare-and-set: of processes claiming at once, one takes each.
                cur.execute(
                    self._q(
                        "UPDATE toolbound_webhook_deliveries"  # noqa: S608 - fixed SQL
                        f" SET owner = ?, lease_until = {self._now} + ?"
                        " WHERE webhook = ? AND invocation_id = ? AND kind = ?"
                        f" AND {_OPEN} AND (lease_until IS NULL OR lease_until < {self._now})"
                    ),
                    (owner, lease, row[0], row[1], row[2]),
                )
                if cur.rowcount == 1:
                    claimed.append(_delivery(row))
        return claimed

    def webhook_attempted(
        self,
        delivery: Delivery,
        *,
        owner: str,
        at: datetime,
        status: int | None,
        error: str | None,
        delivered: bool,
        retry_in: float | None,
    ) -> None:
        n = delivery.attempts + 1
        key = (delivery.webhook, delivery.invocation_id, delivery.kind)
        with self._tx() as cur:
            cur.execute(
                self._q(
                    "INSERT INTO toolbound_webhook_attempts"
                    " (webhook, invocation_id, kind, n, at, status, error)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
                ),
                (*key, n, iso(at), status, error),
            )
            done = iso(at) if delivered else None
            gave_up = iso(at) if not delivered and retry_in is None else None
            cur.execute(
                self._q(
                    "UPDATE toolbound_webhook_deliveries SET attempts = ?, last_status = ?,"  # noqa: S608 - fixed SQL
                    f" last_error = ?, next_at = {self._now} + ?, delivered_at = ?,"
                    " gave_up_at = ?, owner = NULL, lease_until = NULL"
                    " WHERE webhook = ? AND invocation_id = ? AND kind = ? AND owner = ?"
                ),
                (n, status, error, retry_in or 0.0, done, gave_up, *key, owner),
            )

    def webhook_deliveries(
        self, *, tenant: str | None = None, limit: int = 100
    ) -> list[tuple[Delivery, list[DeliveryAttempt]]]:
        where, params = ("WHERE tenant = ?", (tenant,)) if tenant is not None else ("", ())
        with self._tx(write=False) as cur:
            cur.execute(
                self._q(
                    f"SELECT {_COLUMNS} FROM toolbound_webhook_deliveries {where}"  # noqa: S608 - fixed SQL
                    " ORDER BY created_at DESC, invocation_id, kind LIMIT ?"
                ),
                (*params, limit),
            )
            deliveries = [_delivery(row) for row in cur.fetchall()]
            found = []
            for d in deliveries:
                cur.execute(
                    self._q(
                        "SELECT n, at, status, error FROM toolbound_webhook_attempts"
                        " WHERE webhook = ? AND invocation_id = ? AND kind = ? ORDER BY n"
                    ),
                    (d.webhook, d.invocation_id, d.kind),
                )
                attempts = [
                    DeliveryAttempt(
                        n=int(str(n)),
                        at=datetime.fromisoformat(str(at)),
                        status=None if status is None else int(str(status)),
                        error=None if error is None else str(error),
                    )
                    for n, at, status, error in cur.fetchall()
                ]
                found.append((d, attempts))
        return found


def _delivery(row: tuple[object, ...]) -> Delivery:
    (webhook, invocation_id, kind, tenant, payload, created, attempts, next_at) = row[:8]
    delivered, gave_up, status, error = row[8:]
    return Delivery(
        webhook=str(webhook),
        invocation_id=str(invocation_id),
        kind=str(kind),
        tenant=str(tenant),
        payload=str(payload),
        created_at=datetime.fromisoformat(str(created)),
        attempts=int(str(attempts)),
        next_at=float(str(next_at)),
        delivered_at=None if delivered is None else datetime.fromisoformat(str(delivered)),
        gave_up_at=None if gave_up is None else datetime.fromisoformat(str(gave_up)),
        last_status=None if status is None else int(str(status)),
        last_error=None if error is None else str(error),
    )

"""The calls every surface ran, one record each, and the service's request keys.

The ledger (R8) keeps what a *write* did; the journal keeps the *call*: every
invocation the service, the MCP gateway, ``mcp-serve`` or a library program ran, so
any process can list it, show it and — for a parked call — resume it after a person
decides. One call is one record in two tables:

- **events** (``toolbound_call_events``): the trace, which *is* the record (R14) —
  the proposal, every transition, decisions, attempts, the answer — numbered
  ``seq`` from 0 within the call. Events are only ever inserted: never updated,
  never deleted one by one (retention removes a whole call).
- **the head** (``toolbound_service_calls``): tenant, subject, tool, surface, and a
  projection of the events — ``status``, ``state``, ``digest``, ``decision`` — with
  the API's answer in ``body``, written in the same transaction as the events it
  follows from, plus the owner and lease of a call being worked on.

It also keeps the ``Idempotency-Key`` of each HTTP request (the IETF draft's
semantics: same key and payload → the same answer; another payload → 422; still
running → 409), and the console's sessions: a session lives here, not in its
cookie, so logging out ends it in every process sharing the store.

Two stores share one SQL layout: SQLite (WAL, one file beside the ledger's) and
PostgreSQL (psycopg 3). Both sit behind :class:`Journal`; open one from a store URL
with :func:`open_journal` (or :func:`toolbound.wiring.journal_for`).

Decisions are compare-and-set: a parked call takes exactly one decision, once, from
whichever process records it first, and its ``decision`` event is appended in the
same transaction (R7).

**Ownership.** A call being worked on — running, or decided and not yet finished — is
owned by one service process (``owner``) until ``lease_until``, seconds since the
epoch by the *database's* clock (replicas' own clocks may disagree). The owner renews
its leases while it lives (:meth:`Journal.renew`); another process takes a call over
only once its lease has passed, by one compare-and-set (:meth:`Journal.take_over`),
and a write that carries an owner lands only while that owner still holds the call.
Only the service's calls are ever taken over.

**The inbox.** A call another surface parks (the MCP gateway, ``mcp-serve``, a
library program) is held by the process that parked it — its ``holder``, the head's
owner, whose lease that process renews while it lives — and waits there, in memory.
Its head keeps the confirmation request where the service's own parked calls keep
theirs, so every parked call is listed and decided in one place. A decision recorded
here for such a call is handed over: the holder finds it (:meth:`Journal.decided_for`),
takes it once (:meth:`Journal.adopt_decided`) and applies it to the call it holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from toolbound.journal._records import (
    ClaimedRequest,
    Delivery,
    DeliveryAttempt,
    Finish,
    JournalError,
    Notice,
    NoticeKind,
    StoredCall,
    Surface,
    call_event,
)
from toolbound.journal.postgres import PostgresJournal
from toolbound.journal.schema import Cursor as SQLCursor
from toolbound.journal.schema import extend_schema
from toolbound.journal.sqlite import SQLiteJournal

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from contextlib import AbstractContextManager
    from datetime import datetime

    from toolbound.trace import TraceEvent

__all__ = [
    "ClaimedRequest",
    "Delivery",
    "DeliveryAttempt",
    "Finish",
    "Journal",
    "JournalError",
    "Notice",
    "NoticeKind",
    "PostgresJournal",
    "SQLCursor",
    "SQLiteJournal",
    "StoredCall",
    "Surface",
    "call_event",
    "extend_schema",
    "open_journal",
]


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
        self,
        call: StoredCall,
        *,
        events: Sequence[Mapping[str, object] | TraceEvent] = (),
        finish: Finish | None = None,
        lease: float | None = None,
    ) -> ClaimedRequest | None:
        """Write the head of one invocation and append ``events`` to its trace, together.

        ``events`` are the runtime's events (kept as ``TraceEvent.as_json()`` renders
        them) or JSON events (:func:`call_event`) that happened since the last write;
        they follow the call's earlier events, in one transaction with the head (one
        commit however many there are).

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

    def events(self, invocation_id: str) -> list[dict[str, object]]:
        """The call's trace in order, each event's ``seq`` its place in it (R14)."""
        ...

    def renew(self, owner: str, *, lease: float) -> int:
        """Extend every lease ``owner`` holds to ``lease`` seconds from now; how many."""
        ...

    def expired(self, *, limit: int = 100) -> list[StoredCall]:
        """The service's calls whose owner's lease has passed (database clock), oldest first.

        Only calls of the ``service`` surface: another surface's parked call is held
        by the process that parked it, and never run by a service replica.
        """
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
        digest: str | None = None,
    ) -> list[StoredCall]:
        """A tenant's invocations, newest first, filtered (``digest``: the calls' own)."""
        ...

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
        """Record the one decision on a parked call; raise ``already_decided`` after.

        Compare-and-set on the head and a ``decision`` event (who, when, which way,
        the ``digest`` it binds to — the head's if not given — and ``reason``) in one
        transaction: across processes, exactly one decision is recorded. An ``edited``
        decision keeps the corrected ``arguments`` (JSON text) in its event, for the
        process holding the call to run them in its place. With
        ``owner``, the process recording it holds the call for ``lease`` seconds, to
        run it; ``running``: it runs it at once (the head's status becomes
        ``running``: a holder deciding its own parked call, nothing to hand over;
        its event says so, ``by_holder``).

        Another surface's call (not ``service``) is decided only while its holder's
        lease lasts; after, ``holder_gone`` is raised and nothing is recorded.
        """
        ...

    def decided_for(self, holder: str, *, limit: int = 100) -> list[StoredCall]:
        """The calls ``holder`` parked that someone decided elsewhere, not yet applied."""
        ...

    def adopt_decided(self, invocation_id: str, holder: str, *, lease: float) -> StoredCall | None:
        """Take a decided parked call to run it with its decision (compare-and-set).

        Its status becomes ``running``, held by ``holder`` for ``lease`` seconds. Only
        its holder may, or anyone once the holder's lease has passed (a restarted
        process). ``None``: not decided, applied already, or held by a live process —
        so a decision is applied exactly once, whatever races for it.
        """
        ...

    def notices(self, tenant: str, *, after: str | None = None, limit: int = 100) -> list[Notice]:
        """``tenant``'s notices after the one whose cursor is ``after``, oldest first.

        Each call is ``parked``, ``decided``, ``finished`` (after a decision),
        ``outcome_unknown`` or ``reconciled`` at most once; each notice is written in
        the transaction that made it true, whichever process or surface wrote it.
        Read again with the last notice's :attr:`~Notice.cursor` to go on: a notice
        is never skipped, nor read twice, whatever commits meanwhile. An ``after``
        that is not a cursor raises ``JournalError`` (``bad_cursor``).
        """
        ...

    # -- the webhook outbox (toolbound.journal._webhooks) ------------------------------

    def webhook_cursor(self, webhook: str, tenant: str) -> str | None:
        """Where ``webhook``'s copy of ``tenant``'s feed stands (None: at its start)."""
        ...

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
        """Add a delivery per notice (once each) and move the cursor, in one transaction."""
        ...

    def webhook_claim(self, owner: str, *, lease: float, limit: int = 20) -> list[Delivery]:
        """Due deliveries no one holds, now held by ``owner`` for ``lease`` seconds."""
        ...

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
        """Record a try; delivered, due again in ``retry_in`` seconds, or given up (None)."""
        ...

    def webhook_deliveries(
        self, *, tenant: str | None = None, limit: int = 100
    ) -> list[tuple[Delivery, list[DeliveryAttempt]]]:
        """The newest deliveries with every try of each, for operators."""
        ...

    def purge(self, *, before: datetime) -> int:
        """Delete whole calls (head and events) and request records older than ``before``.

        Never a call still running, parked, or whose outcome is unknown (retention).
        How many calls were deleted.
        """
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


def open_journal(url: str, *, busy_timeout: float = 30.0) -> Journal:
    """The journal for a store URL: ``sqlite:///PATH`` or ``postgresql://…``.

    ``busy_timeout``: SQLite's wait for a writer's lock.
    """
    if url.startswith("sqlite:///"):
        return SQLiteJournal(url.removeprefix("sqlite:///"), busy_timeout=busy_timeout)
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresJournal(url)
    msg = f"no journal for store URL {url!r}"
    raise JournalError(msg, code="unsupported_store")

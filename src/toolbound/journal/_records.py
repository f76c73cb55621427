"""What the journal keeps, as values: a call's head row, its events, a request's claim."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from toolbound._errors import ToolboundError

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime

__all__ = [
    "ClaimedRequest",
    "Delivery",
    "DeliveryAttempt",
    "Finish",
    "JournalError",
    "Notice",
    "NoticeKind",
    "StoredCall",
    "Surface",
    "call_event",
]

Surface = Literal["service", "mcp-gateway", "mcp-serve", "library"]
"""Which of toolbound's surfaces ran a call and recorded it."""


class JournalError(ToolboundError):
    """A journal operation that cannot be done; ``code`` says why."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredCall:
    """The head row of one invocation: who, what, where it stands.

    ``status``, ``state``, ``digest``, ``decision`` and ``approver`` are a projection
    of the call's events (:meth:`Journal.events`), written with them in one
    transaction. ``body`` is JSON the API returns (request, answer, human evidence,
    the confirmation request); the trace is not in it but in the events.
    """

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
    """The service process that works on the call (see :mod:`toolbound.journal`)."""
    lease_until: float | None = None
    """Until when ``owner`` holds it, database clock; ``None``: nobody needs to."""
    request_key: str | None = None
    """The Idempotency-Key of the request that submitted it, if any."""
    surface: Surface = "service"
    """Which surface ran the call; rows from before surfaces were kept are the service's."""


NoticeKind = Literal["parked", "decided", "finished", "outcome_unknown", "reconciled"]
"""What happened to a call that someone outside it may wait for (:class:`Notice`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    """One thing that happened to a call, in the journal's feed of its tenant.

    A call is ``parked`` for a person, ``decided`` by one, ``finished`` after a
    decision, ``outcome_unknown`` (R9) or ``reconciled``: each at most once. The feed
    is read in order after a ``cursor`` (opaque text: :meth:`Journal.notices`), so a
    reader that stops can go on where it was, from any process.
    """

    cursor: str
    kind: NoticeKind
    tenant: str
    invocation_id: str
    at: datetime
    body: Mapping[str, object]
    """The call as it stood: tool, subject, status, state, digest, decision, surface."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """One notice on its way to one ``[[webhook]]``: what is sent, and how it went.

    ``payload`` is the JSON body, signed and sent as it is on every try; ``next_at``
    is when the next try is due (seconds since the epoch, the database's clock).
    """

    webhook: str
    invocation_id: str
    kind: str
    tenant: str
    payload: str
    created_at: datetime
    attempts: int
    next_at: float
    delivered_at: datetime | None = None
    gave_up_at: datetime | None = None
    last_status: int | None = None
    last_error: str | None = None

    @property
    def message_id(self) -> str:
        """The Standard Webhooks ``webhook-id``: the same on every try of this delivery."""
        return f"msg_{self.invocation_id}_{self.kind}"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryAttempt:
    """One try of a delivery: when, the receiver's status (if it answered), the error."""

    n: int
    at: datetime
    status: int | None
    error: str | None


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


def call_event(
    kind: str, at: datetime, data: Mapping[str, object], *, state: str | None = None
) -> dict[str, object]:
    """An event the journal's writers add to a call's trace, shaped as the runtime's are.

    The runtime's events (``TraceEvent.as_json``) number themselves within one run;
    these carry no number of their own: the journal's order is theirs.
    """
    return {"seq": None, "at": at.isoformat(), "kind": kind, "state": state, "data": dict(data)}

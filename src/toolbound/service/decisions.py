"""A person's decision where the call does not wait here, and the reason for a denial.

A call another surface parked (the MCP gateway, ``mcp-serve``, a library program)
waits in the process that holds it; the service records the decision in the journal
— who, when, bound to the digest shown, by the same desk and compare-and-set as its
own calls — and hands it over (:func:`hand_over`): the holder applies it
(:mod:`toolbound.inbox`). Once the holder's lease has passed, nobody can decide it
(``holder_gone``).

The model is told a denial's reason by the runtime itself (the ``denied_by_person``
problem quotes it, attributed to the approver: :func:`toolbound.gates.confirm.denial`);
:func:`note_denial` keeps it in the journal, so the console and the API show it with
the call.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from toolbound._errors import ConfirmationMismatch
from toolbound.adapters.http import ApiError, decision_refused
from toolbound.gates.confirm import ConfirmationRequest
from toolbound.inbox import record_decision
from toolbound.journal import JournalError, call_event
from toolbound.pipeline.confirm import Approver, ConfirmationDesk

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from datetime import datetime
    from typing import Literal

    from toolbound.config import Principal
    from toolbound.gates.confirm import Confirmation
    from toolbound.journal import Journal, StoredCall
    from toolbound.service.core import Service

__all__ = ["StoredConfirmations", "decidable", "hand_over", "note_denial"]


def decidable(call: StoredCall) -> str | None:
    """Why a person's decision cannot land on ``call``; ``None`` if it can.

    The service's own calls wait in the journal; another surface's wait in the
    process holding them, while its lease lasts (the journal's clock decides when a
    decision is recorded; this is the same test on this process's clock, for display).
    """
    if call.surface == "service":
        return None
    if call.lease_until is None or call.lease_until < time.time():
        return f"the {call.surface} process that parked the call is gone"
    return None


def hand_over(
    service: Service,
    principal: Principal,
    call: StoredCall,
    *,
    digest: str,
    decision: Literal["approve", "deny"],
    reason: str | None,
) -> dict[str, object] | None:
    """Record a decision on another surface's call for its holder to apply.

    ``None`` for a call of the service's own (it is decided and run here). The desk's
    rules as for the service's calls (tenant, digest, four eyes, window), the
    decision recorded once by compare-and-set, the call's holder left holding it.
    Refused ``holder_gone`` (409) once the holder's lease has passed. ``call``: its
    head as the caller read it, of the principal's tenant.
    """
    if call.surface == "service":
        return None
    # No owner: the holder keeps the call and its lease, and runs it.
    desk = ConfirmationDesk(
        StoredConfirmations(service.journal, tuple),
        four_eyes=service.config.four_eyes,
        clock=service.clock,
    )
    try:
        confirmation = desk.decide(
            call.invocation_id,
            digest=digest,
            approver=Approver(
                name=principal.name, subject=principal.subject, tenant=principal.tenant
            ),
            approve=decision == "approve",
            at=service.clock.now(),
            reason=reason,
        )
    except ConfirmationMismatch as exc:
        raise decision_refused(exc) from None
    return {
        "invocation_id": call.invocation_id,
        "tool": call.tool,
        "surface": call.surface,
        "status": call.status,
        "state": call.state,
        "digest": confirmation.digest,
        "decision": "approved" if confirmation.approved else "denied",
        "approver": confirmation.approver,
        "reason": confirmation.reason,
        "handed_over": True,
    }


def note_denial(
    service: Service,
    principal: Principal,
    invocation_id: str,
    *,
    reason: str,
    with_decision: bool = False,
) -> StoredCall:
    """Keep the reason a person gave for denying a call, beside the decision, once.

    Only the approver who denied the call may give it, and once. The service keeps it
    as it records the denial, before the call runs on (and the model is told it).
    ``with_decision``: the reason came with the decision, so its ``decision`` event
    carries it already; given afterwards, it is an event of its own (R14).
    """
    call = service.get(principal, invocation_id)
    if "approver" not in principal.roles:
        raise ApiError(403, "forbidden", f"{principal.name} lacks the approver role")
    if call.decision != "denied" or call.approver != principal.name:
        msg = "only the approver who denied a call can give the reason for it"
        raise ApiError(403, "forbidden", msg)
    if "denial" in call.body:
        # The reason is part of the decision, and a call takes one decision (R7).
        msg = "the reason for this denial is already recorded"
        raise ApiError(409, "already_decided", msg)
    now = service.clock.now()
    denial = {"reason": reason, "by": principal.name, "at": now.isoformat()}
    noted = replace(call, updated_at=now, body={**call.body, "denial": denial})
    # A call decided and not yet run on stays this process's (its lease kept), so that
    # another takes it over, reason and all, should this one die before it ends.
    running_on = call.status == "awaiting_confirmation"
    service.journal.put_call(
        noted,
        events=() if with_decision else [call_event("denial_reason", now, denial)],
        lease=service.lease.total_seconds() if running_on else None,
    )
    return noted


class StoredConfirmations:
    """The service's parked calls, kept in the journal, as the confirmation desk sees them.

    Any process sharing the store decides any call: the decision is recorded once by
    compare-and-set in the journal, and the process that recorded it runs the call.
    """

    def __init__(
        self,
        journal: Journal,
        tenants: Callable[[], Iterable[str]],
        *,
        owner: str | None = None,
        lease: float | None = None,
    ) -> None:
        self._journal = journal
        self._tenants = tenants
        self._owner = owner
        self._lease = lease
        self._at_hand = threading.local()

    def decide(
        self,
        desk: ConfirmationDesk,
        call: StoredCall,
        *,
        digest: str,
        approver: Approver,
        approve: bool,
        at: datetime,
        reason: str | None,
    ) -> tuple[Confirmation, StoredCall | None]:
        """``desk``'s decision on ``call``, and the head the decision wrote.

        ``call`` is its head as the caller just read it: the desk's look-up of what
        waits answers from it rather than reading the row again, and the journal's
        compare-and-set hands back the head it wrote (``None`` when the desk recorded
        nowhere here). What was read decides nothing: a decision lands only by the
        compare-and-set on the row.
        """
        self._at_hand.call = call
        try:
            confirmation = desk.decide(
                call.invocation_id,
                digest=digest,
                approver=approver,
                approve=approve,
                at=at,
                reason=reason,
            )
            return confirmation, self._take(call.invocation_id)
        finally:
            self._at_hand.call = None

    def _take(self, invocation_id: str) -> StoredCall | None:
        call: StoredCall | None = getattr(self._at_hand, "call", None)
        self._at_hand.call = None
        return call if call is not None and call.invocation_id == invocation_id else None

    def waiting(self, invocation_id: str) -> ConfirmationRequest | None:
        """The request of a stored call that waits undecided."""
        call = self._take(invocation_id)
        return _waiting(call if call is not None else self._journal.get_call(invocation_id))

    def all_waiting(self, tenant: str | None) -> list[ConfirmationRequest]:
        """The undecided requests, oldest first."""
        found = [
            request
            for t in ([tenant] if tenant is not None else sorted(self._tenants()))
            for call in self._journal.list_calls(t, status="awaiting_confirmation", limit=1000)
            if (request := _waiting(call)) is not None
        ]
        return sorted(found, key=lambda r: r.requested_at)

    def record(self, confirmation: Confirmation) -> None:
        """Compare-and-set the decision; a call decided meanwhile is ``not_pending``."""
        try:
            # The process recording the decision runs the call: it holds it.
            self._at_hand.call = record_decision(
                self._journal, confirmation, owner=self._owner, lease=self._lease
            )
        except JournalError as exc:
            code = "holder_gone" if exc.code == "holder_gone" else "not_pending"
            raise ConfirmationMismatch(str(exc), code=code) from None


def _waiting(call: StoredCall | None) -> ConfirmationRequest | None:
    if call is None or call.status != "awaiting_confirmation" or call.decision is not None:
        return None
    request = call.body.get("confirmation")
    return ConfirmationRequest.from_json(request) if isinstance(request, dict) else None

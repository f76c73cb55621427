"""A person's reason for a denial: checked once, kept beside the decision, shown to people.

The model is told the reason by the runtime itself (the ``denied_by_person`` problem
quotes it, attributed to the approver: :func:`toolbound.gates.confirm.denial`); this
module keeps it in the journal, so the console and the API show it with the call.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from toolbound.adapters.http import ApiError
from toolbound.journal import call_event

if TYPE_CHECKING:
    from toolbound.config import Principal
    from toolbound.journal import StoredCall
    from toolbound.service.core import Service

__all__ = ["note_denial"]


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

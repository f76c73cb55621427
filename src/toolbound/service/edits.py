"""Edit, then approve, in the service: a person's corrected arguments as a new call (R7, R14).

The edit is the parked call's one decision (``edited``, compare-and-set in the
journal, after the desk's rules: tenant, digest shown, window, four eyes): the parked
call ends ``cancelled`` without running, naming its replacement. The corrected text
is a new invocation with the same call id, its request recording ``edited_from`` (the
call replaced, the digest shown, the editor), so every run of it — the first, and
the one after the editor's approval — traces the link. It passes every gate again;
if the policy asks a person, the editor's approval covers exactly its digest.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from toolbound._errors import ConfirmationMismatch
from toolbound.adapters.http import ApiError, decision_refused, outcome_json
from toolbound.gates.confirm import Edit
from toolbound.journal import JournalError
from toolbound.pipeline.confirm import Approver
from toolbound.service.core import _proposal, _require, new_invocation_id
from toolbound.service.records import note, store_outcome

if TYPE_CHECKING:
    from toolbound.config import Principal
    from toolbound.journal import StoredCall
    from toolbound.service.core import Service

__all__ = ["edit", "run_edit"]


async def edit(
    service: Service, principal: Principal, invocation_id: str, *, digest: str, arguments: str
) -> dict[str, object]:
    """A person corrects a parked call's arguments and approves the corrected call (R7).

    The answer is the new call's (see the module docstring). Run on the service's I/O
    pool, like every decision.
    """
    return await service.io(
        run_edit, service, principal, invocation_id, digest=digest, arguments=arguments
    )


def run_edit(
    service: Service, principal: Principal, invocation_id: str, *, digest: str, arguments: str
) -> dict[str, object]:
    """:func:`edit` on the caller's thread, which must not run an event loop."""
    _require(principal, "approver")
    parked = service.get(principal, invocation_id)  # another tenant's call is not found
    if parked.surface != "service":
        # The call waits in the process that parked it, under the digest it was shown;
        # a new call in its place would be this service's, not that surface's caller's.
        msg = f"the {parked.surface} process holding {invocation_id} takes an approval or a denial"
        raise ApiError(409, "edit_not_handed_over", msg, hint="approve or deny the call")
    approver = Approver(name=principal.name, subject=principal.subject, tenant=principal.tenant)
    now = service.clock.now()
    try:
        service.desk.check(invocation_id, digest=digest, approver=approver, at=now)
    except ConfirmationMismatch as exc:
        raise decision_refused(exc) from None
    replacement = new_invocation_id()
    try:
        original = service.journal.decide(
            invocation_id,
            decision="edited",
            approver=principal.name,
            now=now,
            digest=digest,
            reason=f"replaced by {replacement}",
        )
    except JournalError as exc:
        raise decision_refused(ConfirmationMismatch(str(exc), code="not_pending")) from None
    ended = {"edited_by": principal.name, "replaced_by": replacement, "digest": digest}
    note(service.journal, original, "edited", ended, status="cancelled", now=now)
    stored = original.body["request"]
    assert isinstance(stored, dict)  # noqa: S101 - written by submit
    edit = Edit(invocation_id=invocation_id, digest=digest, editor=principal.name)
    # Kept in the request: a run after a person's decision is still the edited call.
    request: dict[str, object] = {**stored, "arguments": arguments, "edited_from": edit.as_json()}
    return _run_edited(service, principal, original, request, replacement)


def _run_edited(
    service: Service,
    principal: Principal,
    original: StoredCall,
    request: dict[str, object],
    replacement: str,
) -> dict[str, object]:
    """The corrected call, as its own invocation; the editor approves it if asked."""
    now = service.clock.now()
    running = replace(
        original,
        invocation_id=replacement,
        status="running",
        state="proposed",
        digest=None,
        decision=None,
        approver=None,
        created_at=now,
        updated_at=now,
        body={"request": request},
        owner=service.instance_id,
        request_key=None,
    )
    context = replace(service.stored_context(original, request), invocation_id=replacement)
    outcome = service.runtime.run(_proposal(request), context)
    answer = outcome_json(outcome)
    store_outcome(service.journal, running, outcome, request, answer, now=service.clock.now())
    if outcome.kind != "awaiting_confirmation":
        return answer
    # The editor wrote these very arguments: their edit approves this digest.
    return service.run_decision(
        principal, replacement, digest=outcome.request.digest, decision="approve"
    )

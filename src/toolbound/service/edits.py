"""Edit, then approve, in the service: a person's corrected arguments as a new call (R7, R14).

The edit is the parked call's one decision (``edited``, compare-and-set in the
journal, after the desk's rules: tenant, digest shown, window, four eyes): the parked
call ends ``cancelled`` without running, naming its replacement. The corrected text
is a new invocation with the same call id, its request recording ``edited_from`` (the
call replaced, the digest shown, the editor), so every run of it — the first, and
the one after the editor's approval — traces the link. It passes every gate again;
if the policy asks a person, the editor's approval covers exactly its digest.

The corrected text is parsed strictly first, before anything is recorded: a malformed
edit is refused (422, the parse gate's code: ``invalid_json``, ``duplicate_key``…)
and the parked call still waits.

A call another surface parked (the MCP gateway, ``mcp-serve``, a library program)
waits in the process holding it: the edit is recorded there as its one decision
(``edited``, with the corrected arguments, after the same desk's rules) and handed
over (202, ``handed_over``). The holder applies it by its runtime's own edit path
(:meth:`~toolbound.Runtime.edit`): the corrected call is a new proposal, linked to
the parked one, through every gate in that process, and runs approved by the editor;
a gate that refuses it there ends it refused, and the parked call never runs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from toolbound._errors import ConfirmationMismatch, Rejection
from toolbound.adapters.http import ApiError, decision_refused, outcome_json
from toolbound.gates.confirm import Edit
from toolbound.gates.parse import ParseLimits, parse_arguments
from toolbound.journal import JournalError
from toolbound.pipeline.confirm import Approver, ConfirmationDesk
from toolbound.service.core import _proposal, _require, new_invocation_id
from toolbound.service.decisions import StoredConfirmations
from toolbound.service.records import note, store_outcome

if TYPE_CHECKING:
    from toolbound.config import Principal
    from toolbound.journal import StoredCall
    from toolbound.service.core import Service

__all__ = ["check_parses", "edit", "run_edit"]


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
    check_parses(arguments)
    approver = Approver(name=principal.name, subject=principal.subject, tenant=principal.tenant)
    if parked.surface != "service":
        return _hand_over(service, parked, approver, digest=digest, arguments=arguments)
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


def check_parses(arguments: str) -> None:
    """Refuse corrected arguments the parse gate would refuse, before anything is recorded.

    The same strict parser as the gate's (R3), for syntax alone: the size and depth
    limits are the runtime's to apply, which runs the corrected call through every
    gate. Raises :class:`~toolbound.adapters.http.ApiError` 422 with the parse
    gate's code; nothing is decided and the parked call still waits.
    """
    try:
        parse_arguments(arguments.encode("utf-8", "surrogatepass"), _SYNTAX_ONLY)
    except Rejection as refused:
        problem = refused.problem
        msg = f"the corrected arguments: {problem.message}; nothing was decided, the call waits"
        raise ApiError(422, problem.code, msg, hint=problem.hint) from None


_SYNTAX_ONLY = ParseLimits(max_bytes=1 << 62, max_depth=1 << 16)


def _hand_over(
    service: Service, parked: StoredCall, approver: Approver, *, digest: str, arguments: str
) -> dict[str, object]:
    """Record the edit of another surface's call, for the process holding it to apply.

    The desk's rules as for any decision (tenant, window, digest, four eyes: the
    corrected call is made for the same subject), then the journal's compare-and-set:
    the call's one decision, ``edited``, with the corrected arguments. Refused
    ``holder_gone`` (409) once the holder's lease has passed.
    """
    desk = ConfirmationDesk(
        StoredConfirmations(service.journal, tuple),
        four_eyes=service.config.four_eyes,
        clock=service.clock,
    )
    now = service.clock.now()
    try:
        desk.check(parked.invocation_id, digest=digest, approver=approver, at=now)
        service.journal.decide(
            parked.invocation_id,
            decision="edited",
            approver=approver.name,
            now=now,
            digest=digest,
            arguments=arguments,
        )
    except ConfirmationMismatch as exc:
        raise decision_refused(exc) from None
    except JournalError as exc:
        code = "holder_gone" if exc.code == "holder_gone" else "not_pending"
        raise decision_refused(ConfirmationMismatch(str(exc), code=code)) from None
    return {
        "invocation_id": parked.invocation_id,
        "tool": parked.tool,
        "surface": parked.surface,
        "status": parked.status,
        "state": parked.state,
        "digest": digest,
        "decision": "edited",
        "approver": approver.name,
        "reason": None,
        "arguments": arguments,
        "handed_over": True,
    }

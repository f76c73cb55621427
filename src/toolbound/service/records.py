"""How the service writes a call's one record: the head it projects and the events it appends.

Every write here goes through :meth:`Journal.put_call`: the head row (status, state,
digest, the API's answer) and the events that brought it there, one transaction. The
runtime's own trace events are appended as they are; what the service itself adds —
a dead owner's call settled, a reconciliation, the reason for a denial — is an
event too (:func:`~toolbound.journal.call_event`), so the trace alone tells the call.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import datetime
from itertools import islice
from typing import TYPE_CHECKING

from toolbound.adapters.http import outcome_digest
from toolbound.gates.confirm import ConfirmationRequest
from toolbound.journal import Finish, JournalError, call_event
from toolbound.journal.schema import dumps as journal_dumps
from toolbound.ledger.rules import ABANDONED
from toolbound.ledger.store import LedgerError, result_to_json

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from toolbound._outcome import Outcome
    from toolbound.execution.reconcile import Reconciled, Reconciler
    from toolbound.gates.confirm import Confirmation
    from toolbound.journal import ClaimedRequest, Journal, StoredCall
    from toolbound.ledger.store import Ledger
    from toolbound.trace import TraceEvent

__all__ = [
    "RunningCalls",
    "decision_of",
    "dumps",
    "note",
    "reconciled_answer",
    "request_of",
    "settle_running",
    "settle_unknown",
    "store_outcome",
]


def store_outcome(
    journal: Journal,
    call: StoredCall,
    outcome: Outcome,
    request: dict[str, object],
    answer: dict[str, object],
    *,
    now: datetime,
    finish: Finish | None = None,
    written: int = 0,
) -> ClaimedRequest | None:
    """Append the run's trace to the call's and project its ending onto the head.

    ``written``: how many of the run's first events are in the journal already (the
    proposal of a write, see :class:`RunningCalls`).
    """
    body: dict[str, object] = {
        "request": request,
        "response": answer,
        "human": outcome.human.as_json(),
    }
    if outcome.kind == "awaiting_confirmation":
        body["confirmation"] = outcome.request.as_json()
    elif "confirmation" in call.body:
        body["confirmation"] = call.body["confirmation"]
    if "denial" in call.body:
        body["denial"] = call.body["denial"]
    stored = replace(
        call,
        tool=outcome.tool or call.tool,
        status=outcome.kind,
        state=outcome.state.value,
        digest=outcome_digest(outcome),
        updated_at=now,
        body=body,
    )
    try:
        # R14: append-only — a resumed call's run follows its events up to the parking.
        return journal.put_call(
            stored,
            events=list(islice(outcome.trace, written, None)),
            finish=finish,
        )
    except JournalError as exc:
        if exc.code != "not_owner":
            raise
        # Taken over while this process looked dead: the taker's ending stands.
        return None


class RunningCalls:
    """A trace sink recording a write's head, owned and leased, as its run opens.

    The head goes into the journal with the run's first event, its proposal, before
    any gate runs: a process that dies mid-call leaves a call another one settles,
    whose trace starts with what was proposed. A failure to write it fails the call
    before anything ran.
    """

    def __init__(self, journal: Journal, *, lease: float) -> None:
        self._journal = journal
        self._lease = lease
        self._expected: dict[str, StoredCall] = {}
        self._written: set[str] = set()

    def expect(self, call: StoredCall) -> None:
        """Write ``call`` when its run opens."""
        self._expected[call.invocation_id] = call

    def written(self, invocation_id: str) -> int:
        """How many of the run's events were written with the head; forget the call."""
        self._expected.pop(invocation_id, None)
        if invocation_id in self._written:
            self._written.discard(invocation_id)
            return 1
        return 0

    def emit(self, invocation_id: str, event: TraceEvent) -> None:
        """At a proposal of an expected call, write its head and the proposal."""
        call = self._expected.pop(invocation_id, None) if event.kind == "proposal" else None
        if call is None:
            return
        self._journal.put_call(call, events=[event], lease=self._lease)
        self._written.add(invocation_id)


_RECONCILED = {"committed": "reconciled_committed", "failed": "reconciled_not_committed"}


def settle_unknown(
    reconciler: Reconciler,
    journal: Journal | None,
    invocation_id: str,
    *,
    committed: bool | None = None,
    by: str = "",
    evidence: Mapping[str, object] | None = None,
) -> Reconciled:
    """Settle one unknown outcome in the ledger and, with it, the call in the journal.

    The one reconcile of the CLI, the API and the console: the tool is asked
    (``committed=None``) or a person's finding recorded, in the ledger; a call
    settled there (committed or not) is noted in the journal at once, so the two
    never disagree. ``journal=None``: a ledger without a service beside it.
    """
    if committed is None:
        result = reconciler.reconcile_one(invocation_id)
    else:
        result = reconciler.resolve(
            invocation_id, committed=committed, by=by, evidence=evidence or {}
        )
    stored = None if journal is None else journal.get_call(invocation_id)
    if journal is not None and stored is not None and result.status in _RECONCILED:
        now = reconciler.clock.now()
        answer = reconciled_answer(result)
        note(journal, stored, "reconciliation", answer, status=_RECONCILED[result.status], now=now)
    return result


def reconciled_answer(result: Reconciled) -> dict[str, object]:
    """What a reconciliation answers, and the journal keeps with the call."""
    return {
        "invocation_id": result.invocation_id,
        "status": result.status,
        "evidence": dict(result.evidence),
    }


def note(
    journal: Journal,
    call: StoredCall,
    kind: str,
    data: Mapping[str, object],
    *,
    status: str,
    now: datetime,
) -> None:
    """End ``call`` with ``status``: ``data`` under ``body["note"]`` and a ``kind`` event."""
    head = replace(call, status=status, updated_at=now, body={**call.body, "note": dict(data)})
    journal.put_call(head, events=[call_event(kind, now, data)])


_TAKEN_OVER: dict[str, tuple[str, str, str, bool]] = {
    # ledger phase → journal status, state, message, is_error
    "none": ("interrupted", "proposed", "the service stopped before the call ran", True),
    "intent": (
        "interrupted",
        "prepared",
        "the service stopped before the tool started; nothing happened",
        True,
    ),
    "executing": (
        "outcome_unknown",
        "outcome_unknown",
        "the service stopped while the tool ran; whether it took effect is unknown",
        True,
    ),
    "failed": (
        "interrupted",
        "failed_before_commit",
        "the service stopped before the tool started; nothing happened",
        True,
    ),
    "unknown": (
        "outcome_unknown",
        "outcome_unknown",
        "the service stopped while the tool ran; whether it took effect is unknown",
        True,
    ),
    "committed": ("observed", "committed", "the tool committed before the service stopped", False),
}
"""How a dead owner's running call ends, by what the ledger recorded (R9)."""


def settle_running(
    journal: Journal, ledger: Ledger, call: StoredCall, *, now: datetime, dead: str | None
) -> None:
    """End a dead owner's running call as the ledger knows it (R9), with a ``recovery`` event.

    ``call`` is held by its taker now; ``dead`` is the owner it was taken from.
    """
    record = ledger.find(call.invocation_id)
    evidence = {"taken_over_from": dead or "unknown", "taken_over_by": call.owner}
    if record is not None and record.phase in ABANDONED:
        # The owner is gone: intent → failed (never started), executing → unknown, under
        # the next epoch, so the owner, if it was only paused, is fenced (R9).
        with contextlib.suppress(LedgerError):
            ledger.take_over(
                record.key, invocation_id=call.invocation_id, now=now, evidence=evidence
            )
        record = ledger.find(call.invocation_id)
    phase = None if record is None else record.phase
    status, state, content, is_error = _TAKEN_OVER[phase or "none"]
    answer: dict[str, object] = {
        "invocation_id": call.invocation_id,
        "call_id": request_of(call).get("call_id"),
        "tool": record.tool if record is not None else call.tool,
        "status": status,
        "state": state,
        "digest": record.digest if record is not None else call.digest,
        "taken_over": {**evidence, "ledger_phase": phase},
        "message": {"content": content, "is_error": is_error, "truncated": False},
    }
    if record is not None and record.phase == "committed" and record.result is not None:
        answer["result"] = result_to_json(record.result)
        answer["message"] = {
            "content": dumps(record.result.value),
            "is_error": False,
            "truncated": False,
        }
    stored = replace(
        call,
        tool=str(answer["tool"]),
        status=status,
        state=state,
        digest=None if answer["digest"] is None else str(answer["digest"]),
        updated_at=now,
        body={**call.body, "response": answer, "note": {"reason": content}},
    )
    event = call_event(
        "recovery", now, {**evidence, "ledger_phase": phase, "reason": content}, state=state
    )
    finish = None
    if call.request_key is not None and call.status == "running":
        # The request that submitted a running call had no answer: this is it. A
        # decided call's request was answered when it parked, and keeps that answer.
        finish = Finish(call.tenant, call.request_key, 200, dumps(answer))
    journal.put_call(stored, events=[event], finish=finish)


def decision_of(call: StoredCall, events: Sequence[Mapping[str, object]]) -> Confirmation | None:
    """The recorded decision on a parked call, from its ``decision`` event (R7).

    ``None`` if the call kept no confirmation request or no decision. A call decided
    before decisions were events has only the head's ``decision`` and ``approver``.
    """
    parked = call.body.get("confirmation")
    if not isinstance(parked, dict):
        return None
    waiting = ConfirmationRequest.from_json(parked)
    decided = next((e for e in reversed(events) if e.get("kind") == "decision"), None)
    data = decided.get("data") if decided is not None else None
    if isinstance(data, dict) and decided is not None:
        approver, approved = str(data.get("approver")), data.get("decision") == "approved"
        at = datetime.fromisoformat(str(decided.get("at")))
    elif call.approver is not None:
        approver, approved, at = call.approver, call.decision == "approved", call.updated_at
    else:
        return None
    if approved:
        return waiting.approve(approver=approver, at=at, ttl=waiting.expires_at - at)
    return waiting.deny(approver=approver, at=at, reason=_reason(call, data))


def _reason(call: StoredCall, data: object) -> str | None:
    """The reason a person gave with a denial: on its event, or kept on the head."""
    if isinstance(data, dict) and isinstance(data.get("reason"), str):
        return str(data["reason"])
    denial = call.body.get("denial")
    return str(denial["reason"]) if isinstance(denial, dict) and "reason" in denial else None


def request_of(call: StoredCall) -> dict[str, object]:
    """The proposal as the service kept it to run again (``body["request"]``)."""
    request = call.body.get("request")
    return request if isinstance(request, dict) else {}


def dumps(value: object) -> str:
    """Compact JSON for answers, as the journal encodes its records."""
    return journal_dumps(value)

"""How a call whose owner died ends: as the ledger knows it (R9), with a trace (R14).

A service process that stops mid-call leaves the call in the journal with the lease
it stopped renewing. The process that takes it over (:meth:`Service.recover
<toolbound.service.core.Service.recover>`) ends a call the ledger has a record of —
running, or decided by a person and begun — from that record: never started is
``interrupted``, the tool started and not known to have committed is
``outcome_unknown`` (listed for reconciliation), committed is ``observed`` with the
stored result.

The dead process's trace of the call died with it; the journal kept the proposal.
The taken-over call's trace keeps every event the journal has and, when it has
none, opens with the proposal as the journal recorded it, then says who took the
call over and what the ledger knew.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from typing import TYPE_CHECKING

from toolbound._state import State
from toolbound.journal import Finish
from toolbound.ledger.rules import ABANDONED
from toolbound.ledger.store import LedgerError, result_to_json

if TYPE_CHECKING:
    from datetime import datetime

    from toolbound.journal import Journal, StoredCall
    from toolbound.ledger.store import Ledger

__all__ = ["dumps", "request_of", "settle_running"]


def settle_running(
    journal: Journal, ledger: Ledger, call: StoredCall, dead_owner: str | None, *, now: datetime
) -> None:
    """End ``dead_owner``'s call, taken over by this process, as the ledger knows it (R9).

    ``call`` is as :meth:`Journal.take_over` returned it: its owner is already the taker.
    """
    record = ledger.find(call.invocation_id)
    evidence = {"taken_over_from": dead_owner or "unknown", "taken_over_by": call.owner}
    if record is not None and record.phase in ABANDONED:
        # The owner is gone: intent → failed (never started), executing → unknown.
        with contextlib.suppress(LedgerError):
            ledger.advance(
                record.key,
                invocation_id=call.invocation_id,
                phase=ABANDONED[record.phase],
                now=now,
                evidence=evidence,
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
    trace = _trace_of(call)
    trace.append(
        {
            "seq": len(trace),
            "at": now.isoformat(),
            "kind": "taken_over",
            "state": state,
            "data": {**evidence, "ledger_phase": phase, "status": status},
        }
    )
    stored = replace(
        call,
        tool=str(answer["tool"]),
        status=status,
        state=state,
        digest=None if answer["digest"] is None else str(answer["digest"]),
        updated_at=now,
        body={**call.body, "response": answer, "note": {"reason": content}, "trace": trace},
    )
    finish = None
    if call.request_key is not None and call.status == "running":
        # The request that submitted a running call had no answer: this is it. A
        # decided call's request was answered when it parked, and keeps that answer.
        finish = Finish(call.tenant, call.request_key, 200, dumps(answer))
    journal.put_call(stored, finish=finish)


def _trace_of(call: StoredCall) -> list[object]:
    """The events the journal kept, or the proposal it recorded (R14: the trace opens so)."""
    kept = call.body.get("trace")
    if isinstance(kept, list) and kept:
        return list(kept)
    request = request_of(call)
    return [
        {
            "seq": 0,
            "at": call.created_at.isoformat(),
            "kind": "proposal",
            "state": State.PROPOSED.value,
            "data": {
                "name": request.get("tool", call.tool),
                "version": request.get("version"),
                "proposal_id": request.get("call_id"),
                "model_call_id": request.get("model_call_id"),
                "arguments": request.get("arguments"),
                "visible": request.get("tools"),
                "subject": {"id": call.subject, "tenant": call.tenant},
                "recorded_by": "journal",
            },
        }
    ]


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
"""How a dead owner's call ends, by what the ledger recorded (R9)."""


def request_of(call: StoredCall) -> dict[str, object]:
    """The proposal the journal kept for ``call`` (``{}`` if none)."""
    request = call.body.get("request")
    return request if isinstance(request, dict) else {}


def dumps(value: object) -> str:
    """Compact JSON for answers."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

"""The express lane: a read the policy allowed outright, from AUTHORIZED to OBSERVED.

Most calls a runtime sees are reads the policy allows without a person: nothing is
claimed in the ledger, nobody is asked, and the tool answers at once. For such a
call the staged path (:mod:`.prepare`, :mod:`.execute`, :mod:`.settle`) still
builds a value per stage and asks at every step whether this is the write, the
retry or the failure it was written for. The express lane takes the same steps in
one function, with the same trace events in the same order, the same data and the
same :class:`~toolbound.Observed` outcome, and builds only the values the outcome
keeps.

It takes a call when (:func:`takes`) the gates answered a plain allow, the tool
claims nothing (a ``read`` or ``pure`` tool with no target check, credential or
read-back) and the caller gave no cancel event. The moment the call stops being
that call — no time left before the tool starts, or an attempt that did not end in
a plain, contract-keeping, JSON value — the lane builds the
:class:`~.call.Prepared` call it has reached and hands it to the staged path, which
takes it from exactly there (``execute.run`` or ``execute.resume``). Nothing is
recorded twice: the lane checks the result's contract and encodes the model's
message before it records the attempt, so a hand-off finds the trace where the
staged path would have it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TypeGuard, cast

from toolbound._model import Attempt
from toolbound._state import State
from toolbound.execution.tool import ToolContext, ToolOutput
from toolbound.pipeline import admit, endings, execute, settle
from toolbound.pipeline.call import Prepared
from toolbound.pipeline.env import Kept

if TYPE_CHECKING:
    from toolbound._model import Invocation, JSONValue
    from toolbound._outcome import Outcome
    from toolbound.execution.executor import RawAttempt
    from toolbound.pipeline.admit import Refusal, Verdict
    from toolbound.pipeline.call import CallContext, Opened
    from toolbound.pipeline.env import Env

__all__ = ["arun", "run", "takes"]


def takes(verdict: Verdict | Refusal, ctx: CallContext) -> TypeGuard[Verdict]:
    """Whether the call the gates answered ``verdict`` for goes the express way."""
    if not isinstance(verdict, admit.Verdict) or verdict.decision.kind != "allow":
        return False
    spec = verdict.tool.spec
    return (
        ctx.cancel is None
        and not spec.is_write
        and not spec.transactional
        and not spec.secrets
        and spec.target_check is None
        and spec.read_back is None
    )


def run(env: Env, call: Opened, verdict: Verdict) -> Outcome:
    """The allowed read from a sync caller: AUTHORIZED, PREPARED, one attempt, OBSERVED."""
    inv, tctx = _start(env, call, verdict)
    if tctx is None:
        return execute.run(env, _prepared(call, verdict, inv))
    raw = execute.attempt(env, verdict.tool, tctx, None, call=call)
    outcome = _observed(env, call, verdict, tctx, raw)
    if outcome is None:
        return execute.resume(env, _prepared(call, verdict, inv, tctx), tctx, raw)
    return outcome


async def arun(env: Env, call: Opened, verdict: Verdict) -> Outcome:
    """:func:`run` for async callers: an async tool runs on the caller's loop."""
    inv, tctx = _start(env, call, verdict)
    if tctx is None:
        return await execute.arun(env, _prepared(call, verdict, inv))
    raw = await execute.aattempt(env, verdict.tool, tctx, None, call=call)
    outcome = _observed(env, call, verdict, tctx, raw)
    if outcome is None:
        return await execute.aresume(env, _prepared(call, verdict, inv, tctx), tctx, raw)
    return outcome


def _start(env: Env, call: Opened, verdict: Verdict) -> tuple[Invocation, ToolContext | None]:
    """AUTHORIZED, PREPARED and, if there is time left, EXECUTING with its context."""
    inv = admit.authorized(call, verdict)
    life = call.life
    life.advance(State.PREPARED, deadline=inv.deadline, idempotency_key=None)
    budget = call.ctx.time_allowed(verdict.tool.spec) - (env.clock.monotonic() - call.started)
    if budget <= 0:
        return inv, None  # the staged path ends it FAILED_BEFORE_COMMIT
    attempt_id = os.urandom(8).hex()
    life.advance(State.EXECUTING, attempt_id=attempt_id, attempt=1, budget_s=budget)
    return inv, ToolContext(
        invocation=inv,
        attempt=1,
        secrets={},
        idempotency_key=None,
        deadline_in=budget,
        attempt_id=attempt_id,
        trace=life.trace,
    )


def _observed(
    env: Env, call: Opened, verdict: Verdict, tctx: ToolContext, raw: RawAttempt
) -> Outcome | None:
    """COMMITTED, then OBSERVED — or ``None`` when the attempt needs the staged path."""
    inv, value = tctx.invocation, raw.value
    if raw.not_started is not None or raw.error is not None or raw.timed_out or raw.cancelled:
        return None
    if isinstance(value, ToolOutput):
        return None
    tool = verdict.tool
    projected = _message(env, call, verdict, inv, cast("JSONValue", value))
    if projected is None:
        return None
    message, clean, for_model, secret_cuts = projected
    life = call.life
    attempt = Attempt(
        attempt_id=tctx.attempt_id,
        number=1,
        started_at=raw.started_at,
        ended_at=raw.ended_at or raw.started_at,
        outcome="committed",
        detail=None,
    )
    life.trace.add("attempt", None, {"attempt": attempt})
    life.advance(State.COMMITTED, external_resource_id=None)
    result = settle.committed(inv, clean, None, attempt.ended_at, (attempt,))
    if message.truncated:
        env.kept.keep(inv.invocation_id, Kept(tool.spec.ref, inv.proposal_id, for_model))
    life.advance(State.OBSERVED, result=clean, cuts=message.cuts)
    return endings.observed_of(
        life,
        proposal_id=inv.proposal_id,
        tool=tool,
        invocation=inv,
        evidence=verdict.decision.evidence,
        result=result,
        message=message,
        human_cuts=secret_cuts,
    )


def _message(
    env: Env, call: Opened, verdict: Verdict, inv: Invocation, value: JSONValue
) -> settle.Projected | None:
    """The output contract, redaction and the model's message; ``None`` if any fails.

    Nothing here is recorded: a result the staged path must handle is handed to
    it as the attempt left it.
    """
    tool = verdict.tool
    if settle.output_problem(tool, value) is not None:
        return None
    try:
        return settle.project(env, call.ctx, inv, tool, value, secrets={})
    except (TypeError, ValueError):
        return None


def _prepared(
    call: Opened, verdict: Verdict, inv: Invocation, tctx: ToolContext | None = None
) -> Prepared:
    """The staged value of the call as far as the lane took it, for the staged path."""
    decision = verdict.decision
    prepared = Prepared(
        proposal=call.proposal,
        ctx=call.ctx,
        life=call.life,
        started=call.started,
        tool=verdict.tool,
        invocation=inv,
        authorized_at=verdict.now,
        confirm_reason=None,
        flows=verdict.flows,
        evidence=decision.evidence,
        ledger_key=None,
    )
    if tctx is not None:
        prepared.attempts.current = tctx.attempt_id
    return prepared

"""Where the commit boundary stands: one raw attempt in, one ending out (R9, R11).

:func:`settle` classifies what the executor saw — a value, an exception, a deadline,
a cancellation, a commit mark — against the tool's commit boundary: a write that may
have happened is OUTCOME_UNKNOWN, never "not executed". :func:`observe` takes a
committed value through the output contract, redaction and the model projection;
:func:`replay` answers an idempotent repeat with the recorded result (R8).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple, cast

from toolbound._errors import Problem, Rejection
from toolbound._model import Result
from toolbound._state import State
from toolbound.execution.tool import CommitUnknown, NotCommitted, ToolOutput
from toolbound.pipeline import endings
from toolbound.pipeline.env import Kept
from toolbound.problems import make_problem
from toolbound.results.encode import model_result

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime

    from toolbound._model import Attempt, Invocation, JSONValue
    from toolbound._outcome import Outcome
    from toolbound.execution.executor import RawAttempt
    from toolbound.ledger.store import Replay
    from toolbound.pipeline.call import CallContext, Prepared
    from toolbound.pipeline.env import Env
    from toolbound.registry import RegisteredTool
    from toolbound.results.encode import ModelProjection
    from toolbound.results.redact import Cut

__all__ = [
    "Projected",
    "committed",
    "observe",
    "output_problem",
    "project",
    "replay",
    "result_budget",
    "settle",
]


def settle(env: Env, call: Prepared, raw: RawAttempt) -> Outcome:  # noqa: C901, PLR0911 - one arm per R9 case
    """Classify what happened against the tool's commit boundary (R9)."""
    spec = call.tool.spec
    # Without a commit mark, an interrupted write may have committed.
    interrupt_is_safe = not spec.is_write or spec.marks_commit
    if raw.cancelled:
        if raw.marked:
            return endings.committed_then_cancelled(env, call, raw)
        if interrupt_is_safe:
            endings.record_attempt(call, raw, "cancelled", "cancelled before the commit boundary")
            return endings.cancelled(env, call, "cancelled before the commit boundary")
        return endings.unknown(
            env,
            call,
            raw,
            make_problem(
                "cancelled_during_write",
                "the call was cancelled while the write was running",
                hint="do not repeat it; its outcome will be reconciled",
            ),
        )
    if raw.timed_out:
        problem = make_problem(
            "deadline_exceeded", f"{spec.ref} did not finish within its deadline"
        )
        if raw.marked:
            return endings.committed_without_result(env, call, raw, problem)
        if interrupt_is_safe:
            return endings.failed_before(env, call, problem, raw)
        return endings.unknown(env, call, raw, replace(problem, recoverable=False))
    error = raw.error
    if error is None:
        return observe(env, call, raw)
    if isinstance(error, CommitUnknown):
        return endings.unknown(env, call, raw, commit_unknown(error.message))
    if isinstance(error, NotCommitted) and not raw.marked:
        return endings.failed_before(env, call, not_committed(error), raw)
    # An exception nobody classified: its text may hold internals, so the
    # model is told only its type; the human projection keeps the text.
    problem = make_problem("tool_error", f"{spec.ref} raised {type(error).__name__}")
    call.life.trace.record("tool_exception", type=type(error).__name__, text=str(error))
    if raw.marked:
        return endings.committed_without_result(env, call, raw, problem)
    if interrupt_is_safe:
        return endings.failed_before(env, call, problem, raw)
    return endings.unknown(env, call, raw, problem)


def observe(env: Env, call: Prepared, raw: RawAttempt) -> Outcome:
    """COMMITTED, then the output contract, then OBSERVED (R11)."""
    tool, inv = call.tool, call.invocation
    value, external = output_of(raw)
    attempts = endings.record_attempt(call, raw, "committed", None)
    call.life.advance(State.COMMITTED, external_resource_id=external)
    observed_at = raw.ended_at or raw.started_at
    # A transactional tool's result was checked inside its transaction already.
    problem = None if raw.output_checked else output_problem(tool, value)
    if problem is None:
        try:
            projected = project(
                env, call.ctx, inv, tool, cast("JSONValue", value), secrets=env.injected(tool)
            )
        except (TypeError, ValueError) as exc:
            problem = make_problem(
                "output_not_json", f"the tool returned a value that is not JSON ({exc})"
            )
    if problem is not None:
        kept = committed(inv, None, external, observed_at, attempts)
        endings.record_phase(env, call, kept)
        call.life.trace.record("output_rejected", problem=problem)
        return endings.failed_after(call, problem, kept)
    message, clean, for_model, secret_cuts = projected
    result = committed(inv, clean, external, observed_at, attempts)
    endings.record_phase(env, call, result)
    conflict = _read_back(call, result)
    if conflict is not None:
        return endings.failed_after(call, conflict, result)
    if message.truncated:
        env.kept.keep(inv.invocation_id, Kept(tool.spec.ref, inv.proposal_id, for_model))
    call.life.advance(State.OBSERVED, result=clean, cuts=message.cuts)
    return endings.observed(call, result, message, secret_cuts)


class Projected(NamedTuple):
    """A committed value as it is kept and as it is sent (R11, R12)."""

    message: ModelProjection
    """The model's message."""
    clean: JSONValue
    """The value with injected secrets cut: what the result and the trace keep."""
    for_model: JSONValue
    """The value with personal data cut too: what the message holds."""
    secret_cuts: tuple[Cut, ...]


def project(
    env: Env,
    ctx: CallContext,
    inv: Invocation,
    tool: RegisteredTool,
    value: JSONValue,
    *,
    secrets: Mapping[str, str],
) -> Projected:
    """Redaction, then the model's message; ``TypeError``/``ValueError`` if not JSON."""
    clean, secret_cuts = env.redactor.redact(value, secrets=secrets, personal=False)
    for_model, personal_cuts = env.redactor.redact(clean, secrets={}, personal=True)
    message = model_result(
        invocation_id=inv.invocation_id,
        proposal_id=inv.proposal_id,
        tool=tool.spec.ref,
        value=for_model,
        budget=result_budget(tool, ctx),
        empty_meaning=tool.spec.empty_result,
        cuts=(*secret_cuts, *personal_cuts),
    )
    return Projected(message, clean, for_model, secret_cuts)


def replay(env: Env, call: Prepared, claim: Replay) -> Outcome:
    """R8: the same call already committed — return its result, no second effect."""
    tool, inv = call.tool, call.invocation
    call.life.advance(State.COMMITTED, replayed_from=claim.invocation_id)
    result = replace(claim.result, invocation_id=inv.invocation_id)
    if result.status == "error":
        # R8, R9: the first call took effect and its result was lost (or cut off after
        # its commit). The same answer again, never "nothing found", and no second run.
        lost = make_problem(
            "result_lost",
            f"the same call ({claim.invocation_id}) took effect, but its result was lost",
            hint="the effect happened; do not repeat it",
        )
        return endings.failed_after(call, lost, result)
    for_model, cuts = env.redactor.redact(result.value, secrets={}, personal=True)
    message = model_result(
        invocation_id=inv.invocation_id,
        proposal_id=inv.proposal_id,
        tool=tool.spec.ref,
        value=for_model,
        budget=result_budget(tool, call.ctx),
        empty_meaning=tool.spec.empty_result,
        cuts=cuts,
    )
    call.life.advance(State.OBSERVED, result=result.value, replayed_from=claim.invocation_id)
    return endings.observed(call, result, message, (), replayed_from=claim.invocation_id)


def output_of(raw: RawAttempt) -> tuple[object, str | None]:
    """What the tool returned, and the external resource id a ``ToolOutput`` names."""
    value = raw.value
    if isinstance(value, ToolOutput):
        return value.value, value.external_resource_id
    return value, None


def committed(
    inv: Invocation,
    value: JSONValue,
    external: str | None,
    observed_at: datetime,
    attempts: tuple[Attempt, ...],
) -> Result:
    """The result of a call whose effect committed (R9): ``value`` as it is kept."""
    return Result(
        invocation_id=inv.invocation_id,
        status="ok",
        value=value,
        commit_status="committed",
        external_resource_id=external,
        observed_at=observed_at,
        attempts=attempts,
    )


def output_problem(tool: RegisteredTool, value: object) -> Problem | None:
    """R11: the result must satisfy the output schema, or it is rejected.

    (That it is JSON at all is proved when the model projection is encoded.)
    """
    if tool.output is None:
        return None
    try:
        tool.output.validate(value)
    except Rejection as r:
        return make_problem(
            "output_rejected",
            f"the tool's result broke its output contract: {r.problem.message}",
            pointer=r.problem.pointer,
        )
    return None


def result_budget(tool: RegisteredTool, ctx: CallContext) -> int:
    """The bytes the model message may take: the tool's budget and the request's (R11)."""
    if ctx.result_budget is None:
        return tool.spec.result_budget
    return min(tool.spec.result_budget, ctx.result_budget)


def commit_unknown(message: str) -> Problem:
    """R9: the tool could not tell whether its effect happened."""
    return make_problem(
        "commit_unknown", message, hint="do not repeat the call; its outcome will be reconciled"
    )


def not_committed(error: NotCommitted) -> Problem:
    """The tool's own refusal before its commit boundary, as the model reads it."""
    return Problem(
        kind="execution",
        code=error.code,
        message=error.message,
        recoverable=error.recoverable,
        hint=error.hint,
    )


def _read_back(call: Prepared, result: Result) -> Problem | None:
    """R9: re-observe the target; a success the target contradicts is a conflict."""
    hook = call.tool.spec.read_back
    if hook is None:
        return None
    try:
        seen = hook(call.invocation, result.value)
    except Exception as exc:  # noqa: BLE001 - an unreadable target is not a contradiction
        call.life.trace.record("read_back", verified=False, error=type(exc).__name__)
        return None
    call.life.trace.record(
        "read_back",
        verified=True,
        matches=seen.matches,
        observed=seen.observed,
        detail=seen.detail,
    )
    if seen.matches:
        return None
    return make_problem(
        "readback_conflict",
        "the target does not show what the tool reported"
        + (f": {seen.detail}" if seen.detail else ""),
        hint="the write committed but its target disagrees; read it again before going on",
    )

"""How a call ends: the outcome builders, and the one State → ledger phase table.

Every ending takes the call's typestate, moves its lifecycle to the ending's state,
records the phase the ledger keeps for that state (R9: durable before the answer),
and builds the typed outcome (STYLE 5). An outcome is a plain value: its model
message and its human projection are computed here, once, and hold nothing of the
runtime or of the call's working state (R11, R12, R14).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, TypedDict, Unpack

from toolbound._model import Attempt, Result
from toolbound._outcome import (
    AwaitingConfirmation,
    Cancelled,
    Failed,
    Observed,
    OutcomeUnknown,
    Rejected,
)
from toolbound._state import State
from toolbound.execution.tool import CommitUnknown
from toolbound.ledger.store import LedgerError
from toolbound.pipeline.call import Admitted, Prepared
from toolbound.problems import make_problem
from toolbound.results.encode import HumanProjection, ModelProjection, dumps, model_error

if TYPE_CHECKING:
    from toolbound._errors import Problem
    from toolbound._lifecycle import Lifecycle
    from toolbound._model import CommitStatus, Invocation, JSONObject, JSONValue
    from toolbound.execution.executor import RawAttempt
    from toolbound.gates.confirm import ConfirmationRequest
    from toolbound.ledger.store import Phase
    from toolbound.pipeline.call import Opened
    from toolbound.pipeline.env import Env
    from toolbound.provenance import Finding
    from toolbound.registry import RegisteredTool
    from toolbound.results.redact import Cut
    from toolbound.trace import Trace

__all__ = [
    "PHASE_OF",
    "awaiting",
    "cancelled",
    "committed_then_cancelled",
    "committed_without_result",
    "failed_after",
    "failed_before",
    "observed",
    "observed_of",
    "record_attempt",
    "record_phase",
    "reject",
    "unknown",
]

PHASE_OF: dict[State, Phase] = {
    State.EXECUTING: "executing",
    State.COMMITTED: "committed",
    State.FAILED_BEFORE_COMMIT: "failed",
    State.CANCELLED_BEFORE_COMMIT: "failed",
    State.OUTCOME_UNKNOWN: "unknown",
}
"""The phase the ledger keeps for each state a claimed call can reach (R8, R9).

States before PREPARED hold no key; OBSERVED and FAILED_AFTER_COMMIT follow
COMMITTED, which is already recorded. EXECUTING's phase is written by the claim
itself, before the tool may start (``Ledger.claim_executing``).
"""


class _Details(TypedDict, total=False):
    """What an ending adds to the human projection, beyond the call itself."""

    problem: Problem | None
    commit: CommitStatus | None
    result: Result | None
    value: JSONValue
    cuts: tuple[Cut, ...]


class _Common(TypedDict):
    invocation_id: str
    proposal_id: str
    tool: str
    path: tuple[State, ...]
    trace: Trace
    message: ModelProjection
    human: HumanProjection


# -- the endings -----------------------------------------------------------------------


def reject(
    call: Opened,
    state: State,
    problem: Problem,
    *,
    tool: RegisteredTool | None = None,
    evidence: tuple[Finding, ...] | None = None,
    **data: object,
) -> Rejected:
    """Refused before execution; ``evidence`` (a policy's findings) is traced too."""
    if evidence is not None:
        data["evidence"] = evidence
    call.life.advance(state, problem=problem, **data)
    admitted = call if isinstance(call, Admitted) else None
    if admitted is not None:
        tool = admitted.tool
    message = _error_message(call, tool, problem, "not_committed")
    findings = evidence if evidence is not None else _evidence(call)
    return Rejected(
        **_common(call, tool, message, findings, problem=problem, commit="not_committed"),
        problem=problem,
        invocation=None if admitted is None else admitted.invocation,
    )


def failed_before(
    env: Env, call: Admitted, problem: Problem, raw: RawAttempt | None = None
) -> Failed:
    """FAILED_BEFORE_COMMIT: nothing happened, and the ledger says so."""
    attempts: tuple[Attempt, ...] = ()
    if raw is not None:
        assert isinstance(call, Prepared)  # noqa: S101 - only a running call has attempts
        attempts = record_attempt(call, raw, "not_committed", problem.code)
    result = _error_result(
        env, call.invocation, problem, "not_committed", raw=raw, attempts=attempts
    )
    call.life.advance(State.FAILED_BEFORE_COMMIT, problem=problem)
    record_phase(env, call, result)
    return Failed(
        **_erred(call, problem, "not_committed", result),
        problem=problem,
        invocation=call.invocation,
        result=result,
    )


def failed_after(call: Admitted, problem: Problem, committed: Result) -> Failed:
    """FAILED_AFTER_COMMIT: the effect happened, but its result is not usable (R9, R11)."""
    result = replace(committed, status="error", error=problem)
    call.life.advance(State.FAILED_AFTER_COMMIT, problem=problem)
    return Failed(
        **_erred(call, problem, "committed", result),
        problem=problem,
        invocation=call.invocation,
        result=result,
    )


def committed_without_result(env: Env, call: Prepared, raw: RawAttempt, problem: Problem) -> Failed:
    """The tool crossed its commit mark but gave no usable result."""
    attempts = record_attempt(call, raw, "committed", problem.code)
    committed = _error_result(
        env, call.invocation, problem, "committed", raw=raw, attempts=attempts
    )
    call.life.advance(State.COMMITTED, mark=True)
    record_phase(env, call, committed)
    lost = replace(problem, code="result_lost", hint="the effect happened; do not repeat it")
    return failed_after(call, lost, committed)


def committed_then_cancelled(env: Env, call: Prepared, raw: RawAttempt) -> Cancelled:
    """R9: cancel after the commit boundary — the effect stands, later steps stop."""
    attempts = record_attempt(call, raw, "committed", "cancelled after commit")
    problem = make_problem(
        "cancelled_after_commit",
        "the call was cancelled after its effect was committed",
        hint="the effect happened; do not repeat it",
    )
    result = _error_result(env, call.invocation, problem, "committed", raw=raw, attempts=attempts)
    call.life.advance(State.COMMITTED, cancelled=True)
    record_phase(env, call, result)
    return Cancelled(
        **_erred(call, problem, "committed", result),
        commit_status="committed",
        invocation=call.invocation,
        result=result,
    )


def cancelled(env: Env, call: Admitted, why: str) -> Cancelled:
    """CANCELLED_BEFORE_COMMIT: stopped before anything could happen."""
    problem = make_problem("cancelled", why)
    call.life.advance(State.CANCELLED_BEFORE_COMMIT, reason=why)
    result = _error_result(env, call.invocation, problem, "not_committed", raw=None, attempts=())
    record_phase(env, call, result)
    return Cancelled(
        **_erred(call, problem, "not_committed", result),
        commit_status="not_committed",
        invocation=call.invocation,
        result=result,
    )


def unknown(env: Env, call: Prepared, raw: RawAttempt, problem: Problem) -> OutcomeUnknown:
    """R9: a write that may have happened. Recorded as such, never as 'not executed'."""
    attempts = record_attempt(call, raw, "unknown", problem.code)
    result = _error_result(env, call.invocation, problem, "unknown", raw=raw, attempts=attempts)
    evidence = raw.error.evidence if isinstance(raw.error, CommitUnknown) else {}
    call.life.advance(State.OUTCOME_UNKNOWN, problem=problem, evidence=evidence)
    record_phase(env, call, result)
    return OutcomeUnknown(
        **_erred(call, problem, "unknown", result),
        problem=problem,
        invocation=call.invocation,
        result=result,
    )


def observed(
    call: Admitted,
    result: Result,
    message: ModelProjection,
    human_cuts: tuple[Cut, ...],
    replayed_from: str | None = None,
) -> Observed:
    """OBSERVED: committed, and the result passed its contract (R11)."""
    return observed_of(
        call.life,
        proposal_id=call.proposal.proposal_id,
        tool=call.tool,
        invocation=call.invocation,
        evidence=call.evidence,
        result=result,
        message=message,
        human_cuts=human_cuts,
        replayed_from=replayed_from,
    )


def observed_of(
    life: Lifecycle,
    *,
    proposal_id: str,
    tool: RegisteredTool,
    invocation: Invocation,
    evidence: tuple[Finding, ...],
    result: Result,
    message: ModelProjection,
    human_cuts: tuple[Cut, ...],
    replayed_from: str | None = None,
) -> Observed:
    """:func:`observed` from the pieces, for a path that never built the stage values."""
    return Observed(
        **_fields(
            life,
            proposal_id=proposal_id,
            ref=tool.spec.ref,
            invocation=invocation,
            message=message,
            evidence=evidence,
            commit="committed",
            result=result,
            value=result.value,
            cuts=human_cuts,
        ),
        invocation=invocation,
        result=result,
        replayed_from=replayed_from,
    )


def awaiting(call: Admitted, request: ConfirmationRequest) -> AwaitingConfirmation:
    """Parked for a person: the model learns only that the call waits (R7)."""
    inv = call.invocation
    payload: JSONObject = {
        "type": "tool_pending",
        "call_id": inv.proposal_id,
        "tool": request.tool,
        "status": "awaiting_confirmation",
        "message": "a person must confirm this call before it runs",
    }
    message = ModelProjection(
        invocation_id=inv.invocation_id,
        proposal_id=inv.proposal_id,
        payload=payload,
        content=dumps(payload),
        is_error=False,
    )
    return AwaitingConfirmation(
        **_common(call, call.tool, message, call.evidence),
        invocation=inv,
        request=request,
    )


# -- what the endings share ------------------------------------------------------------


def record_attempt(
    call: Prepared, raw: RawAttempt, outcome: CommitStatus | str, detail: str | None
) -> tuple[Attempt, ...]:
    """Append the attempt that just ended to the log and the trace (R10, R14)."""
    log = call.attempts
    attempt = Attempt(
        attempt_id=log.current,
        number=len(log.done) + 1,
        started_at=raw.started_at,
        ended_at=raw.ended_at or raw.started_at,
        outcome=outcome,  # type: ignore[arg-type]
        detail=detail,
    )
    log.done.append(attempt)
    call.life.trace.record("attempt", attempt=attempt)
    return tuple(log.done)


def record_phase(env: Env, call: Admitted, result: Result | None = None) -> None:
    """Record in the ledger the phase of the call's state (R9: durable before the answer).

    'executing' is never written here: the claim recorded it before the tool could
    start (``Ledger.claim_executing``). A call that holds no key records nothing; one
    taken over by another process since its claim is ``fenced`` and records nothing. A
    failed write leaves the record in its last durable phase (a sweep turns an
    abandoned 'executing' into 'unknown') and is traced; the outcome stands as observed.
    """
    if not isinstance(call, Prepared) or call.ledger_key is None:
        return
    phase = PHASE_OF[call.life.state]
    try:
        env.ledger.advance(
            call.ledger_key,
            invocation_id=call.invocation.invocation_id,
            phase=phase,
            now=env.clock.now(),
            result=result,
            # R9: a call taken over meanwhile is under a newer epoch: this write is fenced.
            epoch=call.epoch,
        )
    except LedgerError as exc:
        call.life.trace.record("ledger_write_failed", phase=phase, code=exc.code)


def _error_result(
    env: Env,
    inv: Invocation,
    problem: Problem,
    commit: CommitStatus,
    *,
    raw: RawAttempt | None,
    attempts: tuple[Attempt, ...],
) -> Result:
    return Result(
        invocation_id=inv.invocation_id,
        status="error",
        error=problem,
        commit_status=commit,
        observed_at=(raw.ended_at if raw is not None else None) or env.clock.now(),
        attempts=attempts,
    )


def _erred(call: Admitted, problem: Problem, commit: CommitStatus, result: Result) -> _Common:
    """The fields of an admitted call's error ending; records the bytes sent back (R14)."""
    message = _error_message(call, call.tool, problem, commit)
    return _common(
        call, call.tool, message, call.evidence, problem=problem, commit=commit, result=result
    )


def _ref(call: Opened, tool: RegisteredTool | None) -> str:
    return tool.spec.ref if tool is not None else call.proposal.name


def _evidence(call: Opened) -> tuple[Finding, ...]:
    return call.evidence if isinstance(call, Admitted) else ()


def _error_message(
    call: Opened, tool: RegisteredTool | None, problem: Problem, commit: CommitStatus
) -> ModelProjection:
    return model_error(
        invocation_id=call.invocation_id,
        proposal_id=call.proposal.proposal_id,
        tool=_ref(call, tool),
        problem=problem,
        commit_status=commit,
    )


def _common(
    call: Opened,
    tool: RegisteredTool | None,
    message: ModelProjection,
    evidence: tuple[Finding, ...],
    **details: Unpack[_Details],
) -> _Common:
    """The fields every outcome has; records the bytes sent back (R14)."""
    return _fields(
        call.life,
        proposal_id=call.proposal.proposal_id,
        ref=_ref(call, tool),
        invocation=call.invocation if isinstance(call, Admitted) else None,
        message=message,
        evidence=evidence,
        **details,
    )


def _fields(
    life: Lifecycle,
    *,
    proposal_id: str,
    ref: str,
    invocation: Invocation | None,
    message: ModelProjection,
    evidence: tuple[Finding, ...],
    problem: Problem | None = None,
    commit: CommitStatus | None = None,
    result: Result | None = None,
    value: JSONValue = None,
    cuts: tuple[Cut, ...] = (),
) -> _Common:
    trace = life.trace
    trace.add(
        "tool_message",
        None,
        {
            "content": message.content,
            "is_error": message.is_error,
            "truncated": message.truncated,
            "cuts": message.cuts,
        },
    )
    return {
        "invocation_id": trace.invocation_id,
        "proposal_id": proposal_id,
        "tool": ref,
        "path": tuple(life.path),
        "trace": trace,
        "message": message,
        "human": HumanProjection(
            invocation_id=trace.invocation_id,
            tool=ref,
            state=life.state.value,
            commit_status=commit,
            arguments=None if invocation is None else invocation.arguments,
            digest=None if invocation is None else invocation.digest,
            value=value,
            problem=problem,
            external_resource_id=None if result is None else result.external_resource_id,
            attempts=() if result is None else result.attempts,
            cuts=cuts,
            evidence=evidence,
        ),
    }

"""Execution: attempts under a deadline, the R10 retry loop, the transactional variant.

:func:`run` and :func:`arun` are the same loop and differ only in how they wait
(the executor's worker pool or the caller's event loop, a blocking or an async
sleep). Each attempt ends in a raw record (:class:`~toolbound.execution.executor.RawAttempt`)
that R10's matrix judges: retry with the same key, ask the remote side first, or
settle (:mod:`.settle`). The ledger already records 'executing' when execution begins:
the claim made it so (:mod:`.prepare`), one commit before any side effect (R9).

A transactional tool (its effect shares the ledger's database) runs instead in one
transaction with its claim and its commit record (:func:`run_transactional`).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from toolbound._state import State
from toolbound.execution.executor import RawAttempt
from toolbound.execution.fence import Stop, may_start
from toolbound.execution.reconcile import RemoteCommitted, RemoteUnknown, UnknownCall
from toolbound.execution.retry import classify, decide, policy_for, reliability_of, retry_after_of
from toolbound.execution.tool import CommitUnknown, NotCommitted, ToolContext, ToolOutput
from toolbound.ledger.store import Claimed, LedgerError, LedgerKey, Replay
from toolbound.pipeline import endings, settle
from toolbound.pipeline.prepare import claim_problem, intent, ledger_problem
from toolbound.problems import make_problem

if TYPE_CHECKING:
    import threading

    from toolbound._errors import Problem
    from toolbound._model import CommitStatus, Invocation, JSONValue, Result
    from toolbound._outcome import Outcome
    from toolbound.execution.reconcile import QueryAnswer
    from toolbound.execution.retry import RetryDecision
    from toolbound.pipeline.call import Opened, Prepared
    from toolbound.pipeline.env import Env
    from toolbound.registry import RegisteredTool

__all__ = [
    "aattempt",
    "aresume",
    "arun",
    "attempt",
    "deadline_of",
    "resume",
    "run",
    "run_transactional",
]


@dataclass(frozen=True, slots=True)
class _Retry:
    delay: float


def run(env: Env, call: Prepared) -> Outcome:
    """Execute ``call`` on the caller's thread, waiting as the executor does."""
    if call.tool.spec.transactional:
        return run_transactional(env, call)
    started = _start(env, call)
    if not isinstance(started, ToolContext):
        return started
    raw = attempt(env, call.tool, started, call.ctx.cancel, call=call)
    return resume(env, call, started, raw)


def resume(env: Env, call: Prepared, tctx: ToolContext, raw: RawAttempt) -> Outcome:
    """Go on from an attempt that has ended (``raw``): settle it or try again (R10)."""
    while True:
        if raw.not_started is not None:
            return _not_started(env, call, raw, raw.not_started)
        decision = _retry_decision(env, call, raw)
        answer = _ask(call) if decision is not None and decision.action == "query" else None
        step = _after_attempt(env, call, raw, decision, answer)
        if not isinstance(step, _Retry):
            return step
        env.sleeper.sleep(step.delay)
        tctx = _next_attempt(env, call, tctx)
        raw = attempt(env, call.tool, tctx, call.ctx.cancel, call=call)


def attempt(
    env: Env,
    tool: RegisteredTool,
    tctx: ToolContext,
    cancel: threading.Event | None,
    *,
    call: Opened,
) -> RawAttempt:
    """One attempt of ``tool`` on the invocation ``tctx`` carries, from a sync caller.

    ``call`` is the call the attempt is of (its deadline, and since when it is held).
    The tool is invoked only if :func:`~toolbound.execution.fence.may_start` says so,
    asked immediately before (R9); else ``raw.not_started`` says why, and nothing ran.
    """
    raw = RawAttempt(started_at=env.clock.now())
    budget = _fence(env, call, tool, tctx, raw)
    if budget is not None:
        env.executor.run(tool, tctx.invocation.arguments, tctx, raw, budget=budget, cancel=cancel)
    raw.ended_at = env.clock.now()
    return raw


async def arun(env: Env, call: Prepared) -> Outcome:
    """:func:`run` for async callers: async tools run on the caller's loop."""
    if call.tool.spec.transactional:
        # One worker thread owns the whole transaction, connection and all.
        return await env.executor.in_worker(run_transactional, env, call)
    ready = _checked(env, call)
    if not isinstance(ready, tuple):  # it ends 'failed' in the ledger: off the loop
        return await env.offload.finish(endings.failed_before, env, call, ready)
    started = _begin_attempt(call, *ready)
    raw = await aattempt(env, call.tool, started, call.ctx.cancel, call=call)
    return await aresume(env, call, started, raw)


async def aresume(env: Env, call: Prepared, tctx: ToolContext, raw: RawAttempt) -> Outcome:
    """:func:`resume` for async callers: what records the ledger runs off the loop."""
    offload = env.offload
    while True:
        if raw.not_started is not None:
            return await offload.finish(_not_started, env, call, raw, raw.not_started)
        if raw.caller_cancelled:
            # The caller's task was cancelled: settle the call truthfully, then
            # let the cancellation go on as asyncio expects.
            await offload.finish(settle.settle, env, call, raw)
            raise asyncio.CancelledError
        decision = _retry_decision(env, call, raw)
        answer = None
        if decision is not None and decision.action == "query":
            answer = await env.executor.in_worker(_ask, call)
        step = await offload.finish(_after_attempt, env, call, raw, decision, answer)
        if not isinstance(step, _Retry):
            return step
        await env.sleeper.asleep(step.delay)
        tctx = _next_attempt(env, call, tctx)
        raw = await aattempt(env, call.tool, tctx, call.ctx.cancel, call=call)


async def aattempt(
    env: Env,
    tool: RegisteredTool,
    tctx: ToolContext,
    cancel: threading.Event | None,
    *,
    call: Opened,
) -> RawAttempt:
    """:func:`attempt` for async callers."""
    raw = RawAttempt(started_at=env.clock.now())
    budget = _fence(env, call, tool, tctx, raw)
    if budget is not None:
        await env.executor.arun(
            tool, tctx.invocation.arguments, tctx, raw, budget=budget, cancel=cancel
        )
    raw.ended_at = env.clock.now()
    return raw


def _fence(
    env: Env, call: Opened, tool: RegisteredTool, tctx: ToolContext, raw: RawAttempt
) -> float | None:
    """The seconds the tool may run, or ``None`` (and ``raw.not_started``) if it may not start.

    R9: an effect starts only before the call's deadline and, for a write, while this
    process holds its lease with margin — a process that paused past either must not
    start it, since another may have taken the call over (:mod:`toolbound.execution.fence`).
    """
    now, deadline = env.clock.monotonic(), deadline_of(call, tool)
    raw.not_started = _refusal(env, call, tool, now)
    return None if raw.not_started is not None else min(tctx.deadline_in, deadline - now)


def _refusal(env: Env, call: Opened, tool: RegisteredTool, now: float) -> Problem | None:
    """Why the tool must not start at ``now`` (R9 fencing), or ``None`` if it may."""
    start = may_start(
        now=now,
        deadline=deadline_of(call, tool),
        lease=env.lease if tool.spec.is_write else None,
        since=call.started,
    )
    return make_problem(start.code, start.message) if isinstance(start, Stop) else None


def deadline_of(call: Opened, tool: RegisteredTool) -> float:
    """When ``call`` of ``tool`` must be done, on the runtime's monotonic clock."""
    return call.started + call.ctx.time_allowed(tool.spec)


def run_transactional(env: Env, call: Prepared) -> Outcome:  # noqa: C901, PLR0911
    """A tool whose effect shares the ledger's database (R8).

    Claim, the tool's own writes and the commit record are one transaction:
    either all of it commits or none of it does, so no outcome is ever
    unknown. The tool runs on this thread (the connection is this thread's);
    its deadline is checked when it returns, and an overrun rolls it back.
    """
    tool, inv = call.tool, call.invocation
    ready = _prestart(env, call)
    if not isinstance(ready, tuple):
        return ready
    secrets, budget = ready
    key = LedgerKey(inv.subject.tenant, tool.spec.ref, inv.idempotency_key or inv.digest)
    raw = RawAttempt(started_at=env.clock.now())
    claim = None
    ran = False
    try:
        with env.ledger.atomic() as tx:
            claim = tx.claim(intent(key, inv, tool), now=env.clock.now())
            if isinstance(claim, Claimed):
                tx.advance(
                    key,
                    invocation_id=inv.invocation_id,
                    phase="executing",
                    now=raw.started_at,
                    epoch=claim.epoch,
                )
                tctx = _begin_attempt(call, secrets, budget, tx.connection, epoch=claim.epoch)
                refusal = _refusal(env, call, tool, env.clock.monotonic())
                if refusal is not None:
                    raise _RolledBack(refusal)  # noqa: TRY301 - nothing ran; the claim rolls back
                ran = True
                t0 = time.monotonic()
                value = tool.function(inv.arguments, tctx)
                if time.monotonic() - t0 > budget:
                    raise _RolledBack(  # noqa: TRY301 - leaving the block rolls back
                        make_problem(
                            "deadline_exceeded",
                            f"{tool.spec.ref} overran its deadline; rolled back",
                        )
                    )
                unwrapped = value.value if isinstance(value, ToolOutput) else value
                problem = settle.output_problem(tool, unwrapped)
                if problem is not None:
                    raise _RolledBack(problem)  # noqa: TRY301 - nothing commits
                raw.value = value
                raw.output_checked = True
                raw.ended_at = env.clock.now()
                tx.advance(
                    key,
                    invocation_id=inv.invocation_id,
                    phase="committed",
                    now=raw.ended_at,
                    result=_stored(env, inv, tool, raw),
                    epoch=claim.epoch,
                )
    except _RolledBack as rb:
        raw.ended_at = env.clock.now()
        return endings.failed_before(env, call, rb.problem, raw)
    except LedgerError as exc:
        if not ran:
            return endings.failed_before(env, call, ledger_problem(exc))
        # The commit itself failed: ask the ledger whether it happened.
        raw.ended_at = env.clock.now()
        return _after_failed_commit(env, call, raw, exc)
    except Exception as exc:  # noqa: BLE001 - rolled back, so nothing happened
        raw.ended_at = env.clock.now()
        raw.error = exc
        return _settle_rolled_back(env, call, raw)
    if claim is not None and not isinstance(claim, Claimed):
        problem = claim_problem(claim)
        if problem is not None:
            return endings.failed_before(env, call, problem)
        assert isinstance(claim, Replay)  # noqa: S101 - the other claim kinds
        return settle.replay(env, call, claim)
    return settle.observe(env, call, raw)


# -- starting ----------------------------------------------------------------------------


def _start(env: Env, call: Prepared) -> ToolContext | Outcome:
    """EXECUTING, with the first attempt's context; or an outcome if it cannot start.

    A held key is already 'executing' in the ledger (the claim recorded it, R9), so
    nothing is written here. A call that cannot start ends FAILED_BEFORE_COMMIT, and
    its record 'failed': the tool never ran.
    """
    ready = _prestart(env, call)
    if not isinstance(ready, tuple):
        return ready
    secrets, budget = ready
    return _begin_attempt(call, secrets, budget)


def _prestart(env: Env, call: Prepared) -> tuple[dict[str, str], float] | Outcome:
    """The credentials and the time left, or why the tool cannot start."""
    ready = _checked(env, call)
    return ready if isinstance(ready, tuple) else endings.failed_before(env, call, ready)


def _checked(env: Env, call: Prepared) -> tuple[dict[str, str], float] | Problem:
    """The credentials and the time left, or the problem that keeps the tool from starting."""
    spec = call.tool.spec
    budget = _remaining(env, call)
    secrets: dict[str, str] = {}
    for name in spec.secrets:
        try:
            if env.secrets is None:
                raise KeyError(name)  # noqa: TRY301 - same path as a missing secret
            secrets[name] = env.secrets.get(name)
        except KeyError:
            return make_problem(
                "secret_unavailable",
                f"the credential {name!r} this tool needs is not configured",
            )
    if budget <= 0:
        return make_problem("deadline_exceeded", "the deadline passed before the tool could start")
    return secrets, budget


def _begin_attempt(
    call: Prepared,
    secrets: dict[str, str],
    budget: float,
    transaction: object = None,
    *,
    epoch: int | None = None,
) -> ToolContext:
    inv = call.invocation
    held = call.epoch if epoch is None else epoch
    call.attempts.current = os.urandom(8).hex()
    # The trace names the ownership a write ran under (R9, R14); a call holding no key
    # has none, and its EXECUTING detail is as it always was.
    owned = {} if held is None else {"epoch": held}
    call.life.advance(
        State.EXECUTING, attempt_id=call.attempts.current, attempt=1, budget_s=budget, **owned
    )
    return ToolContext(
        invocation=inv,
        attempt=1,
        secrets=secrets,
        idempotency_key=inv.idempotency_key,
        epoch=held,
        deadline_in=budget,
        transaction=transaction,
        attempt_id=call.attempts.current,
        trace=call.life.trace,
    )


def _remaining(env: Env, call: Prepared) -> float:
    return call.ctx.time_allowed(call.tool.spec) - (env.clock.monotonic() - call.started)


def _not_started(env: Env, call: Prepared, raw: RawAttempt, problem: Problem) -> Outcome:
    """The runner refused to invoke the tool (R9 fencing): this attempt did nothing.

    The call ends FAILED_BEFORE_COMMIT — unless an earlier attempt may have committed,
    which leaves it OUTCOME_UNKNOWN (R9: never reported "not executed").
    """
    if any(a.outcome == "unknown" for a in call.attempts.done):
        return endings.unknown(env, call, raw, problem)
    return endings.failed_before(env, call, problem, raw)


# -- retries (R10) -----------------------------------------------------------------------


def _retry_decision(env: Env, call: Prepared, raw: RawAttempt) -> RetryDecision | None:
    """What R10's matrix says about a failed attempt; ``None`` if it did not fail."""
    if raw.cancelled or raw.marked or (raw.error is None and not raw.timed_out):
        return None
    failure = classify(raw.error) if raw.error is not None else "timeout_unknown"
    if failure is None:
        return None  # a plain business refusal or an unclassified error
    spec = call.tool.spec
    decision = decide(
        failure,
        reliability_of(spec, key=call.invocation.idempotency_key),
        attempt=len(call.attempts.done) + 1,
        policy=policy_for(spec, env.retry_policy),
        remaining=_remaining(env, call),
        retry_after=retry_after_of(raw.error) if raw.error is not None else None,
        rng=env.rng,
    )
    call.life.trace.record(
        "retry_decision",
        failure=failure,
        action=decision.action,
        delay=decision.delay,
        reason=decision.reason,
    )
    return decision


def _ask(call: Prepared) -> QueryAnswer:
    """Ask the remote side what happened to this call's key (R10: query first)."""
    inv = call.invocation
    hook = call.tool.spec.query
    if hook is None or inv.idempotency_key is None:
        return RemoteUnknown(evidence={"reason": "the tool cannot be asked"})
    try:
        return hook(
            UnknownCall(
                invocation_id=inv.invocation_id,
                tool=call.tool.spec.ref,
                idempotency_key=inv.idempotency_key,
                arguments=inv.arguments,
                subject={
                    "id": inv.subject.id,
                    "tenant": inv.subject.tenant,
                    "session": inv.subject.session,
                },
            )
        )
    except Exception as exc:  # noqa: BLE001 - a failed query proves nothing
        return RemoteUnknown(evidence={"query_error": type(exc).__name__})


def _after_attempt(
    env: Env,
    call: Prepared,
    raw: RawAttempt,
    decision: RetryDecision | None,
    answer: QueryAnswer | None,
) -> Outcome | _Retry:
    """Settle the attempt, or plan the next one (R10)."""
    if decision is None or decision.action in {"stop", "unknown"}:
        return settle.settle(env, call, raw)
    if answer is not None:
        return _after_query(env, call, raw, answer)
    outcome: CommitStatus = "unknown" if isinstance(raw.error, CommitUnknown) else "not_committed"
    if raw.timed_out:
        outcome = "unknown" if call.tool.spec.is_write else "not_committed"
    endings.record_attempt(call, raw, outcome, decision.reason)
    return _Retry(decision.delay or 0.0)


def _after_query(
    env: Env, call: Prepared, raw: RawAttempt, answer: QueryAnswer
) -> Outcome | _Retry:
    """What the remote side said about the key decides the next step (R10)."""
    call.life.trace.record("query", answer=answer.kind, evidence=answer.evidence)
    if isinstance(answer, RemoteCommitted):
        # The remote side has it: the call committed, with the remote's result.
        raw.error, raw.timed_out = None, False
        raw.value = ToolOutput(answer.value, answer.external_resource_id)
        return settle.observe(env, call, raw)
    if isinstance(answer, RemoteUnknown):
        return settle.settle(env, call, raw)
    # Proven not committed: now it is a call that never reached the executor.
    endings.record_attempt(call, raw, "not_committed", "query: not committed")
    spec = call.tool.spec
    retry = decide(
        "not_reached",
        reliability_of(spec, key=call.invocation.idempotency_key),
        attempt=len(call.attempts.done),
        policy=policy_for(spec, env.retry_policy),
        remaining=_remaining(env, call),
        retry_after=None,
        rng=env.rng,
    )
    if retry.action != "retry" or retry.delay is None:
        return endings.failed_before(
            env,
            call,
            make_problem("not_committed", "the remote side confirmed the call did not happen"),
        )
    return _Retry(retry.delay)


def _next_attempt(env: Env, call: Prepared, previous: ToolContext) -> ToolContext:
    call.attempts.current = os.urandom(8).hex()
    number = len(call.attempts.done) + 1
    call.life.trace.record("attempt_started", attempt_id=call.attempts.current, number=number)
    return ToolContext(
        invocation=previous.invocation,
        attempt=number,
        secrets=previous.secrets,
        idempotency_key=previous.idempotency_key,  # R10: the same key on every attempt
        epoch=previous.epoch,
        deadline_in=_remaining(env, call),
        transaction=previous.transaction,
        attempt_id=call.attempts.current,
        trace=previous.trace,
    )


# -- the transactional variant -------------------------------------------------------------


class _RolledBack(Exception):  # noqa: N818 - a control-flow signal
    """Leave a transaction so that it rolls back, carrying why."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def _settle_rolled_back(env: Env, call: Prepared, raw: RawAttempt) -> Outcome:
    """A transactional tool raised: its transaction rolled back, nothing happened."""
    error = raw.error
    if isinstance(error, NotCommitted):
        problem = settle.not_committed(error)
    else:
        call.life.trace.record("tool_exception", type=type(error).__name__, text=str(error))
        problem = make_problem(
            "tool_error", f"{call.tool.spec.ref} raised {type(error).__name__}; rolled back"
        )
    return endings.failed_before(env, call, problem, raw)


def _after_failed_commit(env: Env, call: Prepared, raw: RawAttempt, exc: LedgerError) -> Outcome:
    """COMMIT raised: read the ledger back to learn whether the transaction landed."""
    try:
        record = env.ledger.find(call.invocation.invocation_id)
    except LedgerError:
        landed: bool | None = None
    else:
        landed = record is not None and record.phase == "committed"
    if landed:
        return settle.observe(env, call, raw)
    if landed is False:
        return endings.failed_before(env, call, ledger_problem(exc), raw)
    problem = settle.commit_unknown("the transaction's commit could not be confirmed")
    return endings.unknown(env, call, raw, problem)


def _stored(env: Env, inv: Invocation, tool: RegisteredTool, raw: RawAttempt) -> Result:
    """The result as the ledger keeps it: secrets redacted, for replays."""
    value, external = settle.output_of(raw)
    clean, _ = env.redactor.redact(
        cast("JSONValue", value), secrets=env.injected(tool), personal=False
    )
    return settle.committed(inv, clean, external, raw.ended_at or raw.started_at, ())

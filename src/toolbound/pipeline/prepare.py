"""From an admitted call to one ready to run: target check, then the ledger claim (R6, R8).

A write's claim is made as the call starts (``Ledger.claim_executing``): the R8 decision,
the intent and the move to 'executing' are one durable commit before the tool may run
(R9). Execution follows at once; a call that then cannot start (no credential, no time
left) settles its record 'failed', since the pipeline knows its tool never ran.

:func:`prepare` answers a :class:`~.call.Prepared` call, an ending (the target is
gone, the key was used for other arguments, the same call is in flight, the ledger
is down), an idempotent replay, or :class:`Waiting` when the caller asked to wait for
the same call still executing elsewhere; :func:`ready` and :func:`aready` do that
waiting, synchronously or on the caller's event loop.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolbound._state import State
from toolbound.ledger.store import (
    Claim,
    Claimed,
    Expired,
    InFlight,
    Intent,
    KeyReused,
    LedgerError,
    LedgerKey,
    Replay,
)
from toolbound.pipeline import endings, settle
from toolbound.pipeline.call import Admitted, Prepared
from toolbound.problems import make_problem

if TYPE_CHECKING:
    from toolbound._errors import Problem
    from toolbound._model import Invocation
    from toolbound._outcome import Outcome
    from toolbound.pipeline.env import Env
    from toolbound.registry import RegisteredTool

__all__ = [
    "Waiting",
    "aready",
    "claim_problem",
    "intent",
    "ledger_problem",
    "prepare",
    "ready",
]

_WAIT_POLL = 0.02  # seconds between looks at a key another call holds


@dataclass(frozen=True, slots=True)
class Waiting:
    """The same call holds the key and is still running: look again until ``until``."""

    call: Admitted
    until: float


def prepare(env: Env, call: Admitted, until: float | None = None) -> Prepared | Waiting | Outcome:  # noqa: PLR0911 - one per gate
    """Target check, idempotency claim, PREPARED."""
    tool, inv = call.tool, call.invocation
    if call.ctx.cancel is not None and call.ctx.cancel.is_set():
        return endings.cancelled(env, call, "cancelled before execution")
    if tool.spec.target_check is not None:
        problem = _target_problem(call)
        if problem is not None:
            return endings.failed_before(env, call, problem)
    claim: Claim | None = None
    key: LedgerKey | None = None
    # A transactional tool claims inside its own transaction (R8).
    if inv.idempotency_key is not None and not tool.spec.transactional:
        key = LedgerKey(inv.subject.tenant, tool.spec.ref, inv.idempotency_key)
        try:
            claim = env.ledger.claim_executing(intent(key, inv, tool), now=env.clock.now())
        except LedgerError as exc:
            return _claim_failed(env, call, key, exc)
        waiting = _wait_for(call, claim, until)
        if waiting is not None:
            return waiting
        problem = claim_problem(claim)
        if problem is not None:
            return endings.failed_before(env, call, problem)
        if isinstance(claim, Replay):
            key = None  # the earlier invocation holds the key; this call writes nothing
    call.life.advance(State.PREPARED, deadline=inv.deadline, idempotency_key=inv.idempotency_key)
    epoch = claim.epoch if isinstance(claim, Claimed) else None
    prepared = Prepared.of(call, ledger_key=key, epoch=epoch)
    if isinstance(claim, Replay):
        return settle.replay(env, prepared, claim)
    return prepared


def ready(env: Env, step: Prepared | Waiting | Outcome) -> Prepared | Outcome:
    """Poll the ledger while the same call is still executing elsewhere (R8)."""
    while isinstance(step, Waiting):
        time.sleep(_WAIT_POLL)
        step = prepare(env, step.call, step.until)
    return step


async def aready(env: Env, step: Prepared | Waiting | Outcome) -> Prepared | Outcome:
    """:func:`ready` for async callers: each look at the ledger is off the loop."""
    while isinstance(step, Waiting):
        await asyncio.sleep(_WAIT_POLL)
        step = await env.offload.finish(prepare, env, step.call, step.until)
    return step


def intent(key: LedgerKey, inv: Invocation, tool: RegisteredTool) -> Intent:
    """What the ledger records before the side effect (R8, R9)."""
    return Intent(
        key=key,
        digest=inv.digest,
        invocation_id=inv.invocation_id,
        tool=tool.spec.ref,
        canonical=inv.canonical,
        subject={
            "id": inv.subject.id,
            "tenant": inv.subject.tenant,
            "session": inv.subject.session,
        },
        deadline=inv.deadline,
    )


def claim_problem(claim: Claim) -> Problem | None:
    """R8: what a refused idempotency claim tells the model."""
    match claim:
        case KeyReused():
            return make_problem(
                "key_reused",
                "this idempotency key was used for different arguments",
                hint="a new call needs a new key",
            )
        case InFlight():
            return make_problem(
                "outcome_unknown" if claim.phase == "unknown" else "in_progress",
                f"the same call ({claim.invocation_id}) is {claim.phase}",
                hint="wait for the earlier call; do not send it again",
            )
        case Expired():
            return make_problem(
                "key_expired",
                "this idempotency key's record is past its retention window",
                hint="a new call needs a new key",
            )
        case _:
            return None


def ledger_problem(exc: LedgerError) -> Problem:
    """The ledger could not record the call: nothing may run (R9)."""
    return make_problem(
        "ledger_unavailable",
        f"the idempotency ledger could not record the call ({exc.code})",
        hint="try again later",
    )


def _claim_failed(env: Env, call: Admitted, key: LedgerKey, exc: LedgerError) -> Outcome:
    """The claim raised: read back whether it recorded anything, and end the call truthfully.

    A store that raised may still hold our record: a commit whose answer was lost, or a
    store that wrote the intent before failing on 'executing'. If it does, the call holds
    the key: it is PREPARED and ends FAILED_BEFORE_COMMIT, which records 'failed' (the tool
    never started). If nothing is there, nothing was claimed. If the read fails too, a
    record that did land stays 'executing' until a sweep makes it 'unknown': a reading
    that may ask for reconciliation, never one that lets the write run twice (R9).
    """
    inv = call.invocation
    try:
        record = env.ledger.find(inv.invocation_id)
    except LedgerError:
        record = None
    if record is None or record.key != key:
        return endings.failed_before(env, call, ledger_problem(exc))
    call.life.advance(State.PREPARED, deadline=inv.deadline, idempotency_key=inv.idempotency_key)
    call.life.trace.record("ledger_write_failed", phase="executing", code=exc.code)
    held = Prepared.of(call, ledger_key=key, epoch=record.epoch)
    return endings.failed_before(env, held, ledger_problem(exc))


def _wait_for(call: Admitted, claim: Claim, until: float | None) -> Waiting | None:
    """R8: the same call is still executing; wait for it if the caller asked to."""
    if not (
        isinstance(claim, InFlight)
        and claim.phase in {"intent", "executing"}
        and call.ctx.wait_in_flight
    ):
        return None
    if until is None:
        until = time.monotonic() + call.ctx.wait_in_flight
        call.life.trace.record("waiting_for", invocation=claim.invocation_id)
    return Waiting(call, until) if time.monotonic() < until else None


def _target_problem(call: Admitted) -> Problem | None:
    """The tool's target check; one that raises fails closed (R6)."""
    check = call.tool.spec.target_check
    assert check is not None  # noqa: S101 - only called when the tool has one
    try:
        return check(call.invocation)
    except Exception as exc:  # noqa: BLE001 - an unreadable target fails closed
        call.life.trace.record("check_exception", type=type(exc).__name__, text=str(exc))
        return make_problem(
            "target_check_failed",
            f"could not check the target ({type(exc).__name__})",
            hint="try again later",
        )

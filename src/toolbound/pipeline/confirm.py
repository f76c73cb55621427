"""The confirmation desk: calls waiting for a person, and their decisions (R7).

A call the policy sends to a person enters AWAITING_CONFIRMATION with a
:class:`~toolbound.gates.confirm.ConfirmationRequest` bound to its digest. Then one
of two things holds it:

* the runtime's own :class:`ConfirmationDesk` (``Runtime(hold_parked=True)``, the
  default): :meth:`~ConfirmationDesk.issue` records a person's decision for the
  digest they were shown, and :meth:`~ConfirmationDesk.take` hands the parked call
  back once, for that confirmation only;
* or a durable store outside the runtime (the service's): the call is answered
  parked and not kept here, and later re-proposed carrying the recorded decision
  (``CallContext.approval``), which :func:`approved` checks against the call's own
  digest.

Either way authority is checked again when the call resumes (:func:`resume`), and
the deadline starts anew: waiting for a person takes time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING

from toolbound._errors import ConfirmationMismatch, Problem, Rejection
from toolbound._state import State
from toolbound.gates.authorize import AuthzRequest, Deny, authorize
from toolbound.gates.confirm import Confirmation, ConfirmationRequest, check_confirmation
from toolbound.pipeline import endings
from toolbound.problems import make_problem

if TYPE_CHECKING:
    from datetime import datetime

    from toolbound._outcome import AwaitingConfirmation, Rejected
    from toolbound.pipeline.call import Admitted
    from toolbound.pipeline.env import Env

__all__ = ["ConfirmationDesk", "approved", "end_expired", "park", "request_for", "resume"]

_GONE = frozenset({"digest_mismatch", "confirmation_for_other_call"})
"""Confirmations that can never fit the parked call they name: dropped, call kept."""


@dataclass(frozen=True, slots=True)
class _Parked:
    call: Admitted
    request: ConfirmationRequest


class ConfirmationDesk:
    """The calls one runtime holds for a person, and the decisions it issued (R7)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parked: dict[str, _Parked] = {}
        self._issued: dict[str, Confirmation] = {}

    def hold(self, call: Admitted, request: ConfirmationRequest) -> None:
        """Keep ``call`` until a person decides on ``request``."""
        with self._lock:
            self._parked[request.invocation_id] = _Parked(call, request)

    def pending(self) -> list[ConfirmationRequest]:
        """What waits, oldest first."""
        with self._lock:
            return [p.request for p in self._parked.values()]

    def parked(self) -> tuple[str, ...]:
        """The invocation ids that wait."""
        with self._lock:
            return tuple(self._parked)

    def issue(
        self,
        invocation_id: str,
        *,
        digest: str,
        approver: str,
        approved: bool,
        at: datetime,
        ttl: timedelta,
    ) -> Confirmation:
        """Record a person's decision on the call they were shown, by its digest.

        The desk is the only issuer: :meth:`take` accepts only confirmations issued
        here, each for the one invocation and digest it names.
        """
        with self._lock:
            parked = self._parked.get(invocation_id)
        if parked is None:
            raise _not_pending(invocation_id)
        # Built from what the person saw (digest), so a changed call cannot match.
        request = replace(parked.request, digest=digest)
        confirmation = (
            request.approve(approver=approver, at=at, ttl=ttl)
            if approved
            else request.deny(approver=approver, at=at)
        )
        with self._lock:
            self._issued[confirmation.confirmation_id] = confirmation
        return confirmation

    def take(self, confirmation: Confirmation, *, now: datetime) -> tuple[Admitted, Problem | None]:
        """Hand back the call ``confirmation`` decides, once (R7).

        The problem is set when the decision ends the call (denied, expired).
        Raises :class:`~toolbound.ConfirmationMismatch`, the call staying parked,
        when the confirmation was not issued here or names no parked call, another
        call or other arguments.
        """
        with self._lock:
            if self._issued.get(confirmation.confirmation_id) != confirmation:
                msg = "this confirmation was not issued by this runtime"
                raise ConfirmationMismatch(msg, code="not_issued")
            parked = self._parked.get(confirmation.invocation_id)
            if parked is None:
                raise _not_pending(confirmation.invocation_id)
            problem = None
            try:
                check_confirmation(parked.request, confirmation, now=now)
            except Rejection as r:
                if r.problem.code in _GONE:
                    del self._issued[confirmation.confirmation_id]
                    raise ConfirmationMismatch(r.problem.message, code=r.problem.code) from None
                problem = r.problem
            # R7: one confirmation, one call, once.
            del self._parked[confirmation.invocation_id]
            del self._issued[confirmation.confirmation_id]
        return parked.call, problem

    def cancel(self, invocation_id: str) -> Admitted:
        """Take a parked call away without a decision."""
        with self._lock:
            parked = self._parked.pop(invocation_id, None)
        if parked is None:
            raise _not_pending(invocation_id)
        return parked.call

    def expire(self, now: datetime) -> list[Admitted]:
        """Take away the calls whose confirmation window closed before ``now``."""
        with self._lock:
            expired = [p for p in self._parked.values() if now > p.request.expires_at]
            for parked in expired:
                del self._parked[parked.request.invocation_id]
            if expired:
                gone = {p.request.invocation_id for p in expired}
                for key in [k for k, c in self._issued.items() if c.invocation_id in gone]:
                    del self._issued[key]
        return [p.call for p in expired]


def request_for(env: Env, call: Admitted, reason: str, now: datetime) -> ConfirmationRequest:
    """What a person is asked to confirm: this invocation, by its digest, until when."""
    inv = call.invocation
    return ConfirmationRequest(
        invocation_id=inv.invocation_id,
        digest=inv.digest,
        tool=call.tool.spec.ref,
        subject=inv.subject,
        arguments=inv.arguments,
        reason=reason,
        requested_at=now,
        expires_at=now + env.confirmation_ttl,
    )


def park(
    env: Env, desk: ConfirmationDesk | None, call: Admitted, reason: str
) -> AwaitingConfirmation:
    """AWAITING_CONFIRMATION; held on ``desk``, or by the caller's own store without one."""
    now = call.authorized_at
    request = request_for(env, call, reason, now)
    call.life.advance(State.AWAITING_CONFIRMATION, request=request)
    if desk is not None:
        end_expired(desk, now)
        desk.hold(call, request)
    return endings.awaiting(call, request)


def approved(env: Env, call: Admitted, approval: Confirmation, reason: str) -> Admitted | Rejected:
    """Go on with a decision a durable confirmation store recorded (R7)."""
    now = call.authorized_at
    request = request_for(env, call, reason, now)
    call.life.advance(State.AWAITING_CONFIRMATION, request=request)
    call.life.trace.record("confirmation", record=approval)
    try:
        # The approval must name this invocation and digest, be an approval and be live.
        check_confirmation(replace(request, expires_at=approval.expires_at), approval, now=now)
    except Rejection as r:
        return endings.reject(call, State.AUTHORIZATION_REJECTED, r.problem)
    return call


def resume(
    env: Env,
    call: Admitted,
    confirmation: Confirmation,
    problem: Problem | None,
    timeout: float | None,
) -> Admitted | Rejected:
    """A parked call after its decision: authority again, and a fresh deadline."""
    call.life.trace.record("confirmation", record=confirmation)
    if problem is not None:
        return endings.reject(call, State.AUTHORIZATION_REJECTED, problem)
    inv = call.invocation
    now = env.clock.now()
    decision = authorize(
        env.policy,
        AuthzRequest(
            subject=inv.subject,
            spec=call.tool.spec,
            arguments=inv.arguments,
            resources=inv.resources,
            now=now,
            recheck=True,
            provenance=call.flows,
        ),
    )
    call = replace(call, evidence=decision.evidence)
    if isinstance(decision, Deny):
        return endings.reject(
            call, State.AUTHORIZATION_REJECTED, decision.problem, evidence=decision.evidence
        )
    spec = call.tool.spec
    budget = spec.timeout if timeout is None else min(spec.timeout, timeout)
    return replace(
        call,
        invocation=replace(inv, deadline=now + timedelta(seconds=budget)),
        started=env.clock.monotonic(),
        ctx=replace(call.ctx, timeout=budget),
    )


def end_expired(desk: ConfirmationDesk, now: datetime) -> None:
    """Parked calls nobody decided in time end AUTHORIZATION_REJECTED (R7), not kept."""
    for call in desk.expire(now):
        endings.reject(
            call,
            State.AUTHORIZATION_REJECTED,
            make_problem(
                "confirmation_expired",
                "nobody confirmed the call before its confirmation window closed",
            ),
        )


def _not_pending(invocation_id: str) -> ConfirmationMismatch:
    msg = f"no call {invocation_id} is waiting for confirmation"
    return ConfirmationMismatch(msg, code="not_pending")

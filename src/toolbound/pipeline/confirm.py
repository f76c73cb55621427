"""The confirmation desk: calls waiting for a person, and their decisions (R7).

A call the policy sends to a person enters AWAITING_CONFIRMATION with a
:class:`~toolbound.gates.confirm.ConfirmationRequest` bound to its digest. Every
surface decides on it through the one :class:`ConfirmationDesk`, whose rules
(tenant, digest, four eyes, one decision per call) are written here once, over a
store of parked calls (:class:`ParkedCalls`). Then one of two things holds the call:

* the runtime's own :class:`HeldCalls` (``Runtime(hold_parked=True)``, the default):
  the desk records a person's decision there, and :meth:`HeldCalls.take` hands the
  parked call back once, for that confirmation only;
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
from typing import TYPE_CHECKING, Protocol

from toolbound._clock import SystemClock
from toolbound._errors import ConfirmationMismatch, Problem, Rejection
from toolbound._state import State
from toolbound.gates.authorize import Allow, AuthzRequest, Confirm, Deny, authorize
from toolbound.gates.confirm import Confirmation, ConfirmationRequest, check_confirmation
from toolbound.gates.normalize import canonical_json, digest
from toolbound.ledger.store import LedgerError, LedgerKey
from toolbound.pipeline import endings
from toolbound.problems import make_problem

if TYPE_CHECKING:
    from datetime import datetime

    from toolbound._clock import Clock
    from toolbound._outcome import AwaitingConfirmation, Rejected
    from toolbound.gates.authorize import Decision, Policy
    from toolbound.ledger.store import Ledger
    from toolbound.pipeline.call import Admitted
    from toolbound.pipeline.env import Env

__all__ = [
    "Approver",
    "ConfirmOnce",
    "ConfirmationDesk",
    "HeldCalls",
    "ParkedCalls",
    "approved",
    "end_expired",
    "park",
    "request_for",
    "resume",
]

_GONE = frozenset({"digest_mismatch", "confirmation_for_other_call"})
"""Confirmations that can never fit the parked call they name: dropped, call kept."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Approver:
    """Who decides: a name for the record, and what the desk's rules look at.

    ``tenant`` limits the calls the approver sees and may decide (``None``: every
    tenant, as for a library's own person); ``subject`` is the approver's own
    subject, which the four-eyes rule compares with the call's.
    """

    name: str
    subject: str | None = None
    tenant: str | None = None


class ParkedCalls(Protocol):
    """Where calls waiting for a person are kept: the runtime's memory, a service's store."""

    def waiting(self, invocation_id: str) -> ConfirmationRequest | None:
        """The request of the call ``invocation_id`` if it waits undecided."""
        ...

    def all_waiting(self, tenant: str | None) -> list[ConfirmationRequest]:
        """Every undecided request, of ``tenant`` only when one is given, oldest first."""
        ...

    def record(self, confirmation: Confirmation) -> None:
        """Keep the one decision on a call; raise ``not_pending`` if it was decided already."""
        ...


class ConfirmationDesk:
    """The one place a person's decision on a parked call is checked and recorded (R7).

    Every surface decides through a desk over its store of parked calls: the
    runtime (:class:`HeldCalls`), the HTTP service and its console (the journal),
    the MCP endpoints. The rules, in order, each refusal a
    :class:`~toolbound.ConfirmationMismatch` with its code, the call staying parked:

    ``not_pending``      no undecided call of the approver's tenant under that id
                         (another tenant's call and no call look the same), or a
                         decision was recorded meanwhile: one decision per call
    ``digest_mismatch``  the person was shown other arguments than the call's
    ``four_eyes``        with ``four_eyes``, the call was made for the approver's own
                         subject
    ``confirmation_expired``  the call's confirmation window closed before the
                         decision: nobody can decide it any more

    A call whose window closed is never listed as pending (``clock`` tells the time).
    """

    def __init__(
        self, calls: ParkedCalls, *, four_eyes: bool = False, clock: Clock | None = None
    ) -> None:
        self.calls = calls
        self.four_eyes = four_eyes
        self.clock: Clock = clock if clock is not None else SystemClock()

    def pending(self, approver: Approver | None = None) -> list[ConfirmationRequest]:
        """The undecided calls ``approver`` may decide (every one without an approver)."""
        now = self.clock.now()
        waiting = self.calls.all_waiting(None if approver is None else approver.tenant)
        return [r for r in waiting if now <= r.expires_at]

    def check(
        self, invocation_id: str, *, digest: str, approver: Approver, at: datetime
    ) -> ConfirmationRequest:
        """The request ``approver`` may decide at ``at``, shown by ``digest``; else the refusal.

        The rules of the class docstring, in order, with nothing recorded: what
        :meth:`decide` checks before it records, and what a person's edit of the call
        must pass too (:meth:`~toolbound.Runtime.edit`).
        """
        request = self.calls.waiting(invocation_id)
        if request is None or (
            approver.tenant is not None and request.subject.tenant != approver.tenant
        ):
            raise _not_pending(invocation_id)
        if at > request.expires_at:
            msg = f"{invocation_id}'s confirmation window closed at {request.expires_at}"
            raise ConfirmationMismatch(msg, code="confirmation_expired")
        if digest != request.digest:
            # R7: the person reviewed other arguments; nothing is decided.
            msg = f"{invocation_id} has digest {request.digest}, not {digest}"
            raise ConfirmationMismatch(msg, code="digest_mismatch")
        if self.four_eyes and approver.subject == request.subject.id:
            msg = "four-eyes rule: a call cannot be decided by the subject it was made for"
            raise ConfirmationMismatch(msg, code="four_eyes")
        return request

    def decide(
        self,
        invocation_id: str,
        *,
        digest: str,
        approver: Approver,
        approve: bool,
        at: datetime,
        ttl: timedelta | None = None,
        reason: str | None = None,
    ) -> Confirmation:
        """Record ``approver``'s decision on the call they were shown by ``digest``.

        A denial keeps the ``reason`` the person gave: the model is told it.

        An approval holds for ``ttl`` (never past the request's own window; by
        default until it closes). Whoever holds the call runs it with the returned
        confirmation, which it checks once more against the call (R7).
        """
        request = self.check(invocation_id, digest=digest, approver=approver, at=at)
        confirmation = (
            request.approve(
                approver=approver.name,
                at=at,
                ttl=request.expires_at - at if ttl is None else ttl,
            )
            if approve
            else request.deny(approver=approver.name, at=at, reason=reason)
        )
        self.calls.record(confirmation)
        return confirmation


@dataclass(frozen=True, slots=True)
class _Parked:
    call: Admitted
    request: ConfirmationRequest


class HeldCalls:
    """The calls one runtime holds for a person, and the decisions recorded on them.

    :meth:`take` hands a parked call back once, for a confirmation recorded here
    only (R7: one confirmation, one call, once).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parked: dict[str, _Parked] = {}
        self._issued: dict[str, Confirmation] = {}

    def hold(self, call: Admitted, request: ConfirmationRequest) -> None:
        """Keep ``call`` until a person decides on ``request``."""
        with self._lock:
            self._parked[request.invocation_id] = _Parked(call, request)

    def requests(self) -> list[ConfirmationRequest]:
        """Every held call's request, decided or not, oldest first."""
        with self._lock:
            return [p.request for p in self._parked.values()]

    def parked(self) -> tuple[str, ...]:
        """The invocation ids held."""
        with self._lock:
            return tuple(self._parked)

    def waiting(self, invocation_id: str) -> ConfirmationRequest | None:
        """The request of ``invocation_id`` if it is held and undecided."""
        with self._lock:
            parked = self._parked.get(invocation_id)
            if parked is None or self._decided(invocation_id):
                return None
            return parked.request

    def all_waiting(self, tenant: str | None) -> list[ConfirmationRequest]:
        """The undecided requests, of ``tenant`` only when one is given."""
        with self._lock:
            return [
                p.request
                for i, p in self._parked.items()
                if not self._decided(i) and (tenant is None or p.request.subject.tenant == tenant)
            ]

    def record(self, confirmation: Confirmation) -> None:
        """Keep the decision until :meth:`take` consumes it."""
        with self._lock:
            if confirmation.invocation_id not in self._parked or self._decided(
                confirmation.invocation_id
            ):
                raise _not_pending(confirmation.invocation_id)
            self._issued[confirmation.confirmation_id] = confirmation

    def take(self, confirmation: Confirmation, *, now: datetime) -> tuple[Admitted, Problem | None]:
        """Hand back the call ``confirmation`` decides, once (R7).

        The problem is set when the decision ends the call (denied, expired).
        Raises :class:`~toolbound.ConfirmationMismatch`, the call staying parked,
        when the confirmation was not recorded here or names no parked call, another
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
        """Take a held call away without a decision."""
        with self._lock:
            parked = self._parked.pop(invocation_id, None)
            if parked is not None:
                self._forget(invocation_id)
        if parked is None:
            raise _not_pending(invocation_id)
        return parked.call

    def expire(self, now: datetime) -> list[Admitted]:
        """Take away the calls whose confirmation window closed before ``now``."""
        with self._lock:
            expired = [p for p in self._parked.values() if now > p.request.expires_at]
            for parked in expired:
                del self._parked[parked.request.invocation_id]
                self._forget(parked.request.invocation_id)
        return [p.call for p in expired]

    def _decided(self, invocation_id: str) -> bool:
        return any(c.invocation_id == invocation_id for c in self._issued.values())

    def _forget(self, invocation_id: str) -> None:
        for key in [k for k, c in self._issued.items() if c.invocation_id == invocation_id]:
            del self._issued[key]


class _Holds(Protocol):
    """What :class:`ConfirmOnce` reads of a runtime: its ledger and its parked calls."""

    @property
    def ledger(self) -> Ledger: ...

    def pending(self) -> list[ConfirmationRequest]: ...


class ConfirmOnce:
    """Wraps a policy so that a person approves one digest once (R7, R8).

    When ``inner`` asks for confirmation:

    * a call whose identical twin (same tenant, tool version and digest) was already
      confirmed and is recorded in the ledger — committed, in flight or of unknown
      outcome — cannot execute again (the idempotency claim replays or refuses it),
      so it is allowed without a second person;
    * a call whose identical twin from the same subject is already waiting for a
      person is denied with code ``confirmation_pending``, so it is never parked twice.

    Re-checks after a person's decision are passed through unchanged.
    """

    reads_store = True
    """The first exception reads the ledger: the async API decides off its loop."""

    def __init__(self, inner: Policy, runtime: _Holds | None = None) -> None:
        self.inner = inner
        self.runtime = runtime

    def authorize(self, request: AuthzRequest) -> Decision:
        """``inner``'s decision, with the two exceptions above."""
        decision = self.inner.authorize(request)
        runtime = self.runtime
        if not isinstance(decision, Confirm) or request.recheck or runtime is None:
            return decision
        spec = request.spec
        d = digest(
            tenant=request.subject.tenant,
            tool_name=spec.name,
            tool_version=spec.version,
            canonical=canonical_json(request.arguments),
        )
        if spec.is_write:
            # The runtime's default idempotency key is the digest (R8).
            key = LedgerKey(request.subject.tenant, spec.ref, f"tb:{d}")
            try:
                record = runtime.ledger.get(key)
            except LedgerError:
                record = None
            if record is not None and record.digest == d and record.phase != "failed":
                return Allow(
                    capabilities=decision.capabilities,
                    reason=(
                        f"the same call was confirmed as {record.invocation_id} and is "
                        f"{record.phase}; it cannot execute again"
                    ),
                )
        for parked in runtime.pending():
            if parked.digest == d and parked.subject == request.subject:
                return Deny(
                    problem=Problem(
                        kind="confirmation",
                        code="confirmation_pending",
                        message=f"the same call is waiting for a person as {parked.invocation_id}",
                        recoverable=True,
                        hint="wait for the person's decision; do not change the arguments",
                    )
                )
        return decision


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
        evidence=call.evidence,
    )


def park(env: Env, held: HeldCalls | None, call: Admitted, reason: str) -> AwaitingConfirmation:
    """AWAITING_CONFIRMATION; kept in ``held``, or by the caller's own store without it."""
    now = call.authorized_at
    request = request_for(env, call, reason, now)
    call.life.advance(State.AWAITING_CONFIRMATION, request=request)
    if held is not None:
        end_expired(held, now)
        held.hold(call, request)
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


def end_expired(held: HeldCalls, now: datetime) -> None:
    """Parked calls nobody decided in time end AUTHORIZATION_REJECTED (R7), not kept."""
    for call in held.expire(now):
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

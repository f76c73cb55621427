"""The runtime: one proposal in, one typed outcome out, every gate in between.

Pipeline (each stage a state change in the call's :class:`~toolbound._state.Lifecycle`
and an event in its trace)::

    parse (R3) → look up in the visible tool set (R2) → validate (R4) → normalize and
    digest (R5) → semantic check (R6) → authorize (R6) → [confirm (R7)] → target check
    (R6) → idempotency claim (R8) → execute with a deadline (R9) → validate the
    result (R11) → redact and project (R11, R12)

The gates are pure functions over frozen values; only execution, the ledger and the
stores do I/O. :meth:`Runtime.run` is the synchronous entry point and
:meth:`Runtime.arun` the asynchronous one; both share every step but the waiting.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Literal, Self, TypedDict, TypeVar, cast

from toolbound._clock import Clock, SystemClock
from toolbound._errors import ConfirmationMismatch, Problem, Rejection
from toolbound._model import Attempt, Invocation, NormalizationContext, Result
from toolbound._outcome import (
    AwaitingConfirmation,
    Cancelled,
    Failed,
    Observed,
    Outcome,
    OutcomeUnknown,
    Rejected,
)
from toolbound._state import Lifecycle, State
from toolbound.execution.executor import Executor
from toolbound.execution.executor import RawAttempt as _Raw
from toolbound.execution.reconcile import QueryAnswer, RemoteCommitted, RemoteUnknown, UnknownCall
from toolbound.execution.retry import (
    RetryDecision,
    RetryPolicy,
    Sleeper,
    SystemSleeper,
    classify,
    decide,
    policy_for,
    reliability_of,
    retry_after_of,
)
from toolbound.execution.tool import CommitUnknown, NotCommitted, ToolContext, ToolOutput
from toolbound.gates.authorize import AuthzRequest, Deny, Policy, authorize
from toolbound.gates.confirm import Confirmation, ConfirmationRequest, check_confirmation
from toolbound.gates.normalize import canonical_json, digest, normalize
from toolbound.gates.parse import DEFAULT_LIMITS, ParseLimits, parse_arguments
from toolbound.ledger.memory import MemoryLedger
from toolbound.ledger.store import (
    Claim,
    Claimed,
    Expired,
    InFlight,
    Intent,
    KeyReused,
    Ledger,
    LedgerError,
    LedgerKey,
    Replay,
)
from toolbound.results.encode import (
    HumanProjection,
    ModelProjection,
    dumps,
    model_error,
    model_result,
    page,
)
from toolbound.results.redact import Redactor
from toolbound.trace import Trace, TraceSink

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from toolbound._model import (
        CommitStatus,
        JSONObject,
        JSONValue,
        Proposal,
        Subject,
        ToolSpec,
    )
    from toolbound.execution.tool import SecretProvider
    from toolbound.ledger.store import Phase
    from toolbound.provenance import Finding, FlowReport, Provenance
    from toolbound.registry import RegisteredTool, ToolSet
    from toolbound.results.redact import Cut

__all__ = ["CallContext", "Runtime"]

_T = TypeVar("_T")
_WAIT_POLL = 0.02  # seconds between looks at a key another call holds


@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """What the runtime — never the model — knows about one request.

    ``subject`` is the authenticated caller; ``tools`` the tool set the model was
    shown; ``timezone``/``locale``/``reference_time`` the frame for normalization;
    ``timeout`` the request's budget in seconds (the deadline is the earlier of it
    and the tool's own timeout); ``idempotency_key`` a caller-chosen key for a
    write (by default the runtime derives one from the digest); ``cancel`` an event
    that cancels the call cooperatively; ``result_budget`` caps the bytes of the
    message sent back (the tool's own budget applies too); ``wait_in_flight`` is how
    long to wait when the same call is already executing elsewhere, for its result,
    instead of answering ``in_progress`` at once (R8).

    ``invocation_id`` fixes the new invocation's id (a service that keeps calls in
    its own store assigns it); ``approval`` is a person's decision that such a store
    recorded and consumed once (R7): when the policy asks for confirmation, a call
    carrying an approval for exactly its invocation id and digest goes on without
    parking, and one whose digest differs is rejected.

    ``provenance`` is the session's index of labelled values
    (:class:`~toolbound.provenance.Provenance`): each call's arguments are examined
    against it, the report is traced and handed to the policy (R6, R11). The
    :class:`~toolbound.Loop` supplies one by itself.
    """

    subject: Subject
    tools: ToolSet
    timezone: str = "UTC"
    locale: str = "en"
    reference_time: datetime | None = None
    timeout: float | None = None
    idempotency_key: str | None = None
    cancel: threading.Event | None = None
    trace_id: str | None = None
    result_budget: int | None = None
    wait_in_flight: float = 0.0
    invocation_id: str | None = None
    approval: Confirmation | None = None
    provenance: Provenance | None = None


@dataclass(slots=True)
class _Call:
    """The mutable working state of one call inside the runtime."""

    proposal: Proposal
    ctx: CallContext
    life: Lifecycle
    started: float
    tool: RegisteredTool | None = None
    invocation: Invocation | None = None
    ledger_key: LedgerKey | None = None
    attempt_id: str = ""
    attempts: list[Attempt] = field(default_factory=list)
    wait_until: float | None = None
    flows: FlowReport | None = None
    evidence: tuple[Finding, ...] = ()


class _CommonFields(TypedDict):
    invocation_id: str
    proposal_id: str
    tool: str
    path: tuple[State, ...]
    trace: Trace
    message: ModelProjection
    evidence: Callable[[], HumanProjection]


@dataclass(slots=True)
class _Parked:
    call: _Call
    request: ConfirmationRequest


@dataclass(slots=True)
class _Kept:
    tool: str
    proposal_id: str
    value: JSONValue = field(repr=False)


class Runtime:
    """Runs proposals against registered tools under a policy.

    One runtime serves many requests and threads. It owns a worker pool for sync
    tools (so a deadline can abandon a tool that overruns: its thread runs on until
    the function returns, and whatever it returns then is discarded — a write
    abandoned this way is OUTCOME_UNKNOWN) and, when sync callers use async tools, an
    event loop thread. Close it with :meth:`close` or use it as a context manager.

    Retries follow R10's matrix (:mod:`toolbound.execution.retry`) up to each tool's
    ``max_attempts``, with the same idempotency key, waiting through ``sleeper``
    (``retry_policy`` sets the backoff; ``rng`` its jitter). ``ledger`` is the
    idempotency ledger: in memory by default, :class:`~toolbound.SQLiteLedger` or
    ``PostgresLedger`` for durability. With ``hold_parked=False`` a call that needs
    confirmation is answered :class:`~toolbound.AwaitingConfirmation` and not kept
    here: the caller's own store keeps it and resumes it later with
    ``CallContext.approval`` (the service does this, so any of its processes can
    resume a call another one parked).
    """

    def __init__(
        self,
        *,
        policy: Policy,
        ledger: Ledger | None = None,
        secrets: SecretProvider | None = None,
        clock: Clock | None = None,
        parse_limits: ParseLimits = DEFAULT_LIMITS,
        redactor: Redactor | None = None,
        sinks: Sequence[TraceSink] = (),
        confirmation_ttl: timedelta = timedelta(minutes=15),
        max_workers: int = 8,
        kept_results: int = 1024,
        retry_policy: RetryPolicy | None = None,
        sleeper: Sleeper | None = None,
        rng: Callable[[], float] = random.random,
        hold_parked: bool = True,
    ) -> None:
        self.policy = policy
        self.ledger: Ledger = ledger if ledger is not None else MemoryLedger()
        self._secrets = secrets
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._limits = parse_limits
        self._redactor = redactor if redactor is not None else Redactor()
        self._sinks = tuple(sinks)
        self._ttl = confirmation_ttl
        self._executor = Executor(max_workers=max_workers)
        self._retry_policy = retry_policy
        self._sleeper: Sleeper = sleeper if sleeper is not None else SystemSleeper()
        self._rng = rng
        self._lock = threading.Lock()
        self._parked: dict[str, _Parked] = {}
        self._issued: dict[str, Confirmation] = {}
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._kept_max = kept_results
        self._hold_parked = hold_parked

    # -- public API -------------------------------------------------------------

    def run(self, proposal: Proposal, context: CallContext) -> Outcome:
        """Take ``proposal`` through every gate and, if admitted, execute it."""
        admitted = self._ready(self._admit(proposal, context))
        if not isinstance(admitted, _Call):
            return admitted
        return self._execute_sync(admitted)

    async def arun(self, proposal: Proposal, context: CallContext) -> Outcome:
        """:meth:`run` for async callers: async tools run on the caller's loop."""
        admitted = await self._aready(self._admit(proposal, context))
        if not isinstance(admitted, _Call):
            return admitted
        return await self._execute_async(admitted)

    def pending(self) -> list[ConfirmationRequest]:
        """The calls waiting for a person, oldest first (expired ones are ended first)."""
        self._end_expired(self.clock.now())
        with self._lock:
            return [p.request for p in self._parked.values()]

    def _end_expired(self, now: datetime) -> None:
        """Parked calls nobody decided in time end AUTHORIZATION_REJECTED (R7), not kept."""
        with self._lock:
            expired = [p for p in self._parked.values() if now > p.request.expires_at]
            for parked in expired:
                del self._parked[parked.request.invocation_id]
            if expired:
                gone = {p.request.invocation_id for p in expired}
                for key in [k for k, c in self._issued.items() if c.invocation_id in gone]:
                    del self._issued[key]
        for parked in expired:
            self._reject(
                parked.call,
                State.AUTHORIZATION_REJECTED,
                Problem(
                    kind="confirmation",
                    code="confirmation_expired",
                    message="nobody confirmed the call before its confirmation window closed",
                    recoverable=False,
                ),
            )

    def issue(
        self,
        invocation_id: str,
        *,
        digest: str,
        approver: str,
        approved: bool = True,
        ttl: timedelta | None = None,
    ) -> Confirmation:
        """Record a person's decision on the call they were shown, by its digest.

        The runtime is the only issuer: :meth:`confirm` accepts only confirmations
        issued here, each for the one invocation and digest it names (R7).
        """
        with self._lock:
            parked = self._parked.get(invocation_id)
        if parked is None:
            msg = f"no call {invocation_id} is waiting for confirmation"
            raise ConfirmationMismatch(msg, code="not_pending")
        # Built from what the person saw (digest), so a changed call cannot match.
        request = replace(parked.request, digest=digest)
        now = self.clock.now()
        confirmation = (
            request.approve(approver=approver, at=now, ttl=ttl or self._ttl)
            if approved
            else request.deny(approver=approver, at=now)
        )
        with self._lock:
            self._issued[confirmation.confirmation_id] = confirmation
        return confirmation

    def approve(
        self,
        invocation_id: str,
        *,
        digest: str,
        approver: str,
        ttl: timedelta | None = None,
        timeout: float | None = None,
    ) -> Outcome:
        """A person approves the call they were shown (by its digest); run it now."""
        confirmation = self.issue(invocation_id, digest=digest, approver=approver, ttl=ttl)
        return self.confirm(confirmation, timeout=timeout)

    async def aapprove(
        self,
        invocation_id: str,
        *,
        digest: str,
        approver: str,
        ttl: timedelta | None = None,
        timeout: float | None = None,
    ) -> Outcome:
        """:meth:`approve` for async callers."""
        confirmation = self.issue(invocation_id, digest=digest, approver=approver, ttl=ttl)
        return await self.aconfirm(confirmation, timeout=timeout)

    def deny(self, invocation_id: str, *, digest: str, approver: str) -> Outcome:
        """A person refuses the call: it ends AUTHORIZATION_REJECTED."""
        return self.confirm(
            self.issue(invocation_id, digest=digest, approver=approver, approved=False)
        )

    def confirm(self, confirmation: Confirmation, *, timeout: float | None = None) -> Outcome:
        """Resume a parked call with a decision :meth:`issue` recorded (R7).

        Raises :class:`~toolbound.ConfirmationMismatch` (and leaves the call parked)
        when the confirmation was not issued here, names no parked call, another
        call, or other arguments.
        """
        resumed = self._ready(self._resume(confirmation, timeout))
        if not isinstance(resumed, _Call):
            return resumed
        return self._execute_sync(resumed)

    async def aconfirm(
        self, confirmation: Confirmation, *, timeout: float | None = None
    ) -> Outcome:
        """:meth:`confirm` for async callers."""
        resumed = await self._aready(self._resume(confirmation, timeout))
        if not isinstance(resumed, _Call):
            return resumed
        return await self._execute_async(resumed)

    def cancel_pending(self, invocation_id: str) -> Outcome:
        """Cancel a parked call: CANCELLED_BEFORE_COMMIT, nothing executed."""
        with self._lock:
            parked = self._parked.pop(invocation_id, None)
        if parked is None:
            msg = f"no call {invocation_id} is waiting for confirmation"
            raise ConfirmationMismatch(msg, code="not_pending")
        return self._cancelled(parked.call, "cancelled while waiting for confirmation")

    def reject(self, proposal: Proposal, context: CallContext, problem: Problem) -> Rejected:
        """Refuse a proposal before parsing, for a reason found outside it.

        For what a surface sees around the proposal — a duplicate call id in one
        response, an incomplete stream — so the refusal is traced like any other.
        """
        call = self._begin(proposal, context)
        return self._reject(call, State.PARSE_REJECTED, problem)

    def shrink(self, outcome: Outcome, budget: int) -> Outcome:
        """The same outcome with its model message cut to ``budget`` bytes (R16).

        Only an observed result can shrink; the full value stays fetchable through
        the continuation handle. The new bytes are recorded as sent (R14).
        """
        if outcome.kind != "observed" or len(outcome.message.content) <= budget:
            return outcome
        payload = outcome.message.payload
        with self._lock:
            kept = self._kept.get(outcome.invocation_id)
        value = kept.value if kept is not None else payload.get("data")
        message = model_result(
            invocation_id=outcome.invocation_id,
            proposal_id=outcome.proposal_id,
            tool=outcome.tool,
            value=value,
            budget=budget,
            empty_meaning=cast("str | None", payload.get("meaning")),
            cuts=outcome.message.cuts,
        )
        if message.truncated and kept is None:
            self._keep(outcome.invocation_id, outcome.tool, outcome.proposal_id, value)
        outcome.trace.record(
            "tool_message",
            content=message.content,
            is_error=message.is_error,
            truncated=message.truncated,
            cuts=message.cuts,
            reason="batch result budget",
        )
        return replace(outcome, message=message)

    def continue_result(self, handle: str, *, size: int | None = None) -> ModelProjection:
        """The next page of a truncated result, from its continuation handle (R11)."""
        invocation_id, _, offset = handle.rpartition(":")
        with self._lock:
            kept = self._kept.get(invocation_id)
        if kept is None or not offset.isdigit():
            msg = f"no kept result for handle {handle!r}"
            raise KeyError(msg)
        return page(
            invocation_id=invocation_id,
            proposal_id=kept.proposal_id,
            tool=kept.tool,
            value=kept.value,
            offset=int(offset),
            size=size or 16_384,
        )

    def close(self) -> None:
        """Stop the worker pool and loop thread (running tools are not interrupted)."""
        self._executor.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- admission: the pure gates ----------------------------------------------

    def _admit(  # noqa: PLR0911 - one return per gate that can reject
        self, proposal: Proposal, ctx: CallContext
    ) -> _Call | _Waiting | Outcome:
        """Parse, look up, validate, normalize, digest, check and authorize."""
        call = self._begin(proposal, ctx)
        life = call.life
        trace = life.trace
        invocation_id = trace.invocation_id
        try:
            arguments = parse_arguments(proposal.arguments, self._limits)
        except Rejection as r:
            return self._reject(call, State.PARSE_REJECTED, r.problem)
        life.advance(State.PARSED, parsed=arguments)

        tool = ctx.tools.lookup(proposal.name, proposal.version)
        if tool is None:
            wanted = proposal.name + (f"@{proposal.version}" if proposal.version else "")
            return self._reject(call, State.VALIDATION_REJECTED, _unknown_tool(wanted))
        call.tool = tool
        spec = tool.spec
        nctx = NormalizationContext(
            reference_time=ctx.reference_time or self.clock.now(),
            timezone=ctx.timezone,
            locale=ctx.locale,
        )
        checked = self._check_arguments(call, arguments, nctx)
        if not isinstance(checked, tuple):
            return checked
        arguments, canonical = checked
        d = digest(
            tenant=ctx.subject.tenant,
            tool_name=spec.name,
            tool_version=spec.version,
            canonical=canonical,
        )
        life.advance(
            State.VALIDATED,
            spec=spec.ref,
            validator=tool.input.info,
            normalized=arguments,
            canonical=canonical,
            digest=d,
        )
        try:
            resources = tuple(spec.resources(arguments)) if spec.resources is not None else ()
        except Exception as exc:  # noqa: BLE001 - a failing lookup must fail closed
            return self._reject(call, State.AUTHORIZATION_REJECTED, _lookup_failed(exc))
        now = nctx.reference_time if ctx.reference_time is None else self.clock.now()
        decision = authorize(
            self.policy,
            AuthzRequest(
                subject=ctx.subject,
                spec=spec,
                arguments=arguments,
                resources=resources,
                now=now,
                provenance=self._examine(call, arguments),
            ),
        )
        call.evidence = decision.evidence
        if isinstance(decision, Deny):
            return self._reject(
                call, State.AUTHORIZATION_REJECTED, decision.problem, evidence=decision.evidence
            )
        timeout = spec.timeout if ctx.timeout is None else min(spec.timeout, ctx.timeout)
        call.invocation = Invocation(
            invocation_id=invocation_id,
            proposal_id=proposal.proposal_id,
            model_call_id=proposal.model_call_id,
            tool_name=spec.name,
            tool_version=spec.version,
            arguments=arguments,
            canonical=canonical,
            digest=d,
            subject=ctx.subject,
            granted_capabilities=decision.capabilities,
            resources=resources,
            idempotency_key=self._key(ctx, d, write=spec.is_write),
            deadline=now + timedelta(seconds=timeout),
            trace_id=trace.trace_id,
        )
        life.advance(
            State.AUTHORIZED,
            decision=decision.kind,
            reason=decision.reason,
            subject={"id": ctx.subject.id, "tenant": ctx.subject.tenant},
            capabilities=decision.capabilities,
            evidence=decision.evidence,
        )
        if decision.kind == "confirm":
            if ctx.approval is not None:
                return self._approved(call, ctx.approval, decision.reason, now)
            return self._park(call, decision.reason, now)
        return self._prepare(call)

    def _examine(self, call: _Call, arguments: JSONObject) -> FlowReport | None:
        """Where the argument values came from, when the call carries provenance (R6, R11).

        The report is traced (event ``provenance``) and kept for the recheck after
        a confirmation. An index that fails yields ``None``: flow rules then fail closed.
        """
        index = call.ctx.provenance
        if index is None:
            return None
        try:
            call.flows = index.examine(arguments)
        except Exception as exc:  # noqa: BLE001 - an unreadable origin proves nothing
            call.life.trace.record("check_exception", type=type(exc).__name__, text=str(exc))
            return None
        call.life.trace.record(
            "provenance",
            checked=tuple(t.pointer for t in call.flows.trails),
            findings=call.flows.findings,
        )
        return call.flows

    def _check_arguments(
        self, call: _Call, arguments: JSONObject, nctx: NormalizationContext
    ) -> tuple[JSONObject, bytes] | Rejected:
        """Validate, normalize, re-validate, semantic check, canonical form (R4 to R6)."""
        spec = _must(call.tool).spec
        try:
            return _checked(_must(call.tool), arguments, nctx)
        except Rejection as r:
            return self._reject(call, State.VALIDATION_REJECTED, r.problem, spec=spec.ref)
        except Exception as exc:  # noqa: BLE001 - a broken normalizer or check fails closed
            call.life.trace.record("check_exception", type=type(exc).__name__, text=str(exc))
            return self._reject(
                call, State.VALIDATION_REJECTED, _check_failed(spec, exc), spec=spec.ref
            )

    def preview(self, proposal: Proposal, context: CallContext) -> Preview:
        """What the gates would decide for ``proposal``, with nothing recorded, run or spent.

        The same parse, validation, normalization, digest, provenance and policy as
        :meth:`run`, in the same order — for a surface that must know before it runs
        a call whether a person will be asked (an SDK's approval hook), or must show
        a person the normalized arguments and digest. Rate limits are consulted as a
        recheck, so a preview never spends them. The call itself is judged again when
        it runs.
        """
        tool = context.tools.lookup(proposal.name, proposal.version)
        if tool is None:
            wanted = proposal.name + (f"@{proposal.version}" if proposal.version else "")
            return Preview(problem=_unknown_tool(wanted))
        spec = tool.spec
        now = self.clock.now()
        nctx = NormalizationContext(
            reference_time=context.reference_time or now,
            timezone=context.timezone,
            locale=context.locale,
        )
        try:
            arguments, canonical = _checked(
                tool, parse_arguments(proposal.arguments, self._limits), nctx
            )
        except Rejection as r:
            return Preview(problem=r.problem)
        except Exception as exc:  # noqa: BLE001 - fails closed, as run() does
            return Preview(problem=_check_failed(spec, exc))
        try:
            resources = tuple(spec.resources(arguments)) if spec.resources is not None else ()
        except Exception as exc:  # noqa: BLE001 - fails closed, as run() does
            return Preview(problem=_lookup_failed(exc))
        d = digest(
            tenant=context.subject.tenant,
            tool_name=spec.name,
            tool_version=spec.version,
            canonical=canonical,
        )
        flows = None
        if context.provenance is not None:
            try:
                flows = context.provenance.examine(arguments)
            except Exception:  # noqa: BLE001 - flow rules then fail closed, as in run()
                flows = None
        decision = authorize(
            self.policy,
            AuthzRequest(
                subject=context.subject,
                spec=spec,
                arguments=arguments,
                resources=resources,
                now=now,
                recheck=True,
                provenance=flows,
            ),
        )
        if isinstance(decision, Deny):
            return Preview(problem=decision.problem, arguments=arguments, digest=d, decision="deny")
        return Preview(
            arguments=arguments, digest=d, decision=decision.kind, reason=decision.reason
        )

    def _begin(self, proposal: Proposal, ctx: CallContext) -> _Call:
        """A new call in PROPOSED, its trace opened with the raw proposal (R14)."""
        trace = Trace(
            invocation_id=ctx.invocation_id or os.urandom(16).hex(),
            trace_id=ctx.trace_id or os.urandom(16).hex(),
            clock=self.clock,
            sinks=self._sinks,
        )
        trace.record(
            "proposal",
            state=State.PROPOSED,
            name=proposal.name,
            version=proposal.version,
            proposal_id=proposal.proposal_id,
            model_call_id=proposal.model_call_id,
            arguments=proposal.arguments,
            visible=ctx.tools.refs,
            # The caller's trace id (from its traceparent), if it gave one; telemetry
            # joins that trace, or else nests under whatever span is active.
            trace_id=ctx.trace_id,
        )
        return _Call(
            proposal=proposal, ctx=ctx, life=Lifecycle(trace), started=self.clock.monotonic()
        )

    def _key(self, ctx: CallContext, d: str, *, write: bool) -> str | None:
        if not write:
            return None
        # R8: a provider's call id changes every turn, so the default key is the digest.
        return ctx.idempotency_key or f"tb:{d}"

    def _request(self, call: _Call, reason: str, now: datetime) -> ConfirmationRequest:
        inv = _must(call.invocation)
        return ConfirmationRequest(
            invocation_id=inv.invocation_id,
            digest=inv.digest,
            tool=_must(call.tool).spec.ref,
            subject=inv.subject,
            arguments=inv.arguments,
            reason=reason,
            requested_at=now,
            expires_at=now + self._ttl,
        )

    def _approved(
        self, call: _Call, approval: Confirmation, reason: str, now: datetime
    ) -> _Call | _Waiting | Outcome:
        """Go on with a decision a durable confirmation store recorded (R7)."""
        request = self._request(call, reason, now)
        call.life.advance(State.AWAITING_CONFIRMATION, request=request)
        call.life.trace.record("confirmation", record=approval)
        try:
            # The approval must name this invocation and digest, be an approval and be live.
            check_confirmation(replace(request, expires_at=approval.expires_at), approval, now=now)
        except Rejection as r:
            return self._reject(call, State.AUTHORIZATION_REJECTED, r.problem)
        return self._prepare(call)

    def _park(self, call: _Call, reason: str, now: datetime) -> AwaitingConfirmation:
        inv = _must(call.invocation)
        request = self._request(call, reason, now)
        call.life.advance(State.AWAITING_CONFIRMATION, request=request)
        if self._hold_parked:
            self._end_expired(now)
            with self._lock:
                self._parked[inv.invocation_id] = _Parked(call=call, request=request)
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
            **self._common(call, message),
            invocation=inv,
            request=request,
        )

    def _resume(
        self, confirmation: Confirmation, timeout: float | None
    ) -> _Call | _Waiting | Outcome:
        now = self.clock.now()
        with self._lock:
            if self._issued.get(confirmation.confirmation_id) != confirmation:
                msg = "this confirmation was not issued by this runtime"
                raise ConfirmationMismatch(msg, code="not_issued")
            parked = self._parked.get(confirmation.invocation_id)
            if parked is None:
                msg = f"no call {confirmation.invocation_id} is waiting for confirmation"
                raise ConfirmationMismatch(msg, code="not_pending")
            try:
                check_confirmation(parked.request, confirmation, now=now)
            except Rejection as r:
                if r.problem.code in {"digest_mismatch", "confirmation_for_other_call"}:
                    # The call stays parked; this confirmation can never fit it: drop it.
                    del self._issued[confirmation.confirmation_id]
                    raise ConfirmationMismatch(r.problem.message, code=r.problem.code) from None
                del self._parked[confirmation.invocation_id]
                del self._issued[confirmation.confirmation_id]
                call = parked.call
                call.life.trace.record("confirmation", record=confirmation)
                return self._reject(call, State.AUTHORIZATION_REJECTED, r.problem)
            # R7: one confirmation, one call, once.
            del self._parked[confirmation.invocation_id]
            del self._issued[confirmation.confirmation_id]
        call = parked.call
        call.life.trace.record("confirmation", record=confirmation)
        inv = _must(call.invocation)
        # Waiting for a person takes time: authority is checked again, and the
        # deadline starts anew from now.
        decision = authorize(
            self.policy,
            AuthzRequest(
                subject=inv.subject,
                spec=_must(call.tool).spec,
                arguments=inv.arguments,
                resources=inv.resources,
                now=now,
                recheck=True,
                provenance=call.flows,
            ),
        )
        call.evidence = decision.evidence
        if isinstance(decision, Deny):
            return self._reject(
                call, State.AUTHORIZATION_REJECTED, decision.problem, evidence=decision.evidence
            )
        spec = _must(call.tool).spec
        budget = spec.timeout if timeout is None else min(spec.timeout, timeout)
        call.invocation = replace(inv, deadline=now + timedelta(seconds=budget))
        call.started = self.clock.monotonic()
        call.ctx = replace(call.ctx, timeout=budget)
        return self._prepare(call)

    def _target_problem(self, call: _Call) -> Problem | None:
        """The tool's target check; one that raises fails closed (R6)."""
        check = _must(call.tool).spec.target_check
        assert check is not None  # noqa: S101 - only called when the tool has one
        try:
            return check(_must(call.invocation))
        except Exception as exc:  # noqa: BLE001 - an unreadable target fails closed
            call.life.trace.record("check_exception", type=type(exc).__name__, text=str(exc))
            return Problem(
                kind="target",
                code="target_check_failed",
                message=f"could not check the target ({type(exc).__name__})",
                recoverable=True,
                hint="try again later",
            )

    def _ready(self, step: _Call | _Waiting | Outcome) -> _Call | Outcome:
        """Poll the ledger while the same call is still executing elsewhere (R8)."""
        while isinstance(step, _Waiting):
            time.sleep(_WAIT_POLL)
            step = self._prepare(step.call)
        return step

    async def _aready(self, step: _Call | _Waiting | Outcome) -> _Call | Outcome:
        """:meth:`_ready` for async callers."""
        while isinstance(step, _Waiting):
            await asyncio.sleep(_WAIT_POLL)
            step = self._prepare(step.call)
        return step

    def _should_wait(self, call: _Call, claim: Claim) -> bool:
        """R8: the same call is still executing; wait for it if the caller asked to."""
        if not (
            isinstance(claim, InFlight)
            and claim.phase in {"intent", "executing"}
            and call.ctx.wait_in_flight
        ):
            return False
        if call.wait_until is None:
            call.wait_until = time.monotonic() + call.ctx.wait_in_flight
            call.life.trace.record("waiting_for", invocation=claim.invocation_id)
        return time.monotonic() < call.wait_until

    def _prepare(self, call: _Call) -> _Call | _Waiting | Outcome:  # noqa: PLR0911 - one per gate
        """Target check, idempotency claim, PREPARED."""
        tool = _must(call.tool)
        inv = _must(call.invocation)
        if self._cancel_requested(call):
            return self._cancelled(call, "cancelled before execution")
        if tool.spec.target_check is not None:
            problem = self._target_problem(call)
            if problem is not None:
                return self._failed_before(call, problem)
        claim: Claim | None = None
        # A transactional tool claims inside its own transaction (R8).
        if inv.idempotency_key is not None and not tool.spec.transactional:
            key = LedgerKey(inv.subject.tenant, tool.spec.ref, inv.idempotency_key)
            try:
                claim = self.ledger.claim(self._intent(key, inv, tool), now=self.clock.now())
            except LedgerError as exc:
                return self._failed_before(call, _ledger_problem(exc))
            if self._should_wait(call, claim):
                return _Waiting(call)
            problem = _claim_problem(claim)
            if problem is not None:
                return self._failed_before(call, problem)
            if not isinstance(claim, Replay):
                call.ledger_key = key
        call.life.advance(
            State.PREPARED, deadline=inv.deadline, idempotency_key=inv.idempotency_key
        )
        if isinstance(claim, Replay):
            return self._replay(call, claim)
        return call

    # -- execution: the only waiting --------------------------------------------

    def _execute_sync(self, call: _Call) -> Outcome:
        tool = _must(call.tool)
        if tool.spec.transactional:
            return self._execute_transactional(call)
        tctx, budget, early = self._start(call)
        if early is not None:
            return early
        while True:
            raw = _Raw(started_at=self.clock.now())
            self._executor.run(
                tool,
                _must(call.invocation).arguments,
                tctx,
                raw,
                budget=budget,
                cancel=call.ctx.cancel,
            )
            raw.ended_at = self.clock.now()
            decision = self._retry_decision(call, raw)
            answer = (
                self._ask(call) if decision is not None and decision.action == "query" else None
            )
            step = self._after_attempt(call, raw, decision, answer)
            if not isinstance(step, _Retry):
                return step
            self._sleeper.sleep(step.delay)
            tctx, budget = self._next_attempt(call, tctx)

    async def _execute_async(self, call: _Call) -> Outcome:
        tool = _must(call.tool)
        if tool.spec.transactional:
            # One worker thread owns the whole transaction, connection and all.
            return await self._executor.in_worker(self._execute_transactional, call)
        tctx, budget, early = self._start(call)
        if early is not None:
            return early
        while True:
            raw = _Raw(started_at=self.clock.now())
            await self._executor.arun(
                tool,
                _must(call.invocation).arguments,
                tctx,
                raw,
                budget=budget,
                cancel=call.ctx.cancel,
            )
            raw.ended_at = self.clock.now()
            if raw.caller_cancelled:
                # The caller's task was cancelled: settle the call truthfully, then
                # let the cancellation go on as asyncio expects.
                self._settle(call, raw)
                raise asyncio.CancelledError
            decision = self._retry_decision(call, raw)
            answer = None
            if decision is not None and decision.action == "query":
                answer = await self._executor.in_worker(self._ask, call)
            step = self._after_attempt(call, raw, decision, answer)
            if not isinstance(step, _Retry):
                return step
            await self._sleeper.asleep(step.delay)
            tctx, budget = self._next_attempt(call, tctx)

    def _start(self, call: _Call) -> tuple[ToolContext, float, Outcome | None]:
        """EXECUTING, with the attempt's context; or an outcome if it cannot start."""
        inv = _must(call.invocation)
        ready = self._prestart(call)
        if not isinstance(ready, tuple):
            return _dummy_context(inv), 0.0, ready
        secrets, budget = ready
        try:
            self._ledger_settle(call, "executing")
        except LedgerError as exc:
            # R9: intent must be durable as 'executing' before any side effect.
            return _dummy_context(inv), 0.0, self._failed_before(call, _ledger_problem(exc))
        return self._begin_attempt(call, secrets, budget), budget, None

    def _prestart(self, call: _Call) -> tuple[dict[str, str], float] | Outcome:
        """The credentials and the time left, or why the tool cannot start."""
        spec = _must(call.tool).spec
        elapsed = self.clock.monotonic() - call.started
        budget = spec.timeout if call.ctx.timeout is None else min(spec.timeout, call.ctx.timeout)
        budget -= elapsed
        secrets: dict[str, str] = {}
        for name in spec.secrets:
            try:
                if self._secrets is None:
                    raise KeyError(name)  # noqa: TRY301 - same path as a missing secret
                secrets[name] = self._secrets.get(name)
            except KeyError:
                return self._failed_before(
                    call,
                    Problem(
                        kind="execution",
                        code="secret_unavailable",
                        message=f"the credential {name!r} this tool needs is not configured",
                        recoverable=False,
                    ),
                )
        if budget <= 0:
            return self._failed_before(
                call,
                Problem(
                    kind="timeout",
                    code="deadline_exceeded",
                    message="the deadline passed before the tool could start",
                    recoverable=True,
                ),
            )
        return secrets, budget

    # -- retries (R10) -------------------------------------------------------------

    def _remaining(self, call: _Call) -> float:
        spec = _must(call.tool).spec
        total = spec.timeout if call.ctx.timeout is None else min(spec.timeout, call.ctx.timeout)
        return total - (self.clock.monotonic() - call.started)

    def _retry_decision(self, call: _Call, raw: _Raw) -> RetryDecision | None:
        """What R10's matrix says about a failed attempt; ``None`` if it did not fail."""
        if raw.cancelled or raw.marked or (raw.error is None and not raw.timed_out):
            return None
        failure = classify(raw.error) if raw.error is not None else "timeout_unknown"
        if failure is None:
            return None  # a plain business refusal or an unclassified error
        spec = _must(call.tool).spec
        decision = decide(
            failure,
            reliability_of(spec, key=_must(call.invocation).idempotency_key),
            attempt=len(call.attempts) + 1,
            policy=policy_for(spec, self._retry_policy),
            remaining=self._remaining(call),
            retry_after=retry_after_of(raw.error) if raw.error is not None else None,
            rng=self._rng,
        )
        call.life.trace.record(
            "retry_decision",
            failure=failure,
            action=decision.action,
            delay=decision.delay,
            reason=decision.reason,
        )
        return decision

    def _ask(self, call: _Call) -> QueryAnswer:
        """Ask the remote side what happened to this call's key (R10: query first)."""
        inv = _must(call.invocation)
        hook = _must(call.tool).spec.query
        if hook is None or inv.idempotency_key is None:
            return RemoteUnknown(evidence={"reason": "the tool cannot be asked"})
        try:
            return hook(
                UnknownCall(
                    invocation_id=inv.invocation_id,
                    tool=_must(call.tool).spec.ref,
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
        self,
        call: _Call,
        raw: _Raw,
        decision: RetryDecision | None,
        answer: QueryAnswer | None,
    ) -> Outcome | _Retry:
        """Settle the attempt, or plan the next one (R10)."""
        if decision is None or decision.action in {"stop", "unknown"}:
            return self._settle(call, raw)
        if answer is not None:
            call.life.trace.record("query", answer=answer.kind, evidence=answer.evidence)
            if isinstance(answer, RemoteCommitted):
                # The remote side has it: the call committed, with the remote's result.
                raw.error, raw.timed_out = None, False
                raw.value = ToolOutput(answer.value, answer.external_resource_id)
                return self._observe(call, raw)
            if isinstance(answer, RemoteUnknown):
                return self._settle(call, raw)
            # Proven not committed: now it is a call that never reached the executor.
            self._attempt(call, raw, "not_committed", "query: not committed")
            retry = decide(
                "not_reached",
                reliability_of(_must(call.tool).spec, key=_must(call.invocation).idempotency_key),
                attempt=len(call.attempts),
                policy=policy_for(_must(call.tool).spec, self._retry_policy),
                remaining=self._remaining(call),
                retry_after=None,
                rng=self._rng,
            )
            if retry.action != "retry" or retry.delay is None:
                return self._failed_before(
                    call,
                    Problem(
                        kind="execution",
                        code="not_committed",
                        message="the remote side confirmed the call did not happen",
                        recoverable=True,
                    ),
                )
            return _Retry(retry.delay)
        outcome: CommitStatus = (
            "unknown" if isinstance(raw.error, CommitUnknown) else "not_committed"
        )
        if raw.timed_out:
            outcome = "unknown" if _must(call.tool).spec.is_write else "not_committed"
        self._attempt(call, raw, outcome, decision.reason)
        return _Retry(decision.delay or 0.0)

    def _next_attempt(self, call: _Call, previous: ToolContext) -> tuple[ToolContext, float]:
        budget = self._remaining(call)
        call.attempt_id = os.urandom(8).hex()
        number = len(call.attempts) + 1
        call.life.trace.record("attempt_started", attempt_id=call.attempt_id, number=number)
        tctx = ToolContext(
            invocation=previous.invocation,
            attempt=number,
            secrets=previous.secrets,
            idempotency_key=previous.idempotency_key,  # R10: the same key on every attempt
            deadline_in=budget,
            transaction=previous.transaction,
            attempt_id=call.attempt_id,
        )
        return tctx, budget

    def _begin_attempt(
        self,
        call: _Call,
        secrets: dict[str, str],
        budget: float,
        transaction: object = None,
    ) -> ToolContext:
        inv = _must(call.invocation)
        call.attempt_id = os.urandom(8).hex()
        call.life.advance(State.EXECUTING, attempt_id=call.attempt_id, attempt=1, budget_s=budget)
        return ToolContext(
            invocation=inv,
            attempt=1,
            secrets=secrets,
            idempotency_key=inv.idempotency_key,
            deadline_in=budget,
            transaction=transaction,
            attempt_id=call.attempt_id,
        )

    def _execute_transactional(self, call: _Call) -> Outcome:  # noqa: C901, PLR0911
        """A tool whose effect shares the ledger's database (R8).

        Claim, the tool's own writes and the commit record are one transaction:
        either all of it commits or none of it does, so no outcome is ever
        unknown. The tool runs on this thread (the connection is this thread's);
        its deadline is checked when it returns, and an overrun rolls it back.
        """
        tool = _must(call.tool)
        inv = _must(call.invocation)
        ready = self._prestart(call)
        if not isinstance(ready, tuple):
            return ready
        secrets, budget = ready
        key = LedgerKey(inv.subject.tenant, tool.spec.ref, inv.idempotency_key or inv.digest)
        raw = _Raw(started_at=self.clock.now())
        claim: Claim | None = None
        ran = False
        try:
            with self.ledger.atomic() as tx:
                claim = tx.claim(self._intent(key, inv, tool), now=self.clock.now())
                if isinstance(claim, Claimed):
                    tx.advance(
                        key, invocation_id=inv.invocation_id, phase="executing", now=raw.started_at
                    )
                    tctx = self._begin_attempt(call, secrets, budget, tx.connection)
                    ran = True
                    t0 = time.monotonic()
                    value = tool.function(inv.arguments, tctx)
                    if time.monotonic() - t0 > budget:
                        raise _RolledBack(  # noqa: TRY301 - leaving the block rolls back
                            Problem(
                                kind="timeout",
                                code="deadline_exceeded",
                                message=f"{tool.spec.ref} overran its deadline; rolled back",
                                recoverable=True,
                            )
                        )
                    unwrapped = value.value if isinstance(value, ToolOutput) else value
                    problem = _output_problem(tool, unwrapped)
                    if problem is not None:
                        raise _RolledBack(problem)  # noqa: TRY301 - nothing commits
                    raw.value = value
                    raw.output_checked = True
                    raw.ended_at = self.clock.now()
                    tx.advance(
                        key,
                        invocation_id=inv.invocation_id,
                        phase="committed",
                        now=raw.ended_at,
                        result=self._stored(inv, tool, raw),
                    )
        except _RolledBack as rb:
            raw.ended_at = self.clock.now()
            return self._failed_before(call, rb.problem, raw)
        except LedgerError as exc:
            if not ran:
                return self._failed_before(call, _ledger_problem(exc))
            # The commit itself failed: ask the ledger whether it happened.
            raw.ended_at = self.clock.now()
            return self._after_failed_commit(call, raw, exc)
        except Exception as exc:  # noqa: BLE001 - rolled back, so nothing happened
            raw.ended_at = self.clock.now()
            raw.error = exc
            return self._settle_rolled_back(call, raw)
        if claim is not None and not isinstance(claim, Claimed):
            problem = _claim_problem(claim)
            if problem is not None:
                return self._failed_before(call, problem)
            assert isinstance(claim, Replay)  # noqa: S101 - the other claim kinds
            return self._replay(call, claim)
        return self._observe(call, raw)

    def _settle_rolled_back(self, call: _Call, raw: _Raw) -> Outcome:
        """A transactional tool raised: its transaction rolled back, nothing happened."""
        error = raw.error
        if isinstance(error, NotCommitted):
            problem = Problem(
                kind="execution",
                code=error.code,
                message=error.message,
                recoverable=error.recoverable,
                hint=error.hint,
            )
        else:
            call.life.trace.record("tool_exception", type=type(error).__name__, text=str(error))
            problem = Problem(
                kind="execution",
                code="tool_error",
                message=f"{_must(call.tool).spec.ref} raised {type(error).__name__}; rolled back",
                recoverable=False,
            )
        return self._failed_before(call, problem, raw)

    def _after_failed_commit(self, call: _Call, raw: _Raw, exc: LedgerError) -> Outcome:
        """COMMIT raised: read the ledger back to learn whether the transaction landed."""
        inv = _must(call.invocation)
        try:
            record = self.ledger.find(inv.invocation_id)
        except LedgerError:
            record = None
            landed: bool | None = None
        else:
            landed = record is not None and record.phase == "committed"
        if landed:
            return self._observe(call, raw)
        if landed is False:
            return self._failed_before(call, _ledger_problem(exc), raw)
        problem = Problem(
            kind="execution",
            code="commit_unknown",
            message="the transaction's commit could not be confirmed",
            recoverable=False,
            hint="do not repeat the call; its outcome will be reconciled",
        )
        return self._unknown(call, raw, problem)

    def _stored(self, inv: Invocation, tool: RegisteredTool, raw: _Raw) -> Result:
        """The result as the ledger keeps it: secrets redacted, for replays."""
        value = raw.value
        external = None
        if isinstance(value, ToolOutput):
            external = value.external_resource_id
            value = value.value
        clean, _ = self._redactor.redact(
            cast("JSONValue", value), secrets=self._injected(tool), personal=False
        )
        return Result(
            invocation_id=inv.invocation_id,
            status="ok",
            value=clean,
            commit_status="committed",
            external_resource_id=external,
            observed_at=_must(raw.ended_at),
        )

    # -- settling: where the commit boundary stands -----------------------------

    def _settle(self, call: _Call, raw: _Raw) -> Outcome:  # noqa: C901, PLR0911 - one arm per R9 case
        """Classify what happened against the tool's commit boundary (R9)."""
        spec = _must(call.tool).spec
        # Without a commit mark, an interrupted write may have committed.
        interrupt_is_safe = not spec.is_write or spec.marks_commit
        if raw.cancelled:
            if raw.marked:
                return self._committed_then_cancelled(call, raw)
            if interrupt_is_safe:
                self._attempt(call, raw, "cancelled", "cancelled before the commit boundary")
                return self._cancelled(call, "cancelled before the commit boundary")
            return self._unknown(
                call,
                raw,
                Problem(
                    kind="cancelled",
                    code="cancelled_during_write",
                    message="the call was cancelled while the write was running",
                    recoverable=False,
                    hint="do not repeat it; its outcome will be reconciled",
                ),
            )
        if raw.timed_out:
            problem = Problem(
                kind="timeout",
                code="deadline_exceeded",
                message=f"{spec.ref} did not finish within its deadline",
                recoverable=True,
            )
            if raw.marked:
                return self._committed_without_result(call, raw, problem)
            if interrupt_is_safe:
                return self._failed_before(call, problem, raw)
            return self._unknown(call, raw, replace(problem, recoverable=False))
        error = raw.error
        if error is None:
            return self._observe(call, raw)
        if isinstance(error, CommitUnknown):
            problem = Problem(
                kind="execution",
                code="commit_unknown",
                message=error.message,
                recoverable=False,
                hint="do not repeat the call; its outcome will be reconciled",
            )
            return self._unknown(call, raw, problem)
        if isinstance(error, NotCommitted) and not raw.marked:
            problem = Problem(
                kind="execution",
                code=error.code,
                message=error.message,
                recoverable=error.recoverable,
                hint=error.hint,
            )
            return self._failed_before(call, problem, raw)
        # An exception nobody classified: its text may hold internals, so the
        # model is told only its type; the human projection keeps the text.
        problem = Problem(
            kind="execution",
            code="tool_error",
            message=f"{spec.ref} raised {type(error).__name__}",
            recoverable=False,
        )
        call.life.trace.record("tool_exception", type=type(error).__name__, text=str(error))
        if raw.marked:
            return self._committed_without_result(call, raw, problem)
        if interrupt_is_safe:
            return self._failed_before(call, problem, raw)
        return self._unknown(call, raw, problem)

    def _observe(self, call: _Call, raw: _Raw) -> Outcome:
        """COMMITTED, then the output contract, then OBSERVED (R11)."""
        tool = _must(call.tool)
        inv = _must(call.invocation)
        value = raw.value
        external = None
        if isinstance(value, ToolOutput):
            external = value.external_resource_id
            value = value.value
        attempts = self._attempt(call, raw, "committed", None)
        call.life.advance(State.COMMITTED, external_resource_id=external)
        # A transactional tool's result was checked inside its transaction already.
        problem = None if raw.output_checked else _output_problem(tool, value)
        if problem is None:
            checked = cast("JSONValue", value)
            clean, secret_cuts = self._redactor.redact(
                checked, secrets=self._injected(tool), personal=False
            )
            for_model, personal_cuts = self._redactor.redact(clean, secrets={}, personal=True)
            try:
                message = model_result(
                    invocation_id=inv.invocation_id,
                    proposal_id=inv.proposal_id,
                    tool=tool.spec.ref,
                    value=for_model,
                    budget=_budget(tool, call.ctx),
                    empty_meaning=tool.spec.empty_result,
                    cuts=(*secret_cuts, *personal_cuts),
                )
            except (TypeError, ValueError) as exc:
                problem = Problem(
                    kind="output",
                    code="output_not_json",
                    message=f"the tool returned a value that is not JSON ({exc})",
                    recoverable=False,
                )
        if problem is not None:
            committed = Result(
                invocation_id=inv.invocation_id,
                status="ok",
                commit_status="committed",
                external_resource_id=external,
                observed_at=_must(raw.ended_at),
                attempts=attempts,
            )
            self._ledger_settle(call, "committed", committed)
            call.life.trace.record("output_rejected", problem=problem)
            return self._failed_after(call, problem, committed)
        result = Result(
            invocation_id=inv.invocation_id,
            status="ok",
            value=clean,
            commit_status="committed",
            external_resource_id=external,
            observed_at=_must(raw.ended_at),
            attempts=attempts,
        )
        self._ledger_settle(call, "committed", result)
        conflict = self._read_back(call, result)
        if conflict is not None:
            return self._failed_after(call, conflict, result)
        if message.truncated:
            self._keep(inv.invocation_id, tool.spec.ref, inv.proposal_id, for_model)
        call.life.advance(State.OBSERVED, result=clean, cuts=message.cuts)
        return self._finish_observed(call, result, message, secret_cuts)

    def _read_back(self, call: _Call, result: Result) -> Problem | None:
        """R9: re-observe the target; a success the target contradicts is a conflict."""
        hook = _must(call.tool).spec.read_back
        if hook is None:
            return None
        try:
            seen = hook(_must(call.invocation), result.value)
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
        return Problem(
            kind="output",
            code="readback_conflict",
            message="the target does not show what the tool reported"
            + (f": {seen.detail}" if seen.detail else ""),
            recoverable=False,
            hint="the write committed but its target disagrees; read it again before going on",
        )

    def _finish_observed(
        self,
        call: _Call,
        result: Result,
        message: ModelProjection,
        human_cuts: tuple[Cut, ...],
        replayed_from: str | None = None,
    ) -> Observed:
        return Observed(
            **self._common(
                call,
                message,
                commit="committed",
                result=result,
                value=result.value,
                cuts=human_cuts,
            ),
            invocation=_must(call.invocation),
            result=result,
            replayed_from=replayed_from,
        )

    def _replay(self, call: _Call, claim: Replay) -> Outcome:
        """R8: the same call already committed — return its result, no second effect."""
        tool = _must(call.tool)
        inv = _must(call.invocation)
        call.life.advance(State.COMMITTED, replayed_from=claim.invocation_id)
        result = replace(claim.result, invocation_id=inv.invocation_id)
        for_model, cuts = self._redactor.redact(result.value, secrets={}, personal=True)
        message = model_result(
            invocation_id=inv.invocation_id,
            proposal_id=inv.proposal_id,
            tool=tool.spec.ref,
            value=for_model,
            budget=_budget(tool, call.ctx),
            empty_meaning=tool.spec.empty_result,
            cuts=cuts,
        )
        call.life.advance(State.OBSERVED, result=result.value, replayed_from=claim.invocation_id)
        return self._finish_observed(call, result, message, (), replayed_from=claim.invocation_id)

    # -- the other endings ------------------------------------------------------

    def _reject(self, call: _Call, state: State, problem: Problem, **data: object) -> Rejected:
        call.life.advance(state, problem=problem, **data)
        message = self._error_message(call, problem, "not_committed")
        return Rejected(
            **self._common(call, message, problem=problem, commit="not_committed"),
            problem=problem,
            invocation=call.invocation,
        )

    def _failed_before(self, call: _Call, problem: Problem, raw: _Raw | None = None) -> Failed:
        inv = _must(call.invocation)
        attempts = () if raw is None else self._attempt(call, raw, "not_committed", problem.code)
        result = self._error_result(inv, problem, "not_committed", raw, attempts)
        call.life.advance(State.FAILED_BEFORE_COMMIT, problem=problem)
        self._ledger_settle(call, "failed", result)
        message = self._error_message(call, problem, "not_committed")
        return Failed(
            **self._common(call, message, problem=problem, commit="not_committed", result=result),
            problem=problem,
            invocation=inv,
            result=result,
        )

    def _failed_after(self, call: _Call, problem: Problem, committed: Result) -> Failed:
        result = replace(committed, status="error", error=problem)
        call.life.advance(State.FAILED_AFTER_COMMIT, problem=problem)
        message = self._error_message(call, problem, "committed")
        return Failed(
            **self._common(call, message, problem=problem, commit="committed", result=result),
            problem=problem,
            invocation=_must(call.invocation),
            result=result,
        )

    def _committed_without_result(self, call: _Call, raw: _Raw, problem: Problem) -> Failed:
        """The tool crossed its commit mark but gave no usable result."""
        inv = _must(call.invocation)
        attempts = self._attempt(call, raw, "committed", problem.code)
        committed = self._error_result(inv, problem, "committed", raw, attempts)
        call.life.advance(State.COMMITTED, mark=True)
        self._ledger_settle(call, "committed", committed)
        lost = replace(problem, code="result_lost", hint="the effect happened; do not repeat it")
        return self._failed_after(call, lost, committed)

    def _committed_then_cancelled(self, call: _Call, raw: _Raw) -> Cancelled:
        """R9: cancel after the commit boundary — the effect stands, later steps stop."""
        inv = _must(call.invocation)
        attempts = self._attempt(call, raw, "committed", "cancelled after commit")
        problem = Problem(
            kind="cancelled",
            code="cancelled_after_commit",
            message="the call was cancelled after its effect was committed",
            recoverable=False,
            hint="the effect happened; do not repeat it",
        )
        result = self._error_result(inv, problem, "committed", raw, attempts)
        call.life.advance(State.COMMITTED, cancelled=True)
        self._ledger_settle(call, "committed", result)
        message = self._error_message(call, problem, "committed")
        return Cancelled(
            **self._common(call, message, problem=problem, commit="committed", result=result),
            commit_status="committed",
            invocation=inv,
            result=result,
        )

    def _cancelled(self, call: _Call, why: str) -> Cancelled:
        inv = _must(call.invocation)
        problem = Problem(kind="cancelled", code="cancelled", message=why, recoverable=False)
        call.life.advance(State.CANCELLED_BEFORE_COMMIT, reason=why)
        result = self._error_result(inv, problem, "not_committed", None, ())
        self._ledger_settle(call, "failed", result)
        message = self._error_message(call, problem, "not_committed")
        return Cancelled(
            **self._common(call, message, problem=problem, commit="not_committed", result=result),
            commit_status="not_committed",
            invocation=inv,
            result=result,
        )

    def _unknown(self, call: _Call, raw: _Raw, problem: Problem) -> OutcomeUnknown:
        """R9: a write that may have happened. Recorded as such, never as 'not executed'."""
        inv = _must(call.invocation)
        attempts = self._attempt(call, raw, "unknown", problem.code)
        result = self._error_result(inv, problem, "unknown", raw, attempts)
        evidence = raw.error.evidence if isinstance(raw.error, CommitUnknown) else {}
        call.life.advance(State.OUTCOME_UNKNOWN, problem=problem, evidence=evidence)
        self._ledger_settle(call, "unknown", result)
        message = self._error_message(call, problem, "unknown")
        return OutcomeUnknown(
            **self._common(call, message, problem=problem, commit="unknown", result=result),
            problem=problem,
            invocation=inv,
            result=result,
        )

    # -- small shared pieces ----------------------------------------------------

    def _cancel_requested(self, call: _Call) -> bool:
        return call.ctx.cancel is not None and call.ctx.cancel.is_set()

    def _attempt(
        self, call: _Call, raw: _Raw, outcome: CommitStatus | str, detail: str | None
    ) -> tuple[Attempt, ...]:
        attempt = Attempt(
            attempt_id=call.attempt_id,
            number=len(call.attempts) + 1,
            started_at=raw.started_at,
            ended_at=raw.ended_at or raw.started_at,
            outcome=outcome,  # type: ignore[arg-type]
            detail=detail,
        )
        call.attempts.append(attempt)
        call.life.trace.record("attempt", attempt=attempt)
        return tuple(call.attempts)

    def _error_result(
        self,
        inv: Invocation,
        problem: Problem,
        commit: CommitStatus,
        raw: _Raw | None,
        attempts: tuple[Attempt, ...],
    ) -> Result:
        return Result(
            invocation_id=inv.invocation_id,
            status="error",
            error=problem,
            commit_status=commit,
            observed_at=(raw.ended_at if raw is not None else None) or self.clock.now(),
            attempts=attempts,
        )

    def _intent(self, key: LedgerKey, inv: Invocation, tool: RegisteredTool) -> Intent:
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

    def _ledger_settle(
        self,
        call: _Call,
        phase: Phase,
        result: Result | None = None,
        evidence: Mapping[str, object] | None = None,
    ) -> None:
        """Record the call's phase in the ledger (R9: durable before the next step)."""
        if call.ledger_key is None:
            return
        try:
            self.ledger.advance(
                call.ledger_key,
                invocation_id=_must(call.invocation).invocation_id,
                phase=phase,
                now=self.clock.now(),
                result=result,
                evidence=evidence,
            )
        except LedgerError as exc:
            # The outcome stands as observed; the record stays in its last durable
            # phase, and a sweep turns an abandoned 'executing' into 'unknown'.
            call.life.trace.record("ledger_write_failed", phase=phase, code=exc.code)
            if phase == "executing":
                raise

    def _error_message(
        self, call: _Call, problem: Problem, commit: CommitStatus
    ) -> ModelProjection:
        return model_error(
            invocation_id=call.life.trace.invocation_id,
            proposal_id=call.proposal.proposal_id,
            tool=call.tool.spec.ref if call.tool is not None else call.proposal.name,
            problem=problem,
            commit_status=commit,
        )

    def _record_message(self, call: _Call, message: ModelProjection) -> None:
        # R14: the exact bytes sent back to the model.
        call.life.trace.record(
            "tool_message",
            content=message.content,
            is_error=message.is_error,
            truncated=message.truncated,
            cuts=message.cuts,
        )

    def _common(
        self,
        call: _Call,
        message: ModelProjection,
        *,
        problem: Problem | None = None,
        commit: CommitStatus | None = None,
        result: Result | None = None,
        value: JSONValue = None,
        cuts: tuple[Cut, ...] = (),
    ) -> _CommonFields:
        """The fields every outcome has; records the bytes sent back (R14)."""
        self._record_message(call, message)
        return {
            "invocation_id": call.life.trace.invocation_id,
            "proposal_id": call.proposal.proposal_id,
            "tool": call.tool.spec.ref if call.tool is not None else call.proposal.name,
            "path": tuple(call.life.path),
            "trace": call.life.trace,
            "message": message,
            "evidence": partial(
                self._human,
                call,
                value=value,
                problem=problem,
                commit=commit,
                result=result,
                cuts=cuts,
                state=call.life.state,
            ),
        }

    def _human(
        self,
        call: _Call,
        *,
        value: JSONValue,
        problem: Problem | None,
        commit: CommitStatus | None,
        result: Result | None,
        cuts: tuple[Cut, ...],
        state: State,
    ) -> HumanProjection:
        inv = call.invocation
        return HumanProjection(
            invocation_id=call.life.trace.invocation_id,
            tool=call.tool.spec.ref if call.tool is not None else call.proposal.name,
            state=state.value,
            commit_status=commit,
            arguments=None if inv is None else inv.arguments,
            digest=None if inv is None else inv.digest,
            value=value,
            problem=problem,
            external_resource_id=None if result is None else result.external_resource_id,
            attempts=() if result is None else result.attempts,
            cuts=cuts,
            evidence=call.evidence,
        )

    def _injected(self, tool: RegisteredTool) -> Mapping[str, str]:
        if not tool.spec.secrets or self._secrets is None:
            return {}
        out: dict[str, str] = {}
        for name in tool.spec.secrets:
            try:
                out[name] = self._secrets.get(name)
            except KeyError:
                continue
        return out

    def _keep(self, invocation_id: str, tool: str, proposal_id: str, value: JSONValue) -> None:
        with self._lock:
            self._kept[invocation_id] = _Kept(tool=tool, proposal_id=proposal_id, value=value)
            while len(self._kept) > self._kept_max:
                self._kept.popitem(last=False)

    def parked(self) -> Iterable[str]:
        """The invocation ids waiting for confirmation."""
        with self._lock:
            return tuple(self._parked)


def _output_problem(tool: RegisteredTool, value: object) -> Problem | None:
    """R11: the result must satisfy the output schema, or it is rejected.

    (That it is JSON at all is proved when the model projection is encoded.)
    """
    if tool.output is None:
        return None
    try:
        tool.output.validate(value)
    except Rejection as r:
        return Problem(
            kind="output",
            code="output_rejected",
            message=f"the tool's result broke its output contract: {r.problem.message}",
            recoverable=False,
            pointer=r.problem.pointer,
        )
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Preview:
    """What :meth:`Runtime.preview` found: a problem, or the decision the policy would take."""

    problem: Problem | None = None
    arguments: JSONObject | None = field(default=None, hash=False)
    digest: str | None = None
    decision: Literal["allow", "confirm", "deny"] | None = None
    reason: str = ""


def _checked(
    tool: RegisteredTool, arguments: JSONObject, nctx: NormalizationContext
) -> tuple[JSONObject, bytes]:
    """Validate, normalize, re-validate, semantic check, canonical form (R4 to R6).

    Raises :class:`Rejection` for arguments that fail; any other exception is a
    broken normalizer or check, which the callers fail closed.
    """
    spec = tool.spec
    tool.input.validate(arguments)
    if spec.normalizers:
        arguments = normalize(arguments, spec.normalizers, nctx)
        tool.input.validate(arguments)  # normalizers must keep the contract
    if spec.semantic_check is not None:
        problem = spec.semantic_check(arguments, nctx)
        if problem is not None:
            raise Rejection(problem)
    return arguments, canonical_json(arguments)


def _check_failed(spec: ToolSpec, exc: Exception) -> Problem:
    return Problem(
        kind="semantic",
        code="check_failed",
        message=f"{spec.ref} could not check these arguments ({type(exc).__name__})",
        recoverable=False,
    )


def _lookup_failed(exc: Exception) -> Problem:
    return Problem(
        kind="authorization",
        code="resource_lookup_failed",
        message=f"could not determine what the call touches ({type(exc).__name__})",
        recoverable=False,
    )


def _unknown_tool(wanted: str) -> Problem:
    # R17 row 1: no fuzzy matching; a hidden tool is rejected like an unknown one.
    return Problem(
        kind="unknown_tool",
        code="unknown_tool",
        message=f"no tool {wanted} is available in this request",
        recoverable=True,
        hint="call only the tools you were given, by their exact names",
    )


@dataclass(frozen=True, slots=True)
class _Waiting:
    """The same call holds the key and is still running: look again shortly."""

    call: _Call


@dataclass(frozen=True, slots=True)
class _Retry:
    delay: float


class _RolledBack(Exception):  # noqa: N818 - a control-flow signal
    """Leave a transaction so that it rolls back, carrying why."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def _budget(tool: RegisteredTool, ctx: CallContext) -> int:
    if ctx.result_budget is None:
        return tool.spec.result_budget
    return min(tool.spec.result_budget, ctx.result_budget)


def _claim_problem(claim: Claim) -> Problem | None:
    """R8: what a refused idempotency claim tells the model."""
    match claim:
        case KeyReused():
            return Problem(
                kind="idempotency",
                code="key_reused",
                message="this idempotency key was used for different arguments",
                recoverable=False,
                hint="a new call needs a new key",
            )
        case InFlight():
            return Problem(
                kind="idempotency",
                code="outcome_unknown" if claim.phase == "unknown" else "in_progress",
                message=f"the same call ({claim.invocation_id}) is {claim.phase}",
                recoverable=True,
                hint="wait for the earlier call; do not send it again",
            )
        case Expired():
            return Problem(
                kind="idempotency",
                code="key_expired",
                message="this idempotency key's record is past its retention window",
                recoverable=False,
                hint="a new call needs a new key",
            )
        case _:
            return None


def _ledger_problem(exc: LedgerError) -> Problem:
    return Problem(
        kind="execution",
        code="ledger_unavailable",
        message=f"the idempotency ledger could not record the call ({exc.code})",
        recoverable=True,
        hint="try again later",
    )


def _dummy_context(inv: Invocation) -> ToolContext:
    return ToolContext(invocation=inv, attempt=0, secrets={}, idempotency_key=None, deadline_in=0.0)


def _must(value: _T | None) -> _T:
    if value is None:  # pragma: no cover - a bug in the pipeline's ordering
        msg = "pipeline step ran out of order"
        raise AssertionError(msg)
    return value

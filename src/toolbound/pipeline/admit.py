"""Admission: the pure gates, from raw bytes to an authorized invocation (R2 to R6).

::

    parse (R3) → look up in the visible tool set (R2) → validate (R4) → normalize
    and digest (R5) → semantic check (R6) → resources → provenance → authorize (R6)

:func:`judge` runs the gates once, in that order, and either stops at the first that
refuses (:class:`Refusal`) or answers the :class:`Verdict`. :func:`admit` runs it on a
call whose trace records every step and builds the :class:`~.call.Admitted` call;
:func:`preview` runs the very same function with nothing recorded, run or spent
(rate limits are consulted as a recheck).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Literal, NamedTuple

from toolbound._errors import Problem, Rejection
from toolbound._ids import call_ids
from toolbound._lifecycle import Lifecycle
from toolbound._model import Invocation, NormalizationContext
from toolbound._state import State
from toolbound.gates.authorize import AuthzRequest, Deny, authorize
from toolbound.gates.normalize import canonical_json, digest, normalize
from toolbound.gates.parse import parse_arguments
from toolbound.pipeline import endings
from toolbound.pipeline.call import Admitted, Opened
from toolbound.problems import make_problem
from toolbound.trace import Trace

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime

    from toolbound._model import JSONObject, Proposal, Resource, ToolSpec
    from toolbound._outcome import Rejected
    from toolbound.gates.authorize import Allow, Confirm
    from toolbound.pipeline.call import CallContext
    from toolbound.pipeline.env import Env
    from toolbound.provenance import Finding, FlowReport
    from toolbound.registry import RegisteredTool

__all__ = [
    "Preview",
    "Refusal",
    "Verdict",
    "admit",
    "admitted",
    "authorized",
    "judge",
    "open_call",
    "preview",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Preview:
    """What :meth:`Runtime.preview` found: a problem, or the decision the policy would take.

    ``evidence`` is what the policy matched, e.g. the provenance findings: per
    parameter (``pointer``), the value, its concern and the sources it came from.
    """

    problem: Problem | None = None
    arguments: JSONObject | None = field(default=None, hash=False)
    digest: str | None = None
    decision: Literal["allow", "confirm", "deny"] | None = None
    reason: str = ""
    evidence: tuple[Finding, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """The first gate that refused, and what the rejection records."""

    state: State
    problem: Problem
    tool: RegisteredTool | None = None
    evidence: tuple[Finding, ...] | None = None
    data: Mapping[str, object] = field(default_factory=dict)
    arguments: JSONObject | None = None
    digest: str | None = None


class Verdict(NamedTuple):
    """Every gate passed: the normalized call and the policy's allow or confirm.

    A named tuple: one is built for every admitted call and read once, right away.
    """

    tool: RegisteredTool
    arguments: JSONObject
    canonical: bytes
    digest: str
    resources: tuple[Resource, ...]
    flows: FlowReport | None
    decision: Allow | Confirm
    now: datetime


def open_call(env: Env, proposal: Proposal, ctx: CallContext) -> Opened:
    """A new call in PROPOSED, its trace opened with the raw proposal (R14)."""
    invocation_id, trace_id = ctx.invocation_id, ctx.trace_id
    if not invocation_id or not trace_id:
        fresh_invocation, fresh_trace = call_ids()
        invocation_id, trace_id = invocation_id or fresh_invocation, trace_id or fresh_trace
    trace = Trace(
        invocation_id=invocation_id,
        trace_id=trace_id,
        clock=env.clock,
        sinks=env.sinks,
    )
    # A person's correction names the call it replaces (R7, R14); absent otherwise.
    edit = {} if ctx.edited_from is None else {"edited_from": ctx.edited_from.as_json()}
    trace.record(
        "proposal",
        state=State.PROPOSED,
        name=proposal.name,
        version=proposal.version,
        proposal_id=proposal.proposal_id,
        model_call_id=proposal.model_call_id,
        arguments=proposal.arguments,
        visible=ctx.tools.refs,
        # Who proposed it, from the start: a call refused before authorization is
        # still someone's (R14), and a journal keeping it needs the tenant.
        subject={"id": ctx.subject.id, "tenant": ctx.subject.tenant},
        # The caller's trace id (from its traceparent), if it gave one; telemetry
        # joins that trace, or else nests under whatever span is active.
        trace_id=ctx.trace_id,
        **edit,
    )
    return Opened(proposal=proposal, ctx=ctx, life=Lifecycle(trace), started=env.clock.monotonic())


def admit(env: Env, call: Opened) -> Admitted | Rejected:
    """Every gate on ``call``, each recorded in its trace; AUTHORIZED or rejected."""
    return admitted(call, judge(env, call.proposal, call.ctx, life=call.life))


def admitted(call: Opened, verdict: Verdict | Refusal) -> Admitted | Rejected:
    """The gates' answer on ``call``: the refusal's ending, or the call AUTHORIZED."""
    if isinstance(verdict, Refusal):
        return endings.reject(
            call,
            verdict.state,
            verdict.problem,
            tool=verdict.tool,
            evidence=verdict.evidence,
            **verdict.data,
        )
    decision = verdict.decision
    return Admitted(
        proposal=call.proposal,
        ctx=call.ctx,
        life=call.life,
        started=call.started,
        tool=verdict.tool,
        invocation=authorized(call, verdict),
        authorized_at=verdict.now,
        confirm_reason=decision.reason if decision.kind == "confirm" else None,
        flows=verdict.flows,
        evidence=decision.evidence,
    )


def authorized(call: Opened, verdict: Verdict) -> Invocation:
    """The invocation the verdict fixes (R1), with the call moved to AUTHORIZED."""
    ctx, spec, decision = call.ctx, verdict.tool.spec, verdict.decision
    invocation = Invocation(
        invocation_id=call.invocation_id,
        proposal_id=call.proposal.proposal_id,
        model_call_id=call.proposal.model_call_id,
        tool_name=spec.name,
        tool_version=spec.version,
        arguments=verdict.arguments,
        canonical=verdict.canonical,
        digest=verdict.digest,
        subject=ctx.subject,
        granted_capabilities=decision.capabilities,
        resources=verdict.resources,
        # R8: a provider's call id changes every turn, so the default key is the digest.
        idempotency_key=(ctx.idempotency_key or f"tb:{verdict.digest}") if spec.is_write else None,
        deadline=verdict.now + timedelta(seconds=ctx.time_allowed(spec)),
        trace_id=call.life.trace.trace_id,
    )
    call.life.advance(
        State.AUTHORIZED,
        decision=decision.kind,
        reason=decision.reason,
        subject={"id": ctx.subject.id, "tenant": ctx.subject.tenant},
        capabilities=decision.capabilities,
        evidence=decision.evidence,
    )
    return invocation


def preview(env: Env, proposal: Proposal, ctx: CallContext) -> Preview:
    """:func:`judge` with nothing recorded, run or spent."""
    verdict = judge(env, proposal, ctx, life=None, recheck=True)
    if isinstance(verdict, Refusal):
        return Preview(
            problem=verdict.problem,
            arguments=verdict.arguments,
            digest=verdict.digest,
            decision="deny" if verdict.digest is not None else None,
            evidence=verdict.evidence or (),
        )
    return Preview(
        arguments=verdict.arguments,
        digest=verdict.digest,
        decision=verdict.decision.kind,
        reason=verdict.decision.reason,
        evidence=verdict.decision.evidence,
    )


def judge(  # noqa: PLR0911 - one return per gate that can refuse
    env: Env,
    proposal: Proposal,
    ctx: CallContext,
    *,
    life: Lifecycle | None,
    recheck: bool = False,
) -> Verdict | Refusal:
    """Parse, look up, validate, normalize, digest, check and authorize, in order.

    With ``life`` each step is a transition or an event of the call's trace;
    without, nothing is recorded. ``recheck`` consults rate limits without
    spending them.
    """
    try:
        arguments = parse_arguments(proposal.arguments, env.limits)
    except Rejection as r:
        return Refusal(state=State.PARSE_REJECTED, problem=r.problem)
    if life is not None:
        life.advance(State.PARSED, parsed=arguments)
    tool = ctx.tools.lookup(proposal.name, proposal.version)
    if tool is None:
        wanted = proposal.name + (f"@{proposal.version}" if proposal.version else "")
        return Refusal(state=State.VALIDATION_REJECTED, problem=unknown_tool(wanted))
    spec = tool.spec
    now = env.clock.now()
    # Only normalizers and semantic checks read the frame; most tools have neither.
    nctx = (
        NormalizationContext(
            reference_time=ctx.reference_time or now, timezone=ctx.timezone, locale=ctx.locale
        )
        if spec.normalizers or spec.semantic_check is not None
        else None
    )
    try:
        arguments, canonical = checked(tool, arguments, nctx)
    except Rejection as r:
        return Refusal(
            state=State.VALIDATION_REJECTED, problem=r.problem, tool=tool, data={"spec": spec.ref}
        )
    except Exception as exc:  # noqa: BLE001 - a broken normalizer or check fails closed
        _record_exception(life, exc)
        return Refusal(
            state=State.VALIDATION_REJECTED,
            problem=_check_failed(spec, exc),
            tool=tool,
            data={"spec": spec.ref},
        )
    d = digest(
        tenant=ctx.subject.tenant,
        tool_name=spec.name,
        tool_version=spec.version,
        canonical=canonical,
    )
    if life is not None:
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
        return Refusal(state=State.AUTHORIZATION_REJECTED, problem=_lookup_failed(exc), tool=tool)
    flows = _examine(ctx, arguments, life)
    decision = authorize(
        env.policy,
        AuthzRequest(
            subject=ctx.subject,
            spec=spec,
            arguments=arguments,
            resources=resources,
            now=now,
            recheck=recheck,
            provenance=flows,
        ),
    )
    if isinstance(decision, Deny):
        return Refusal(
            state=State.AUTHORIZATION_REJECTED,
            problem=decision.problem,
            tool=tool,
            evidence=decision.evidence,
            arguments=arguments,
            digest=d,
        )
    return Verdict(
        tool=tool,
        arguments=arguments,
        canonical=canonical,
        digest=d,
        resources=resources,
        flows=flows,
        decision=decision,
        now=now,
    )


def checked(
    tool: RegisteredTool, arguments: JSONObject, nctx: NormalizationContext | None
) -> tuple[JSONObject, bytes]:
    """Validate, normalize, re-validate, semantic check, canonical form (R4 to R6).

    ``nctx`` is needed (and only then given) when the tool has normalizers or a
    semantic check. Raises :class:`Rejection` for arguments that fail; any other
    exception is a broken normalizer or check, which the callers fail closed.
    """
    spec = tool.spec
    # Integral numbers where the schema says "integer" come back as ints (R4), so
    # normalizers, checks and the tool see 1, not 1.0; the canonical form is the same.
    arguments = tool.input.validated(arguments)
    if spec.normalizers:
        assert nctx is not None  # noqa: S101 - judge builds it for such a tool
        arguments = normalize(arguments, spec.normalizers, nctx)
        arguments = tool.input.validated(arguments)  # normalizers must keep the contract
    if spec.semantic_check is not None:
        assert nctx is not None  # noqa: S101 - judge builds it for such a tool
        problem = spec.semantic_check(arguments, nctx)
        if problem is not None:
            raise Rejection(problem)
    return arguments, canonical_json(arguments)


def unknown_tool(wanted: str) -> Problem:
    """R17 row 1: no fuzzy matching; a hidden tool is rejected like an unknown one."""
    return make_problem(
        "unknown_tool",
        f"no tool {wanted} is available in this request",
        hint="call only the tools you were given, by their exact names",
    )


def _examine(ctx: CallContext, arguments: JSONObject, life: Lifecycle | None) -> FlowReport | None:
    """Where the argument values came from, when the call carries provenance (R6, R11).

    The report is traced (event ``provenance``). An index that fails yields
    ``None``: flow rules then fail closed.
    """
    index = ctx.provenance
    if index is None:
        return None
    try:
        flows = index.examine(arguments)
    except Exception as exc:  # noqa: BLE001 - an unreadable origin proves nothing
        _record_exception(life, exc)
        return None
    if life is not None:
        life.trace.record(
            "provenance", checked=tuple(t.pointer for t in flows.trails), findings=flows.findings
        )
    return flows


def _record_exception(life: Lifecycle | None, exc: Exception) -> None:
    if life is not None:
        life.trace.record("check_exception", type=type(exc).__name__, text=str(exc))


def _check_failed(spec: ToolSpec, exc: Exception) -> Problem:
    return make_problem(
        "check_failed", f"{spec.ref} could not check these arguments ({type(exc).__name__})"
    )


def _lookup_failed(exc: Exception) -> Problem:
    return make_problem(
        "resource_lookup_failed",
        f"could not determine what the call touches ({type(exc).__name__})",
    )

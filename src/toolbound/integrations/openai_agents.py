"""toolbound under the OpenAI Agents SDK: every tool call through the whole pipeline (R18).

:class:`GuardedTools` turns the tools of a :class:`~toolbound.ToolSet` into the SDK's
``FunctionTool`` objects. An ``Agent`` uses them like any other tool; each call the
model proposes is a :class:`~toolbound.Proposal` run by :meth:`toolbound.Runtime.arun`::

    guarded = GuardedTools(runtime, context)        # a CallContext, or a factory for one
    agent = Agent(name="orders", instructions="...", tools=guarded.tools)

What maps to what:

* **Schemas.** ``params_json_schema`` is the tool's input schema exactly as
  registered. ``strict_json_schema`` is on only when
  :func:`~toolbound.adapters.strict_compatible` finds nothing *and* the SDK's own
  strict conversion leaves the schema as it is; otherwise it is off and the schema
  is still sent unchanged. Validation is the runtime's either way (R4).
* **Arguments.** ``on_invoke_tool`` receives the argument string the model sent,
  which the SDK hands over without parsing it; it becomes ``Proposal.arguments``
  as UTF-8 bytes, so duplicate keys, NaN, truncated JSON… are the runtime's to
  reject (R3). Subject, tenant, deadline and key come from the
  :class:`~toolbound.CallContext`, never from the arguments (R1, R6).
* **Results.** The text the tool returns to the SDK is the outcome's model
  projection, the exact bytes the trace records as sent (R14): a ``tool_result``
  envelope marking the data ``untrusted_tool_data`` when the call was observed,
  a ``tool_error`` envelope (kind, code, recoverable, hint, commit status) for a
  rejection, a failure, an unknown outcome or a cancellation (R11).
* **Confirmation.** Before it runs a call the SDK asks ``needs_approval``;
  toolbound answers from its own gates (validate, normalize, authorize, with
  nothing executed, recorded or spent) and says yes exactly when its policy asks a
  person (R7). The run then stops with ``result.interruptions``.
  :meth:`GuardedTools.pending` shows each one as toolbound sees it, judged from the
  raw argument bytes (normalized arguments, digest, reason, or the problem that
  makes toolbound reject it). :meth:`GuardedTools.approve` records the person's
  decision *on that digest* and approves the SDK item; :meth:`GuardedTools.deny`
  rejects the item with toolbound's ``denied_by_person`` envelope, and nothing
  runs; :meth:`GuardedTools.dismiss` lets the runtime reject a call it rejects
  anyway. When the run resumes the call goes through the runtime again from its
  raw bytes, is parked, and is confirmed with the recorded decision: the runtime
  compares the digests, so a decision never covers changed arguments or another
  call. A call that reaches the runtime needing a person without such a decision
  (an approval given with ``RunState.approve`` alone, an ``always_approve``
  carried over to a new call) is cancelled before it runs.
* **The inbox.** With a runtime that keeps a journal (``Runtime(journal=...)``),
  :meth:`GuardedTools.pending` also parks each call it shows in the runtime, so the
  call is in the journal's inbox (``PendingConfirmation.invocation_id``): a person
  may decide it in the service's console or API instead of through
  :meth:`GuardedTools.approve` / :meth:`GuardedTools.deny`, and the first decision
  recorded wins (compare-and-set, R7). :meth:`GuardedTools.decided` (and
  :meth:`GuardedTools.wait_for_decisions`) read those decisions into the
  ``RunState`` — ``approve``, or ``reject`` with the denial the model is told,
  reason included — and the resumed run continues exactly the call that was
  parked, once. After a restart, given the saved ``RunState`` and the invocation ids
  :meth:`~GuardedTools.pending` gave, the resumed run finds each decided call in the
  journal and runs it there, under the digest the person approved (a denial is
  applied there too, and the model is told it as the call's result).

The SDK is an optional dependency: ``pip install 'toolbound[agents]'``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeAlias

from toolbound._errors import ConfigurationError, ConfirmationMismatch, Problem
from toolbound._model import Proposal
from toolbound._outcome import AwaitingConfirmation
from toolbound.adapters import NameMap
from toolbound.adapters.openai_responses import tool_definitions
from toolbound.gates.confirm import denial
from toolbound.pipeline.runtime import CallContext
from toolbound.registry import Registry, ToolSet
from toolbound.results.encode import model_error

try:
    from agents import FunctionTool
except ImportError as exc:  # pragma: no cover - the extra is installed wherever tests run
    msg = (
        "toolbound.integrations.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'toolbound[agents]'"
    )
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from collections.abc import Callable

    from agents import (
        RunContextWrapper,
        RunResult,
        RunResultStreaming,
        RunState,
        Tool,
        ToolApprovalItem,
    )
    from agents.tool_context import ToolContext as SDKToolContext

    from toolbound._model import JSONObject
    from toolbound._outcome import Outcome
    from toolbound.gates.confirm import Confirmation
    from toolbound.inbox import Decided
    from toolbound.pipeline.inbox import HeldInbox
    from toolbound.pipeline.runtime import Runtime
    from toolbound.registry import RegisteredTool

__all__ = ["ContextFactory", "GuardedTools", "PendingConfirmation"]

logger = logging.getLogger("toolbound.integrations.openai_agents")

ContextFactory: TypeAlias = "Callable[[RunContextWrapper[Any]], CallContext]"
"""Builds the :class:`~toolbound.CallContext` for one SDK run from its run context.

The SDK passes its ``RunContextWrapper``; ``wrapper.context`` is whatever the
application gave ``Runner.run(context=...)`` (its session, its user). The subject
comes from there, never from the model.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingConfirmation:
    """One SDK interruption as toolbound sees it: what a person is asked to approve.

    ``item`` is the SDK's ``ToolApprovalItem``. ``arguments`` are the normalized
    arguments and ``digest`` binds them (R5), both computed from the raw argument
    bytes the model sent; ``reason`` is why the policy asks a person. ``problem`` is
    set instead when toolbound will reject the call whatever a person says (the SDK
    sends calls it cannot parse itself, NaN for one, to approval):
    :meth:`GuardedTools.dismiss` lets the model hear that rejection.
    """

    item: ToolApprovalItem
    call_id: str
    tool: str
    arguments: JSONObject | None
    digest: str | None
    reason: str | None
    problem: Problem | None
    invocation_id: str | None = None
    """With a journal: the call as parked in the journal's inbox, where a person may
    decide it. Keep ``{call_id: invocation_id}`` with a saved ``RunState`` to resume
    it after a restart (:meth:`GuardedTools.decided`)."""


@dataclass(frozen=True, slots=True)
class _Parked:
    """A call :meth:`GuardedTools.pending` parked in the runtime: which one, which bytes."""

    invocation_id: str
    arguments: bytes
    digest: str


@dataclass(frozen=True, slots=True)
class _Decision:
    """A person's approval, kept until the call it names runs (R7)."""

    digest: str | None
    approver: str
    expires_at: datetime
    confirmation: Confirmation | None = None
    """Issued on the call parked in the inbox: the run resumes that very call."""
    journal: str | None = None
    """Decided in the console on a call a previous life parked: run from the journal."""
    arguments: str | None = None
    """An edit's corrected arguments: they run in the call's place, approved."""
    edited: str | None = None
    """The parked call an edit made in the console replaces."""


@dataclass(frozen=True, slots=True)
class _Admission:
    """What the runtime's gates would say about one call, without running it."""

    problem: Problem | None = None
    arguments: JSONObject | None = None
    digest: str | None = None
    confirm: str | None = None
    """The policy's reason to ask a person; ``None`` when it would not ask."""


class _ParkedCalls:
    """The calls :meth:`GuardedTools.pending` parked in a runtime with a journal, by call id.

    Parked, each is in the journal's inbox; a decision reaches it in this process
    (:meth:`resume`) or, after a restart, from the journal (:meth:`from_journal`).
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._calls: dict[str, _Parked] = {}
        self._lock = threading.Lock()

    def inbox(self) -> HeldInbox:
        if self.runtime.inbox is None:
            msg = "decisions are read from a journal: give the runtime one (Runtime(journal=...))"
            raise ConfigurationError(msg, code="no_journal")
        return self.runtime.inbox

    def park(
        self, tool: RegisteredTool, call_id: str, raw: bytes, context: CallContext
    ) -> _Parked | Outcome:
        """The call parked in the runtime, so it waits in the journal's inbox; once per call.

        The outcome instead when the runtime did not park it.
        """
        with self._lock:
            known = self._calls.get(call_id)
        held = set(self.runtime.parked())
        if known is not None and known.arguments == raw and known.invocation_id in held:
            return known
        spec = tool.spec
        proposal = Proposal(
            name=spec.name, version=spec.version, arguments=raw, proposal_id=call_id
        )
        outcome = self.runtime.run(proposal, context)
        if not isinstance(outcome, AwaitingConfirmation):
            return outcome
        parked = _Parked(outcome.invocation_id, raw, outcome.request.digest)
        with self._lock:
            self._calls[call_id] = parked
        return parked

    def invocation_id(self, call_id: str) -> str | None:
        with self._lock:
            parked = self._calls.get(call_id)
        return None if parked is None else parked.invocation_id

    def held(self, call_id: str) -> _Parked | None:
        """The call parked for ``call_id``, if the runtime still holds it."""
        with self._lock:
            parked = self._calls.get(call_id)
        if parked is None or parked.invocation_id not in set(self.runtime.parked()):
            return None
        return parked

    def forget(self, call_id: str) -> None:
        with self._lock:
            self._calls.pop(call_id, None)

    async def resume(
        self, confirmation: Confirmation, call_id: str, arguments: bytes
    ) -> Outcome | None:
        """The parked call continued with the person's decision, if it is this very call."""
        with self._lock:
            parked = self._calls.get(call_id)
        if parked is None or parked.arguments != arguments:
            return None  # R7: another call, or other bytes than those parked
        try:
            outcome = await self.runtime.aconfirm(confirmation)
        except ConfirmationMismatch:
            return None
        self.forget(call_id)
        return outcome

    async def take_edit(self, invocation_id: str, call_id: str) -> Outcome | bool:
        """The console's edit of the parked call claimed, once; applied if held here.

        The corrected call's outcome when the runtime holds the call. ``True`` when a
        previous life parked it and the edit is now this program's to apply (the call
        at hand is admitted afresh and edited); ``False`` when there is no edit left
        to claim (applied already, or claimed elsewhere): the call is not approved.
        """
        inbox = self.inbox()
        if invocation_id not in set(self.runtime.parked()):
            claimed = await self.runtime.off_loop(inbox.journal.claim, invocation_id)
            return claimed is not None and claimed.arguments is not None
        outcome = await inbox.atake_edit(invocation_id)
        if outcome is None:
            return False
        self.forget(call_id)
        return outcome

    async def from_journal(
        self, invocation_id: str, digest: str | None, call_id: str, context: CallContext
    ) -> Outcome:
        """A decided call a previous life of this program parked, run once from the journal."""
        inbox = self.inbox()
        call = await self.runtime.off_loop(inbox.journal.journal.get_call, invocation_id)
        request = {} if call is None else call.body.get("request")
        if (
            call is None
            or call.digest != digest
            or not isinstance(request, dict)
            or request.get("call_id") != call_id
        ):
            # R7: a decision never transfers to another call.
            msg = f"call {call_id!r} is not the journal's {invocation_id}"
            raise ConfigurationError(msg, code="approval_without_confirmation")
        return await inbox.aresume(invocation_id, context)


class GuardedTools:
    """toolbound tools as OpenAI Agents SDK ``FunctionTool`` objects.

    ``runtime`` runs every call; ``context`` is the :class:`~toolbound.CallContext`
    of the request or a :data:`ContextFactory` building one per SDK run. ``tools``
    are the tools to offer (a :class:`~toolbound.ToolSet`, or every tool of a
    :class:`~toolbound.Registry`); by default the context's own tool set, which
    then must be a CallContext. ``strict`` asks for the SDK's strict schema mode
    where the schema allows it. A person's decision recorded by :meth:`approve`
    holds for ``approval_ttl``. ``on_outcome`` receives every call's outcome (with
    its trace and human projection) as it ends.

    Tool names with dots are shown to the model with ``__`` for each dot
    (:class:`~toolbound.adapters.NameMap`).
    """

    def __init__(
        self,
        runtime: Runtime,
        context: CallContext | ContextFactory,
        *,
        tools: ToolSet | Registry | None = None,
        strict: bool = True,
        approval_ttl: timedelta = timedelta(minutes=15),
        on_outcome: Callable[[Outcome], None] | None = None,
    ) -> None:
        if tools is None:
            if not isinstance(context, CallContext):
                msg = "GuardedTools with a context factory needs tools= (a ToolSet or Registry)"
                raise ConfigurationError(msg)
            tools = context.tools
        toolset = tools.toolset() if isinstance(tools, Registry) else tools
        self.runtime = runtime
        self._context = context
        self._approval_ttl = approval_ttl
        self._on_outcome = on_outcome
        self._names = NameMap(toolset.specs)
        self._by_provider_name: dict[str, RegisteredTool] = {}
        self._decisions: dict[str, _Decision] = {}
        self._parked = _ParkedCalls(runtime)
        self._denied: dict[str, datetime] = {}
        """Calls a person refused, by call id, until approval_ttl: a denial is final (R7)."""
        self._lock = threading.Lock()
        self.tools: list[Tool] = [self._function_tool(t, strict=strict) for t in toolset]
        """The tools to give an ``Agent``: one ``FunctionTool`` per toolbound tool."""

    # -- the person's side ------------------------------------------------------

    def pending(self, result: RunResult | RunResultStreaming) -> list[PendingConfirmation]:
        """The interruptions of ``result`` that belong to these tools, as toolbound sees them.

        Each is judged from the raw argument bytes of its call with the context of
        this run: show a person ``tool``, ``arguments`` and ``reason``; their
        decision is bound to ``digest``.
        """
        out: list[PendingConfirmation] = []
        context: CallContext | None = None
        for item in result.interruptions:
            tool = self._by_provider_name.get(item.tool_name or "")
            call_id, raw = _member(item.raw_item, "call_id"), _member(item.raw_item, "arguments")
            if tool is None or not isinstance(call_id, str) or not isinstance(raw, str):
                continue  # another tool's interruption: not toolbound's to judge
            if context is None:
                context = self._call_context(result.context_wrapper)
            seen = self._admission(tool, _utf8(raw), context)
            parked: _Parked | None = None
            if self.runtime.inbox is not None and seen.confirm is not None:
                kept = self._parked.park(tool, call_id, _utf8(raw), context)
                if isinstance(kept, _Parked):
                    parked = kept
                else:
                    self._report(kept)
            out.append(
                PendingConfirmation(
                    item=item,
                    call_id=call_id,
                    tool=tool.spec.ref,
                    arguments=seen.arguments,
                    digest=seen.digest if parked is None else parked.digest,
                    reason=seen.confirm,
                    problem=seen.problem,
                    invocation_id=None if parked is None else parked.invocation_id,
                )
            )
        return out

    def approve(self, state: RunState, pending: PendingConfirmation, *, approver: str) -> None:
        """``approver`` approves the call they were shown, by its digest; approve the SDK item.

        The decision is used once, when the resumed run reaches this call, and only
        if the call's digest is still ``pending.digest`` (R7). Resume with
        ``Runner.run(agent, state)``. A call toolbound rejects (``pending.problem``)
        is not a person's to approve: :meth:`dismiss` it. A call a person denied
        cannot be approved afterwards, not even from an earlier run state: that raises
        :class:`~toolbound.ConfirmationMismatch` (``not_pending``).
        """
        now = self.runtime.clock.now()
        with self._lock:
            self._denied = {k: t for k, t in self._denied.items() if t > now}
            if pending.call_id in self._denied:
                msg = f"call {pending.call_id} was denied; a denial is final"
                raise ConfirmationMismatch(msg, code="not_pending")
        if pending.problem is not None or pending.digest is None:
            why = pending.problem.code if pending.problem is not None else "no digest"
            msg = f"toolbound rejects call {pending.call_id} ({why}): dismiss it"
            raise ConfigurationError(msg, code="not_confirmable")
        held = self._parked.held(pending.call_id)
        if held is not None:
            # Recorded in the journal first: a decision made in the console meanwhile wins.
            confirmation = self.runtime.issue(
                held.invocation_id, digest=pending.digest, approver=approver
            )
            self._keep(pending.call_id, confirmation=confirmation)
        else:
            self._decide(pending.call_id, pending.digest, approver)
        state.approve(pending.item)

    def dismiss(self, state: RunState, pending: PendingConfirmation) -> None:
        """Let the runtime answer a call it rejects (``pending.problem`` is set).

        The SDK stops for approval on its own when it cannot parse the arguments
        (NaN, invalid JSON), and with the arguments it parsed, a duplicate key
        already dropped. The item is approved so that the call reaches the
        runtime, which rejects it from its raw bytes and records it (R3, R14); the
        model gets that rejection. Nothing runs: should the call now pass, it is
        cancelled before execution.
        """
        self._decide(pending.call_id, None, "")
        state.approve(pending.item)

    def deny(
        self,
        state: RunState,
        pending: PendingConfirmation,
        *,
        approver: str,
        reason: str | None = None,
    ) -> None:
        """``approver`` refuses the call: the SDK never runs it; the model is told why.

        ``reason``, the person's words, is quoted to the model as the runtime quotes a
        denial's reason (``denied_by_person``). The denial is final: a later
        :meth:`approve` of the same call is refused.
        """
        with self._lock:
            self._decisions.pop(pending.call_id, None)
            self._denied[pending.call_id] = self.runtime.clock.now() + self._approval_ttl
        held = self._parked.held(pending.call_id)
        if held is not None:
            # The call parked in the inbox ends denied, the journal's compare-and-set first.
            outcome = self.runtime.deny(
                held.invocation_id, digest=held.digest, approver=approver, reason=reason
            )
            self._parked.forget(pending.call_id)
            self._report(outcome)
            state.reject(pending.item, rejection_message=outcome.message.text)
            return
        problem = Problem(
            kind="confirmation",
            code="denied_by_person",
            message=denial(approver, reason),
            recoverable=False,
        )
        # No invocation exists: the call never reached the runtime. The envelope
        # has the runtime's shape, so the model reads every ending one way.
        message = model_error(
            invocation_id="",
            proposal_id=pending.call_id,
            tool=pending.tool,
            problem=problem,
            commit_status="not_committed",
        )
        state.reject(pending.item, rejection_message=message.text)

    # -- decisions made in the console or the API (the journal's inbox) -------------------

    def decided(self, state: RunState, parked: Mapping[str, str] | None = None) -> bool:
        """Whether every interruption of these tools in ``state`` is decided; applied if so.

        The decisions a person made in the service's console or API on the calls
        :meth:`pending` parked, read from the runtime's journal. When all are decided
        each is applied to ``state`` as the SDK's own approval: ``approve``, or
        ``reject`` with the denial the model is told (the person's reason quoted);
        resume with ``Runner.run(agent, state)``. ``False`` while any call still waits
        (``state`` unchanged). ``parked`` maps call ids to the invocation ids
        :meth:`pending` gave, for a program resuming a saved ``RunState`` after a
        restart: each such call is run, or denied, from the journal when the run
        reaches it, once. Reads the journal: call it off an event loop. Raises
        :class:`~toolbound.ConfigurationError` ``no_journal`` for a runtime without one.
        """
        inbox = self._parked.inbox()
        found = []
        for item in state.get_interruptions():
            call_id = _member(item.raw_item, "call_id")
            if item.tool_name not in self._by_provider_name or not isinstance(call_id, str):
                continue
            invocation_id = (parked or {}).get(call_id) or self._parked.invocation_id(call_id)
            got = None if invocation_id is None else inbox.journal.decision(invocation_id)
            if got is None:
                return False
            found.append((item, call_id, got))
        held = set(self.runtime.parked())
        for item, call_id, got in found:
            if got.arguments is not None:
                # An edit: the SDK approves the call, and when the run reaches it the
                # corrected arguments run in its place, through every gate.
                self._keep(call_id, digest=got.digest, approver=got.approver, edit=got)
                state.approve(item)
                continue
            if got.invocation_id not in held:
                # Parked by a previous life of this program: applied from the journal.
                self._keep(call_id, digest=got.digest, approver=got.approver, journal=got)
                state.approve(item)
                continue
            confirmation = inbox.take(got.invocation_id)
            if confirmation is None:
                return False  # claimed meanwhile by another reader: it is theirs to resume
            if confirmation.approved:
                self._keep(call_id, confirmation=confirmation)
                state.approve(item)
            else:
                outcome = self.runtime.confirm(confirmation)
                self._parked.forget(call_id)
                self._report(outcome)
                state.reject(item, rejection_message=outcome.message.text)
        return True

    async def wait_for_decisions(
        self,
        state: RunState,
        timeout: float,
        *,
        parked: Mapping[str, str] | None = None,
        interval: float = 0.5,
    ) -> bool:
        """:meth:`decided`, asked every ``interval`` seconds until ``timeout``; ``False`` then.

        The journal is read off the event loop.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            done = await self.runtime.off_loop(self.decided, state, parked)
            left = deadline - loop.time()
            if done or left <= 0:
                return done
            await asyncio.sleep(min(interval, left))

    def _keep(
        self,
        call_id: str,
        *,
        confirmation: Confirmation | None = None,
        digest: str | None = None,
        approver: str = "",
        journal: Decided | None = None,
        edit: Decided | None = None,
    ) -> None:
        """Keep a decision on a parked call until the resumed run reaches the call."""
        expires_at = self.runtime.clock.now() + self._approval_ttl
        if confirmation is not None:
            digest, approver = confirmation.digest, confirmation.approver
            expires_at = confirmation.expires_at
        decision = _Decision(
            digest=digest,
            approver=approver,
            expires_at=expires_at,
            confirmation=confirmation,
            journal=None if journal is None else journal.invocation_id,
            arguments=None if edit is None else edit.arguments,
            edited=None if edit is None else edit.invocation_id,
        )
        with self._lock:
            self._decisions[call_id] = decision

    def _report(self, outcome: Outcome) -> None:
        if self._on_outcome is not None:
            self._on_outcome(outcome)

    def _decide(self, call_id: str, digest: str | None, approver: str) -> None:
        now = self.runtime.clock.now()
        with self._lock:
            self._decisions = {k: d for k, d in self._decisions.items() if d.expires_at > now}
            self._decisions[call_id] = _Decision(
                digest=digest, approver=approver, expires_at=now + self._approval_ttl
            )

    # -- the SDK's side ---------------------------------------------------------

    def _function_tool(self, tool: RegisteredTool, *, strict: bool) -> FunctionTool:
        spec = tool.spec
        # The same definition the Responses adapter sends (R18), strict only where
        # strict_compatible finds nothing.
        definition = tool_definitions([spec], strict=strict, names=self._names)[0]
        parameters = definition["parameters"]
        self._by_provider_name[definition["name"]] = tool

        async def needs_approval(
            run: RunContextWrapper[Any], params: dict[str, Any], call_id: str
        ) -> bool:
            del call_id
            # The SDK asks with arguments it parsed itself (a duplicate key is already
            # gone); they only decide whether to stop for a person. The call is judged,
            # and run, from its raw bytes in on_invoke_tool.
            seen = self._admission(tool, params, self._call_context(run))
            return seen.confirm is not None

        async def on_invoke_tool(ctx: SDKToolContext[Any], arguments: str) -> str:
            outcome = await self._run(tool, ctx, arguments)
            self._report(outcome)
            return outcome.message.text

        function_tool = self._build(definition, on_invoke_tool, needs_approval)
        if function_tool.strict_json_schema and function_tool.params_json_schema != parameters:
            # The SDK rewrites schemas for strict mode (a $ref beside a description is
            # inlined, for one); the model must see the schema the runtime enforces.
            logger.warning(
                "%s: the SDK's strict mode would rewrite the input schema; sent with "
                "strict_json_schema=False as written",
                spec.ref,
            )
            function_tool = self._build(
                {**definition, "strict": False}, on_invoke_tool, needs_approval
            )
        return function_tool

    @staticmethod
    def _build(
        definition: Mapping[str, Any],
        on_invoke_tool: Callable[[SDKToolContext[Any], str], Any],
        needs_approval: Callable[[RunContextWrapper[Any], dict[str, Any], str], Any],
    ) -> FunctionTool:
        return FunctionTool(
            name=definition["name"],
            description=definition["description"],
            params_json_schema=definition["parameters"],
            on_invoke_tool=on_invoke_tool,
            strict_json_schema=definition["strict"],
            needs_approval=needs_approval,
        )

    async def _run(self, tool: RegisteredTool, ctx: SDKToolContext[Any], arguments: str) -> Outcome:
        """One SDK call through the runtime, confirmed with a recorded decision if it needs one."""
        call_id = ctx.tool_call_id
        with self._lock:
            decision = self._decisions.pop(call_id, None)
        context = self._call_context(ctx)
        if decision is not None and decision.edited is not None:
            edited = await self._parked.take_edit(decision.edited, call_id)
            if not isinstance(edited, bool):
                return edited
            if not edited:
                decision = None  # nothing left to apply: the call is not approved
            # Else parked by a previous life: this call is admitted afresh and edited.
        if decision is not None and decision.journal is not None:
            return await self._parked.from_journal(
                decision.journal, decision.digest, call_id, context
            )
        if decision is not None and decision.confirmation is not None:
            resumed = await self._parked.resume(decision.confirmation, call_id, _utf8(arguments))
            if resumed is not None:
                return resumed
            decision = None  # not the call the person decided: a new call, asked again
        if decision is not None and decision.digest is None:
            # Dismissed: the call may run to its rejection, never further.
            stop = threading.Event()
            stop.set()
            context = replace(context, cancel=stop)
        proposal = Proposal(
            name=tool.spec.name,
            version=tool.spec.version,
            arguments=_utf8(arguments),
            proposal_id=call_id,
        )
        outcome = await self.runtime.arun(proposal, context)
        if outcome.kind == "awaiting_confirmation":
            return await self._confirm(outcome, decision)
        return outcome

    async def _confirm(self, parked: AwaitingConfirmation, decision: _Decision | None) -> Outcome:
        """Resume a parked call with the person's decision; cancel it when there is none."""
        runtime = self.runtime
        if decision is None or decision.digest is None:
            parked.trace.record(
                "confirmation_missing",
                reason="no decision was recorded for this call through GuardedTools.approve",
            )
            return runtime.cancel_pending(parked.invocation_id)
        remaining = decision.expires_at - runtime.clock.now()
        if remaining <= timedelta(0):
            remaining = timedelta(microseconds=-1)  # expired: a zero ttl means the default
        try:
            if decision.arguments is not None:
                return await runtime.aedit(
                    parked.invocation_id,
                    digest=decision.digest,
                    arguments=decision.arguments,
                    approver=decision.approver,
                )
            # The runtime checks the digest the person saw against the parked call's.
            return await runtime.aapprove(
                parked.invocation_id,
                digest=decision.digest,
                approver=decision.approver,
                ttl=remaining,
            )
        except ConfirmationMismatch as exc:
            parked.trace.record("confirmation_refused", code=exc.code, message=str(exc))
            return runtime.cancel_pending(parked.invocation_id)

    def _call_context(self, run: RunContextWrapper[Any]) -> CallContext:
        if isinstance(self._context, CallContext):
            return self._context
        return self._context(run)

    def _admission(
        self, tool: RegisteredTool, arguments: JSONObject | bytes, ctx: CallContext
    ) -> _Admission:
        """The runtime's gates over ``arguments`` (:meth:`Runtime.preview`): nothing spent.

        Only for deciding whether to stop for a person (from the SDK's parsed
        arguments) and for showing a person the call (from its raw bytes, with the
        digest their decision is bound to): the call itself is judged again by
        :meth:`Runtime.arun` when it runs.
        """
        raw = arguments if isinstance(arguments, bytes) else json.dumps(arguments).encode()
        spec = tool.spec
        seen = self.runtime.preview(
            Proposal(name=spec.name, version=spec.version, arguments=raw, proposal_id="preview"),
            ctx,
        )
        return _Admission(
            problem=seen.problem,
            arguments=seen.arguments,
            digest=seen.digest,
            confirm=seen.reason if seen.decision == "confirm" else None,
        )

    def __repr__(self) -> str:
        return f"GuardedTools({[t.name for t in self.tools]!r})"


def _member(item: object, name: str) -> object:
    """A field of an SDK item, which is a model or, restored from JSON, a dict."""
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


def _utf8(text: str) -> bytes:
    # A lone surrogate has no UTF-8 form: keep its code unit so the parser rejects it (R3).
    return text.encode("utf-8", "surrogatepass")

"""Pydantic AI under toolbound: a toolset whose every call goes through the runtime.

::

    from pydantic_ai import Agent, DeferredToolRequests
    from toolbound.integrations.pydantic_ai import ToolboundToolset

    toolset = ToolboundToolset(runtime, lambda ctx: CallContext(subject=ctx.deps.user, tools=tools))
    agent = Agent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])

How Pydantic AI's pieces map onto toolbound's:

* **Arguments.** Pydantic AI hands a tool call's arguments to the tool's
  ``args_validator`` before anything else looks at them. This toolset's validator
  judges nothing: it keeps the text the model produced, byte for byte, and
  :meth:`ToolboundToolset.call_tool` gives exactly those bytes to the runtime as
  ``Proposal.arguments`` (R3: duplicate keys, NaN, bad UTF-8 and truncation are the
  runtime's to reject). Where Pydantic AI has an object instead of text — providers
  whose SDK parses the arguments (Anthropic without streaming, Gemini), ``TestModel``,
  an approval's ``override_args`` — the object is serialized back to JSON; a NaN is
  written as ``NaN`` so the parser still refuses it, but a duplicate key was already
  collapsed by whoever parsed it and cannot be seen here.
* **Subject and context.** The :class:`~toolbound.CallContext` — subject, visible
  tools, timezone — comes from the runtime side: a fixed value or a function of the
  ``RunContext`` (its ``deps``), never from the model. A run ``timeout`` caps the
  call's deadline.
* **Tools.** The context's :class:`~toolbound.ToolSet` is what the model is shown:
  each spec's input schema and description, under a provider-safe name (dots become
  ``__``). Writes are marked ``sequential``, so Pydantic AI runs them one at a time
  in the model's order while reads run beside each other (R16).
* **Results.** The model always reads toolbound's own encoding, the model
  projection's ``content``: returned as the tool's result when the call was observed;
  raised as ``ModelRetry`` when the call was refused for a reason the model can fix
  by writing the call again (parse, schema, normalization, semantic check, unknown
  tool); raised as ``ToolFailed`` for everything else (authorization, a person's
  refusal, failures before or after commit, an unknown outcome, cancellation), which
  the model sees without an invitation to retry.
* **Confirmation.** A call the policy wants confirmed is parked by the runtime and
  raised as ``ApprovalRequired``; the run ends with ``DeferredToolRequests`` whose
  ``metadata[call_id]["toolbound"]`` is the confirmation request (normalized
  arguments, digest, reason, expiry). :meth:`ToolboundToolset.decide` turns a
  person's decisions into ``DeferredToolResults`` bound to those digests (R7). On
  resume the approval continues exactly the call that was parked; if the arguments
  presented then are not the ones parked — an edited history, ``override_args`` —
  they go through every gate as a new call, and a new digest needs a new
  confirmation. A bare ``True`` names no digest and is refused.
* **The inbox.** With a runtime that keeps a journal (``Runtime(journal=...)``), a
  parked call is also in the journal's inbox: a person may decide it in the service's
  console or API instead of through :meth:`ToolboundToolset.decide`.
  :meth:`ToolboundToolset.decided` (and :meth:`ToolboundToolset.wait_for_decisions`)
  read those decisions and give the ``DeferredToolResults`` to resume with, bound to
  the digests the person approved. In the process that parked the calls the
  decisions are applied to the calls the runtime holds; after a restart (the same
  ``holder``, or once the old one's lease has passed) the resumed run finds each
  decided call in the journal and runs it once, under the approved digest.

Raises :class:`ImportError` with an install hint when Pydantic AI is missing.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, assert_never

try:
    from pydantic_ai import (
        ApprovalRequired,
        DeferredToolRequests,
        DeferredToolResults,
        ModelMessage,
        ModelResponse,
        ModelRetry,
        RunContext,
        ToolApproved,
        ToolDefinition,
        ToolDenied,
        ToolFailed,
        ToolReturn,
    )
    from pydantic_ai.tools import AgentDepsT
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = (
        "toolbound.integrations.pydantic_ai needs Pydantic AI: pip install 'toolbound[pydantic-ai]'"
    )
    raise ImportError(msg) from exc

from toolbound._errors import ConfigurationError, ConfirmationMismatch, Problem
from toolbound._model import Proposal
from toolbound._outcome import (
    AwaitingConfirmation,
    Cancelled,
    Failed,
    Observed,
    OutcomeUnknown,
    Rejected,
)
from toolbound.adapters import NameMap, describe
from toolbound.gates.confirm import Confirmation, Edit
from toolbound.pipeline.confirm import Approver
from toolbound.pipeline.runtime import CallContext

if TYPE_CHECKING:
    from toolbound._errors import ProblemKind
    from toolbound._outcome import Outcome
    from toolbound.gates.confirm import ConfirmationRequest
    from toolbound.inbox import Decided
    from toolbound.pipeline.inbox import HeldInbox
    from toolbound.pipeline.runtime import Runtime
    from toolbound.registry import ToolSet

__all__ = ["ContextFactory", "ToolboundToolset"]

ContextFactory = Callable[[RunContext[AgentDepsT]], CallContext]
"""Builds the runtime's view of a request from Pydantic AI's ``RunContext``."""

_ARGUMENTS: Final = "__toolbound_arguments__"
"""The one key of the "validated" arguments this toolset's validator returns."""

_META: Final = "toolbound"
"""The key of toolbound's entry in Pydantic AI metadata (tools, deferred calls, results)."""

# Refusals the model can repair by proposing the call again, differently. The
# others (authorization, a person's no, anything at or after execution) it cannot.
_MODEL_CAN_FIX: Final[frozenset[ProblemKind]] = frozenset(
    {"parse", "unknown_tool", "validation", "normalization", "semantic"}
)


@dataclass(frozen=True, slots=True)
class _Arguments:
    """A tool call's arguments as Pydantic AI had them: the model's text, or an object.

    ``raw`` is ``None`` when an object could not be written as JSON at all.
    """

    raw: bytes | None
    verbatim: bool
    """``True``: the model's own text. ``False``: an object serialized back."""

    @classmethod
    def of_text(cls, text: str | bytes | bytearray) -> _Arguments:
        # A lone surrogate keeps its bytes, so the strict parser rejects it (R3)
        # instead of the encoding failing here.
        raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
        return cls(raw, verbatim=True)

    @classmethod
    def of_object(cls, value: object) -> _Arguments:
        try:
            # allow_nan: a NaN a lax parser let through is written as NaN, which the
            # strict parser refuses, rather than an error here or a silent null.
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
        except (TypeError, ValueError):
            return cls(None, verbatim=False)
        return cls(text.encode("utf-8", "surrogatepass"), verbatim=False)


class _KeepArguments:
    """An ``args_validator`` that validates nothing: it keeps the arguments for the runtime.

    Pydantic AI calls ``validate_json`` with the model's text and ``validate_python``
    with an object; either way the result is one entry that carries them, untouched,
    to :meth:`ToolboundToolset.call_tool`.
    """

    def validate_json(
        self,
        input: str | bytes | bytearray,  # noqa: A002 - the protocol's parameter name
        *,
        allow_partial: bool | str = False,  # noqa: ARG002 - a whole call is kept either way
        **kwargs: Any,  # noqa: ARG002, ANN401 - the protocol's signature
    ) -> dict[str, Any]:
        return {_ARGUMENTS: _Arguments.of_text(input)}

    def validate_python(
        self,
        input: Any,  # noqa: A002, ANN401 - the protocol's parameter name and type
        *,
        allow_partial: bool | str = False,  # noqa: ARG002 - a whole call is kept either way
        **kwargs: Any,  # noqa: ARG002, ANN401 - the protocol's signature
    ) -> dict[str, Any]:
        if isinstance(input, str | bytes | bytearray):
            return {_ARGUMENTS: _Arguments.of_text(input)}
        return {_ARGUMENTS: _Arguments.of_object(input)}


_KEEP_ARGUMENTS: Final = _KeepArguments()


@dataclass(frozen=True, slots=True)
class _Parked:
    """What this toolset saw of a call the runtime parked: which call, which bytes."""

    proposal_id: str
    arguments: bytes
    digest: str


class ToolboundToolset(AbstractToolset[AgentDepsT]):
    """A Pydantic AI toolset that runs every call through a toolbound :class:`~toolbound.Runtime`.

    ``context`` is the request as the runtime knows it: a
    :class:`~toolbound.CallContext`, or a function building one from Pydantic AI's
    ``RunContext`` (called for every tool listing and every call). Its ``tools`` are
    the tools the model is shown and may call; its ``subject`` is who every call runs
    for. ``max_retries`` is Pydantic AI's budget of retry prompts per tool (a call
    the model can fix). ``on_outcome`` receives every call's typed outcome, with its
    trace and human projection. ``dot`` replaces dots in tool names, which providers
    refuse.

    Add ``DeferredToolRequests`` to the agent's ``output_type`` when any call may need
    confirmation, and answer it with :meth:`decide`.
    """

    def __init__(
        self,
        runtime: Runtime,
        context: CallContext | ContextFactory[AgentDepsT],
        *,
        id: str | None = None,  # noqa: A002 - Pydantic AI's name for it
        max_retries: int = 1,
        on_outcome: Callable[[Outcome], None] | None = None,
        dot: str = "__",
    ) -> None:
        self._runtime = runtime
        self._context = context
        self._id = id
        self._max_retries = max_retries
        self._on_outcome = on_outcome
        self._dot = dot
        self._names: dict[tuple[str, ...], NameMap] = {}
        self._parked: dict[str, _Parked] = {}
        self._edits: dict[str, Edit] = {}
        self._lock = threading.Lock()

    @property
    def id(self) -> str | None:
        """The id given at construction, if any (Pydantic AI uses it for durable runs)."""
        return self._id

    # -- Pydantic AI's toolset protocol -----------------------------------------

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        """The context's visible tools, as Pydantic AI tool definitions."""
        tools = self._context_for(ctx).tools
        names = self._name_map(tools)
        listed: dict[str, ToolsetTool[AgentDepsT]] = {}
        for spec in tools.specs:
            name = names.provider_name(spec.name)
            listed[name] = ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=name,
                    description=describe(spec),
                    parameters_json_schema=_plain(spec.input_schema),
                    # R16: writes one at a time, in the model's order.
                    sequential=spec.is_write,
                    metadata={_META: {"tool": spec.ref, "effect": spec.effect}},
                ),
                max_retries=self._max_retries,
                args_validator=_KEEP_ARGUMENTS,
            )
        return listed

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],  # noqa: ARG002 - the name and context say it all
    ) -> ToolReturn[str]:
        """Run one call through the runtime and answer in toolbound's encoding.

        Returns the model projection of an observed call; raises ``ModelRetry`` or
        ``ToolFailed`` carrying it otherwise, and ``ApprovalRequired`` when a person
        must confirm (see the module docstring).
        """
        if ctx.tool_call_id is None:
            msg = "call_tool needs the RunContext of one tool call (its tool_call_id is None)"
            raise ConfigurationError(msg)
        context = self._context_for(ctx)
        carried = tool_args.get(_ARGUMENTS)
        # A hook may have replaced what the validator kept with plain arguments.
        arguments = carried if isinstance(carried, _Arguments) else _Arguments.of_object(tool_args)
        response = _response_of(ctx.messages, ctx.tool_call_id)
        proposal = Proposal(
            name=self._name_map(context.tools).tool_name(name),
            arguments=arguments.raw if arguments.raw is not None else b"",
            proposal_id=ctx.tool_call_id,
            model_call_id=None if response is None else response.provider_response_id,
            received_at=None if response is None else response.timestamp,
        )
        if arguments.raw is None:
            outcome: Outcome = self._runtime.reject(proposal, context, _NOT_JSON)
        elif ctx.tool_call_approved:
            return await self._resume(proposal, context, ctx.tool_call_metadata, arguments)
        else:
            outcome = await self._runtime.arun(proposal, context)
        return self._answer(outcome, proposal, arguments)

    # -- confirmation -----------------------------------------------------------

    def confirmation_requests(
        self, requests: DeferredToolRequests
    ) -> dict[str, ConfirmationRequest]:
        """The runtime's own records of the parked calls in ``requests``, by call id.

        What to show the person deciding: the normalized arguments the call will run
        with, their digest, the reason and the expiry. Calls of other toolsets, and
        calls no longer parked, are left out.
        """
        pending = {r.invocation_id: r for r in self._runtime.pending()}
        found: dict[str, ConfirmationRequest] = {}
        for call in requests.approvals:
            named = _named_request(requests.metadata.get(call.tool_call_id))
            if named is not None and named[0] in pending:
                found[call.tool_call_id] = pending[named[0]]
        return found

    def decide(
        self,
        requests: DeferredToolRequests,
        decisions: Mapping[str, bool],
        *,
        approver: str,
        reasons: Mapping[str, str] | None = None,
        edits: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> DeferredToolResults:
        """A person's decisions on parked calls, as results to resume the run with.

        ``decisions`` maps call ids of ``requests.approvals`` to approve (``True``) or
        deny (``False``). Each decision is recorded by the runtime on the digest in
        the call's ``metadata["toolbound"]`` — the arguments the person was shown —
        by ``approver`` (R7). An approval resumes exactly that call, once; a denial
        ends it at once (``denied_by_person``) and the model is told so in toolbound's
        encoding, with the person's words from ``reasons`` (by call id) where given.
        ``edits`` maps call ids to the person's corrected arguments: each such call is
        approved with them (Pydantic AI's ``ToolApproved(override_args=...)``) and,
        when the run resumes, runs as a new proposal in place of the one shown,
        through every gate again (:meth:`toolbound.Runtime.edit`).
        Raises :class:`~toolbound.ConfigurationError` for a call id that is not a
        toolbound call waiting for confirmation, or an edit of a call denied, and
        :class:`~toolbound.ConfirmationMismatch` when the runtime no longer holds it.
        """
        results = DeferredToolResults()
        edits = edits or {}
        for call_id in [*decisions, *(c for c in edits if c not in decisions)]:
            approved = decisions.get(call_id, True)
            named = _named_request(requests.metadata.get(call_id))
            if named is None or all(c.tool_call_id != call_id for c in requests.approvals):
                msg = f"call {call_id!r} is not a toolbound call waiting for confirmation"
                raise ConfigurationError(msg, code="not_pending")
            invocation_id, digest = named
            results.answered_by[call_id] = approver
            if call_id in edits:
                if not approved:
                    msg = f"call {call_id!r} is denied: a denied call cannot be edited"
                    raise ConfigurationError(msg, code="edit_of_denial")
                self._allow_edit(invocation_id, digest, approver)
                results.approvals[call_id] = ToolApproved(override_args=dict(edits[call_id]))
                edit = {"invocation_id": invocation_id, "digest": digest, "editor": approver}
                results.metadata[call_id] = {_META: {"edit": edit}}
            elif approved:
                confirmation = self._runtime.issue(invocation_id, digest=digest, approver=approver)
                results.approvals[call_id] = ToolApproved()
                results.metadata[call_id] = {_META: {"confirmation": confirmation.as_json()}}
            else:
                reason = None if reasons is None else reasons.get(call_id)
                outcome = self._runtime.deny(
                    invocation_id, digest=digest, approver=approver, reason=reason
                )
                self._forget(invocation_id)
                self._report(outcome)
                results.approvals[call_id] = ToolDenied(outcome.message.text)
        return results

    # -- decisions made in the console or the API (the journal's inbox) -------------------

    def decided(self, requests: DeferredToolRequests) -> DeferredToolResults | None:
        """The results to resume with once every toolbound call in ``requests`` is decided.

        The decisions a person made in the service's console or API, read from the
        runtime's journal; ``None`` while any call still waits. A call the runtime
        holds takes its decision now (once: compare-and-set), as :meth:`decide` would
        record it; a call a previous life of this program parked is run from the
        journal when the run resumes. Reads the journal: call it off an event loop.
        Raises :class:`~toolbound.ConfigurationError` ``no_journal`` for a runtime
        without one.
        """
        inbox = self._runtime.inbox
        if inbox is None:
            msg = "decisions are read from a journal: give the runtime one (Runtime(journal=...))"
            raise ConfigurationError(msg, code="no_journal")
        found = {}
        for call in requests.approvals:
            named = _named_request(requests.metadata.get(call.tool_call_id))
            if named is None:
                continue
            decided = inbox.journal.decision(named[0])
            if decided is None or decided.digest != named[1]:
                return None
            found[call.tool_call_id] = decided
        results = DeferredToolResults()
        held = set(self._runtime.parked())
        for call_id, decided in found.items():
            results.answered_by[call_id] = decided.approver
            if decided.invocation_id not in held:
                # Parked by a previous life of this program: run from the journal on resume.
                named_call = {"invocation_id": decided.invocation_id, "digest": decided.digest}
                results.approvals[call_id] = ToolApproved()
                results.metadata[call_id] = {_META: {"journal": named_call}}
                continue
            if not self._take(inbox, decided, call_id, results):
                return None  # claimed meanwhile by another reader: it is theirs to resume
        return results

    def _take(
        self, inbox: HeldInbox, decided: Decided, call_id: str, results: DeferredToolResults
    ) -> bool:
        """The decision on a held call claimed once and put in ``results``; ``False`` if taken."""
        if decided.arguments is not None:
            edit = _claim_edit(inbox, decided.invocation_id)
            if edit is None:
                return False
            with self._lock:
                self._edits[decided.invocation_id] = edit[0]
            results.approvals[call_id] = ToolApproved(override_args=edit[1])
            results.metadata[call_id] = {_META: {"edit": edit[0].as_json()}}
            return True
        confirmation = inbox.take(decided.invocation_id)
        if confirmation is None:
            return False
        if confirmation.approved:
            results.approvals[call_id] = ToolApproved()
            results.metadata[call_id] = {_META: {"confirmation": confirmation.as_json()}}
        else:
            outcome = self._runtime.confirm(confirmation)
            self._forget(decided.invocation_id)
            self._report(outcome)
            results.approvals[call_id] = ToolDenied(outcome.message.text)
        return True

    async def wait_for_decisions(
        self, requests: DeferredToolRequests, timeout: float, *, interval: float = 0.5
    ) -> DeferredToolResults | None:
        """:meth:`decided`, asked every ``interval`` seconds until ``timeout``; ``None`` then.

        The journal is read off the event loop.
        """
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            results = await self._runtime.off_loop(self.decided, requests)
            left = deadline - asyncio.get_running_loop().time()
            if results is not None or left <= 0:
                return results
            await asyncio.sleep(min(interval, left))

    async def _resume(
        self,
        proposal: Proposal,
        context: CallContext,
        metadata: object,
        arguments: _Arguments,
    ) -> ToolReturn[str]:
        """An approved call: continue the parked call, and only that one, only unchanged."""
        journaled = _named_request({_META: _journal_entry(metadata)})
        if journaled is not None:
            outcome = await _from_journal(self._runtime, journaled, proposal, context)
            return self._answer(outcome, proposal, arguments)
        edit = self._edit_in(metadata)
        if edit is not None:
            # The person's corrected arguments, as Pydantic AI passes them on (R7).
            edited = await self._runtime.aedit(
                edit.invocation_id,
                digest=edit.digest,
                arguments=arguments.raw or b"",
                approver=edit.editor,
            )
            self._forget(edit.invocation_id)
            return self._answer(edited, proposal, arguments)
        confirmation = _confirmation_in(metadata)
        if confirmation is None:
            msg = (
                f"the approval of call {proposal.proposal_id!r} carries no toolbound "
                "confirmation: build DeferredToolResults with ToolboundToolset.decide(), "
                "so that it names the digest the person approved (R7)"
            )
            raise ConfigurationError(msg, code="approval_without_confirmation")
        with self._lock:
            parked = self._parked.get(confirmation.invocation_id)
        if parked is not None and parked.proposal_id != proposal.proposal_id:
            parked = None  # R7: a confirmation never transfers to another call
        if parked is not None and parked.arguments == proposal.arguments:
            resumed = await self._confirm(confirmation)
            if resumed is not None:
                return self._answer(resumed, proposal, arguments)
            waiting = self._still_parked(confirmation.invocation_id)
            if waiting is not None:
                # The decision does not fit the call as parked: ask again.
                raise ApprovalRequired(metadata={_META: waiting.as_json()})
            parked = None
        # Not the bytes that were parked: the call presented now is a new call and
        # passes every gate; changed arguments give a new digest (R7).
        fresh = await self._runtime.arun(proposal, context)
        if (
            parked is not None
            and isinstance(fresh, AwaitingConfirmation)
            and fresh.request.digest == parked.digest
        ):
            # The same call written differently (spacing, key order, an object
            # serialized back): the person approved this digest, so the parked call runs.
            resumed = await self._confirm(confirmation)
            if resumed is not None:
                self._runtime.cancel_pending(fresh.invocation_id)
                return self._answer(resumed, proposal, arguments)
        return self._answer(fresh, proposal, arguments)

    async def _confirm(self, confirmation: Confirmation) -> Outcome | None:
        """The parked call resumed with ``confirmation``; ``None`` if it fits no parked call."""
        try:
            outcome = await self._runtime.aconfirm(confirmation)
        except ConfirmationMismatch:
            return None
        self._forget(confirmation.invocation_id)
        return outcome

    def _still_parked(self, invocation_id: str) -> ConfirmationRequest | None:
        return next((r for r in self._runtime.pending() if r.invocation_id == invocation_id), None)

    def _remember(self, outcome: AwaitingConfirmation, proposal: Proposal) -> None:
        parked = set(self._runtime.parked())
        with self._lock:
            # Calls the runtime no longer holds (decided elsewhere, expired) are dropped.
            for invocation_id in [i for i in self._parked if i not in parked]:
                del self._parked[invocation_id]
            self._parked[outcome.invocation_id] = _Parked(
                proposal_id=proposal.proposal_id,
                arguments=proposal.arguments,
                digest=outcome.request.digest,
            )

    def _allow_edit(self, invocation_id: str, digest: str, editor: str) -> None:
        """Check the edit by the desk's rules now; honour it once, when the run resumes."""
        who = Approver(name=editor)
        self._runtime.desk.check(
            invocation_id, digest=digest, approver=who, at=self._runtime.clock.now()
        )
        with self._lock:
            self._edits[invocation_id] = Edit(
                invocation_id=invocation_id, digest=digest, editor=editor
            )

    def _edit_in(self, metadata: object) -> Edit | None:
        """The edit :meth:`decide` recorded that an approval's metadata names, taken once.

        Only an edit recorded by this toolset counts: metadata alone never makes one.
        """
        entry = _toolbound_entry(metadata)
        named = None if entry is None else entry.get("edit")
        if not isinstance(named, Mapping):
            return None
        with self._lock:
            recorded = self._edits.get(str(named.get("invocation_id")))
            if recorded is None or recorded.as_json() != dict(named):
                msg = "this edit was not recorded by this toolset's decide(): ask again"
                raise ConfigurationError(msg, code="edit_not_recorded")
            del self._edits[recorded.invocation_id]
        return recorded

    def _forget(self, invocation_id: str) -> None:
        with self._lock:
            self._parked.pop(invocation_id, None)

    # -- outcomes → what the model reads ---------------------------------------------

    def _answer(
        self, outcome: Outcome, proposal: Proposal, arguments: _Arguments
    ) -> ToolReturn[str]:
        """The model projection as Pydantic AI's result, retry or failure (R11)."""
        self._report(outcome)
        text = outcome.message.text
        match outcome:
            case Observed():
                return ToolReturn(
                    text,
                    metadata={
                        _META: {
                            "invocation_id": outcome.invocation_id,
                            "tool": outcome.tool,
                            "state": outcome.state.value,
                            "replayed_from": outcome.replayed_from,
                            "arguments": "verbatim" if arguments.verbatim else "serialized",
                        }
                    },
                )
            case AwaitingConfirmation():
                self._remember(outcome, proposal)
                raise ApprovalRequired(metadata={_META: outcome.request.as_json()})
            case Rejected():
                problem = outcome.problem
                if problem.recoverable and problem.kind in _MODEL_CAN_FIX:
                    raise ModelRetry(text)
                raise ToolFailed(text)
            case Failed() | OutcomeUnknown() | Cancelled():
                raise ToolFailed(text)
            case _:  # pragma: no cover - the union is closed
                assert_never(outcome)

    def _report(self, outcome: Outcome) -> None:
        if self._on_outcome is not None:
            self._on_outcome(outcome)

    # -- small pieces -------------------------------------------------------------

    def _context_for(self, ctx: RunContext[AgentDepsT]) -> CallContext:
        context = self._context if isinstance(self._context, CallContext) else self._context(ctx)
        remaining = ctx.remaining_time()
        if remaining is None:
            return context
        # R9: the deadline is the earlier of the tool's and the request's.
        timeout = remaining if context.timeout is None else min(remaining, context.timeout)
        return replace(context, timeout=timeout)

    def _name_map(self, tools: ToolSet) -> NameMap:
        key = tuple(spec.name for spec in tools.specs)
        names = self._names.get(key)
        if names is None:
            names = self._names[key] = NameMap(key, dot=self._dot)
        return names


_NOT_JSON: Final = Problem(
    kind="parse",
    code="not_json",
    message="the arguments Pydantic AI passed on cannot be written as JSON",
    recoverable=False,
)


def _plain(schema: Mapping[str, object]) -> dict[str, Any]:
    """A JSON-shaped deep copy of ``schema``, as Pydantic AI's tool definitions hold."""
    copied: dict[str, Any] = json.loads(json.dumps(schema, default=_jsonable))
    return copied


def _jsonable(value: object) -> object:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    msg = f"a schema holds a {type(value).__name__}, which is not JSON"
    raise ConfigurationError(msg)


def _response_of(messages: list[ModelMessage], call_id: str) -> ModelResponse | None:
    """The model response that made the call ``call_id``, searched from the newest."""
    for message in reversed(messages):
        if isinstance(message, ModelResponse) and any(
            part.tool_call_id == call_id for part in message.tool_calls
        ):
            return message
    return None


async def _from_journal(
    runtime: Runtime, named: tuple[str, str], proposal: Proposal, context: CallContext
) -> Outcome:
    """A decided call a previous life of this program parked, run once from the journal."""
    inbox = runtime.inbox
    if inbox is None:
        msg = "this approval names a call in a journal: give the runtime one"
        raise ConfigurationError(msg, code="no_journal")
    call = await runtime.off_loop(inbox.journal.journal.get_call, named[0])
    request = {} if call is None else call.body.get("request")
    if (
        call is None
        or call.digest != named[1]
        or not isinstance(request, dict)
        or request.get("call_id") != proposal.proposal_id
    ):
        # R7: a decision never transfers to another call.
        msg = f"call {proposal.proposal_id!r} is not the journal's {named[0]}"
        raise ConfigurationError(msg, code="approval_without_confirmation")
    return await inbox.aresume(named[0], context)


def _claim_edit(inbox: HeldInbox, invocation_id: str) -> tuple[Edit, dict[str, Any]] | None:
    """The console's edit of a held call, claimed once: the edit and its corrected arguments.

    Pydantic AI's own way: the call is approved with the corrected arguments
    (``override_args``) and runs as a new proposal in the shown one's place
    (:meth:`toolbound.Runtime.edit`), as an edit passed to ``decide`` does.
    """
    claimed = inbox.journal.claim(invocation_id)
    corrected = None if claimed is None else json.loads(claimed.arguments or "null")
    if claimed is None or not isinstance(corrected, dict):
        return None
    edit = Edit(invocation_id=invocation_id, digest=claimed.digest, editor=claimed.approver)
    return edit, corrected


def _toolbound_entry(metadata: object) -> Mapping[str, object] | None:
    if not isinstance(metadata, Mapping):
        return None
    entry = metadata.get(_META)
    return entry if isinstance(entry, Mapping) else None


def _journal_entry(metadata: object) -> object:
    """The call :meth:`ToolboundToolset.decided` named to run from the journal, if any."""
    entry = _toolbound_entry(metadata)
    return None if entry is None else entry.get("journal")


def _named_request(metadata: object) -> tuple[str, str] | None:
    """``(invocation_id, digest)`` of a deferred call's confirmation request, if it is ours."""
    entry = _toolbound_entry(metadata)
    if entry is None:
        return None
    invocation_id, digest = entry.get("invocation_id"), entry.get("digest")
    if not isinstance(invocation_id, str) or not isinstance(digest, str):
        return None
    return invocation_id, digest


def _confirmation_in(metadata: object) -> Confirmation | None:
    """The confirmation :meth:`ToolboundToolset.decide` put in an approval's metadata.

    Rebuilt from its JSON so the results may be stored between runs; the runtime
    accepts it only if it is exactly a record it issued (R7).
    """
    entry = _toolbound_entry(metadata)
    record = None if entry is None else entry.get("confirmation")
    if not isinstance(record, Mapping):
        return None
    try:
        return Confirmation(
            confirmation_id=str(record["confirmation_id"]),
            invocation_id=str(record["invocation_id"]),
            digest=str(record["digest"]),
            approved=record["approved"] is True,
            approver=str(record["approver"]),
            at=datetime.fromisoformat(str(record["at"])),
            expires_at=datetime.fromisoformat(str(record["expires_at"])),
        )
    except (KeyError, ValueError):
        return None

"""toolbound under LangGraph / LangChain: a guarded tool node, tools, confirmations.

:class:`ToolboundNode` is a drop-in for ``langgraph.prebuilt.ToolNode``. It takes the
graph's messages state, runs every tool call of the last ``AIMessage`` through the whole
pipeline (parse, validate, normalize, digest, authorize, confirm, execute, encode) and
answers each call with one ``ToolMessage``::

    from toolbound.integrations.langgraph import ToolboundNode, tool_schemas, tools_condition

    model = chat_model.bind_tools(tool_schemas(toolset))        # toolbound's own schemas
    graph.add_node("tools", ToolboundNode(runtime, context))    # context: runtime side
    graph.add_conditional_edges("agent", tools_condition)       # routes invalid calls too

What maps to what:

============================================  =============================================
LangChain / LangGraph                         toolbound
============================================  =============================================
``AIMessage.tool_calls[i]``                   a :class:`~toolbound.Proposal`; its bytes are
                                              the provider's raw argument string where
                                              LangChain kept one (below), else the parsed
                                              dict re-serialized
``AIMessage.invalid_tool_calls[i]``           refused (``Runtime.reject``), never repaired
                                              or run; the strict parser's reason when it
                                              has one, else ``invalid_tool_call``
``finish_reason`` ``length`` and kin          every call of the message refused as
                                              ``incomplete_call`` (R15)
the graph's config                            the :class:`~toolbound.CallContext` (subject,
                                              tool set) through a :data:`ContextFactory`;
                                              nothing in the arguments can change it
``ToolMessage`` ``content``                   the exact model projection toolbound encoded
                                              (``"trust": "untrusted_tool_data"`` on data)
``ToolMessage`` ``status``                    ``"error"`` for every error envelope
                                              (rejected, failed, outcome unknown,
                                              cancelled), else ``"success"``
``ToolMessage`` ``artifact``                  ``{"toolbound": {...}}``: invocation id,
                                              outcome kind, state, commit status, digest,
                                              replay source and where the argument bytes
                                              came from; never sent to the model
``interrupt()`` / ``Command(resume=...)``     :class:`~toolbound.AwaitingConfirmation`
                                              and the person's decision on its digest (R7)
============================================  =============================================

**Where the raw argument bytes survive.** LangChain parses every call's arguments
into a dict with ``json.loads`` (duplicate keys collapse to the last, ``NaN`` is
accepted) or, for streamed chunks, ``parse_partial_json`` (a truncated object is
closed and accepted). The strict parser (R3) must see the model's own bytes, so the
node looks for them, per call id, in:

* ``additional_kwargs["tool_calls"][i]["function"]["arguments"]`` (Chat Completions
  shape, as ``langchain-openai`` and others keep it, streamed or not);
* ``AIMessageChunk.tool_call_chunks`` with an ``index`` (a streamed, aggregated
  message still held as a chunk; LangGraph's ``add_messages`` turns chunks into
  messages and drops these);
* content blocks: ``tool_use`` with ``partial_json`` (a streamed Anthropic message),
  ``function_call`` with ``arguments`` (the Responses API), ``tool_call_chunk``.

When none holds the call, only the parsed dict exists (a non-streamed Anthropic
message, a hand-built ``AIMessage``): it is re-serialized, ``NaN`` included so that
the parser still refuses it, but a duplicate key can no longer be seen. The
``artifact`` says which happened (``arguments_source``: ``raw``, ``parsed``, or
``edited`` when the parsed arguments no longer match the raw ones because the
application changed the call in the graph state, whose edit then wins).

**Confirmations.** A call the policy marks ``confirm`` pauses the graph with one
``interrupt()`` whose value lists every such call of the message, each with the
digest of its normalized arguments (:data:`CONFIRMATION`). Resume with
``Command(resume=approve(value, approver=...))`` (or :func:`deny`): each decision names
the call id, the digest and the subject the person saw. LangGraph re-runs the node on
resume, so each call is admitted again from the checkpointed message through every
gate; a decision executes a call only when the call, as it is now, still has that
digest and subject.
Changed arguments (a state edit, a replayed answer) give another digest: that call
does not run and the graph pauses again to ask about the new digest. Re-running the
node also re-runs the message's other calls: writes are replayed from the idempotency
ledger, not executed twice; reads run again. A checkpointer is required, and with a
durable checkpointer the ledger should be durable too (SQLite or PostgreSQL).

**The inbox.** With a runtime that keeps a journal (``Runtime(journal=...)``), a
paused call stays parked, in the journal's inbox: a person may decide it in the
service's console or API. :func:`decided` (and :func:`wait_for_decisions`) read those
decisions into the resume value, each naming the invocation it was made on; the
resumed pass applies it to that call, once (compare-and-set), and closes its own copy.
After a restart (the same ``holder``, or once the old one's lease has passed) the call
is run from the journal, under the digest the person approved.

Limits: the node reads messages state (a dict, a list of messages, or an object with
the messages attribute), not ``Send`` payloads of single tool calls; a call's
confirmation window starts when the graph resumes, since the call is admitted afresh
then; calls confirmed after a pause run after the message's other calls.
:class:`ToolboundTool` (from :func:`as_tools`) runs toolbound's pipeline inside any
LangChain tool-calling loop, but sees only the parsed dict and never the invalid calls:
use the node where the raw bytes matter.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypeAlias, assert_never, cast

try:
    from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
    from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
    from langchain_core.tools import BaseTool, ToolException
    from langgraph.types import Interrupt, interrupt
    from pydantic import ConfigDict, PrivateAttr, with_config
    from typing_extensions import TypedDict
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = (
        "toolbound.integrations.langgraph needs LangGraph and LangChain: "
        "pip install 'toolbound[langgraph]'"
    )
    raise ImportError(msg) from exc

from toolbound._errors import ConfigurationError, Problem, Rejection
from toolbound._model import Proposal
from toolbound._outcome import (
    AwaitingConfirmation,
    Cancelled,
    Failed,
    Observed,
    OutcomeUnknown,
    Rejected,
)
from toolbound.adapters import _parameters, describe
from toolbound.adapters.openai_chat import tool_definitions
from toolbound.batch import arun_batch, run_batch
from toolbound.gates.parse import parse_arguments
from toolbound.registry import ToolSet

if TYPE_CHECKING:
    from toolbound._model import CommitStatus, ToolSpec
    from toolbound._outcome import Outcome
    from toolbound.adapters import NameMap
    from toolbound.adapters.openai_chat import ToolDefinition
    from toolbound.pipeline.inbox import HeldInbox
    from toolbound.pipeline.runtime import CallContext, Runtime

__all__ = [
    "CONFIRMATION",
    "Answer",
    "ArgumentSource",
    "ContextFactory",
    "Decision",
    "ToolboundNode",
    "ToolboundTool",
    "approve",
    "as_tools",
    "decided",
    "deny",
    "edit",
    "tool_schemas",
    "tools_condition",
    "wait_for_decisions",
]

CONFIRMATION: Literal["toolbound.confirmation"] = "toolbound.confirmation"
"""The ``type`` of every interrupt value toolbound raises: calls waiting for a person."""

ContextFactory: TypeAlias = "Callable[[RunnableConfig], CallContext]"
"""Builds the request's :class:`~toolbound.CallContext` from the graph's config.

The subject belongs to the runtime side: read it from ``config["configurable"]``
(set by whoever invokes the graph) or from ``langgraph.runtime.get_runtime().context``,
never from the model's messages.
"""

ArgumentSource = Literal["raw", "parsed", "edited"]
"""Where a call's argument bytes came from: the provider's own string, the parsed dict
re-serialized, or the parsed dict re-serialized because the application changed it."""

# Provider stop reasons that say the output may have been cut short: the calls of
# such a message are not the model's final word (R15). Other providers' words for a
# normal end differ ("STOP", "end_turn", "tool_calls"), so this lists the bad ones.
_CUT_SHORT = frozenset(
    {
        "length",
        "max_tokens",
        "MAX_TOKENS",
        "content_filter",
        "refusal",
        "pause_turn",
        "model_context_window_exceeded",
        "incomplete",
    }
)


@with_config(ConfigDict(strict=True, extra="forbid"))
class Decision(TypedDict):
    """A person's decision on one call, naming what they were shown of it.

    The call's id, the digest of its normalized arguments, and the subject it runs
    for: the decision applies to that call only while all three still hold. A denial
    may carry the person's ``reason``, which the model is told (``denied_by_person``).
    An approval may carry corrected ``arguments`` (JSON text, :func:`edit`): the
    corrected call then runs in the shown call's place, through every gate again.
    """

    call_id: str
    digest: str
    subject: str
    approved: bool
    approver: str
    reason: NotRequired[str]
    arguments: NotRequired[str]
    invocation_id: NotRequired[str]
    """The call as the pause parked it: with a journal, the one the decision resumes."""


@with_config(ConfigDict(strict=True, extra="forbid"))
class Answer(TypedDict):
    """The resume value for a toolbound confirmation: one decision per call decided.

    Sent as ``Command(resume=answer)``. LangGraph checks it against this schema before
    the node sees it: a malformed answer raises pydantic's ValidationError, nothing is
    saved, and the interrupt can be answered again.
    """

    decisions: list[Decision]


def approve(
    pending: Interrupt | Mapping[str, object],
    *,
    approver: str,
    calls: Iterable[str] | None = None,
) -> Answer:
    """Approve the calls a :data:`CONFIRMATION` interrupt showed (all, or ``calls`` by id).

    Each decision copies the digest from what was shown, so it approves exactly those
    arguments and nothing they may have become since.
    """
    return _answer(pending, approver=approver, approved=True, calls=calls)


def edit(
    pending: Interrupt | Mapping[str, object],
    *,
    approver: str,
    arguments: Mapping[str, Mapping[str, object] | str],
) -> Answer:
    """Approve the calls in ``arguments`` (by call id) with the person's corrected arguments.

    Each corrected call is a new proposal in place of the one shown: parsed,
    validated, normalized, digested and authorized again, its trace naming the call
    it replaces and the editor (:meth:`toolbound.Runtime.edit`). ``arguments`` maps a
    call id to an object, or to JSON text taken byte for byte.
    """
    answer = _answer(pending, approver=approver, approved=True, calls=arguments)
    for decision in answer["decisions"]:
        given = arguments[decision["call_id"]]
        decision["arguments"] = given if isinstance(given, str) else json.dumps(given)
    return answer


def deny(
    pending: Interrupt | Mapping[str, object],
    *,
    approver: str,
    reason: str | None = None,
    calls: Iterable[str] | None = None,
) -> Answer:
    """Refuse the calls a :data:`CONFIRMATION` interrupt showed (all, or ``calls`` by id).

    ``reason``, the person's words, is traced with each denial and told to the model.
    """
    answer = _answer(pending, approver=approver, approved=False, calls=calls)
    if reason is not None:
        for decision in answer["decisions"]:
            decision["reason"] = reason
    return answer


def _answer(
    pending: Interrupt | Mapping[str, object],
    *,
    approver: str,
    approved: bool,
    calls: Iterable[str] | None,
) -> Answer:
    wanted = None if calls is None else set(calls)
    decisions: list[Decision] = []
    for r in _requests(pending):
        if wanted is not None and r["call_id"] not in wanted:
            continue
        decision: Decision = {
            "call_id": r["call_id"],
            "digest": r["digest"],
            "subject": r["subject"]["id"],
            "approved": approved,
            "approver": approver,
        }
        if isinstance(r.get("invocation_id"), str):
            decision["invocation_id"] = r["invocation_id"]
        decisions.append(decision)
    return {"decisions": decisions}


def _requests(pending: Interrupt | Mapping[str, object]) -> list[Mapping[str, Any]]:
    """The calls a :data:`CONFIRMATION` interrupt showed, as its value lists them."""
    value = pending.value if isinstance(pending, Interrupt) else pending
    if not isinstance(value, Mapping) or value.get("type") != CONFIRMATION:
        msg = "not a toolbound confirmation interrupt"
        raise ConfigurationError(msg, code="not_a_confirmation")
    return cast("list[Mapping[str, Any]]", value.get("requests") or [])


def decided(runtime: Runtime, pending: Interrupt | Mapping[str, object]) -> Answer | None:
    """The answer to resume with once a person decided every call ``pending`` showed.

    The decisions made in the service's console or API on the calls the pause parked,
    read from ``runtime``'s journal (``Runtime(journal=...)``); ``None`` while any call
    still waits. Resume with ``Command(resume=answer)``: the node applies each
    decision to the very call the person decided, once — the call the runtime holds,
    or after a restart the call its previous life parked, run from the journal under
    the approved digest. A denial carries the person's reason. Reads the journal:
    call it off an event loop. Raises :class:`~toolbound.ConfigurationError`
    ``no_journal`` for a runtime without one.
    """
    inbox = _inbox(runtime)
    decisions: list[Decision] = []
    for r in _requests(pending):
        invocation_id = r.get("invocation_id")
        found = (
            None if not isinstance(invocation_id, str) else inbox.journal.decision(invocation_id)
        )
        if found is None or found.digest != r["digest"]:
            return None
        decision: Decision = {
            "call_id": r["call_id"],
            "digest": found.digest,
            "subject": r["subject"]["id"],
            "approved": found.approved,
            "approver": found.approver,
            "invocation_id": found.invocation_id,
        }
        if found.reason is not None and not found.approved:
            decision["reason"] = found.reason
        if found.arguments is not None:
            # An edit: the person approved corrected arguments in the call's place.
            decision["arguments"] = found.arguments
        decisions.append(decision)
    return {"decisions": decisions}


async def wait_for_decisions(
    runtime: Runtime,
    pending: Interrupt | Mapping[str, object],
    timeout: float,
    *,
    interval: float = 0.5,
) -> Answer | None:
    """:func:`decided`, asked every ``interval`` seconds until ``timeout``; ``None`` then.

    The journal is read off the event loop.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        answer = await runtime.off_loop(decided, runtime, pending)
        left = deadline - loop.time()
        if answer is not None or left <= 0:
            return answer
        await asyncio.sleep(min(interval, left))


def _inbox(runtime: Runtime) -> HeldInbox:
    if runtime.inbox is None:
        msg = "decisions are read from a journal: give the runtime one (Runtime(journal=...))"
        raise ConfigurationError(msg, code="no_journal")
    return runtime.inbox


def tools_condition(
    state: Mapping[str, object] | Sequence[BaseMessage] | object,
    messages_key: str = "messages",
) -> Literal["tools", "__end__"]:
    """Route to ``"tools"`` when the last message holds tool calls, valid or invalid.

    ``langgraph.prebuilt.tools_condition`` looks at ``tool_calls`` only, so a message
    whose every call failed to parse ends the graph with those calls unanswered; this
    one sends them to the node, which refuses each with a ToolMessage.
    """
    messages = _messages(state, messages_key)
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage) and (last.tool_calls or last.invalid_tool_calls):
        return "tools"
    return "__end__"


def tool_schemas(
    tools: ToolSet | Iterable[ToolSpec], *, strict: bool = True, names: NameMap | None = None
) -> list[ToolDefinition]:
    """The tools for ``chat_model.bind_tools(...)``: toolbound's schemas, as written.

    OpenAI-format definitions (``bind_tools`` passes them through unchanged and other
    providers' integrations convert them): each ``parameters`` is the tool's own
    ``input_schema`` and ``strict`` is set only where the schema allows it (see
    :func:`toolbound.adapters.openai_chat.tool_definitions`).
    """
    specs = tools.specs if isinstance(tools, ToolSet) else tuple(tools)
    return tool_definitions(specs, strict=strict, names=names)


# -- the node ---------------------------------------------------------------------------


class ToolboundNode(Runnable[object, object]):
    """A LangGraph node that runs the last ``AIMessage``'s tool calls through toolbound.

    A drop-in for ``langgraph.prebuilt.ToolNode``: it reads ``state[messages_key]`` (or a
    list of messages) and returns ``{messages_key: [ToolMessage, ...]}`` (or the list),
    one message per call, valid or invalid, paired by call id. ``context`` is the
    :class:`~toolbound.CallContext` for every run, or a :data:`ContextFactory` given the
    graph's config. Calls run as :func:`~toolbound.run_batch` runs them (R16): reads
    concurrently up to ``concurrency``, writes one at a time in the model's order.
    ``names`` maps provider tool names back when the schemas were sent through a
    :class:`~toolbound.adapters.NameMap`.
    """

    def __init__(
        self,
        runtime: Runtime,
        context: CallContext | ContextFactory,
        *,
        name: str = "tools",
        messages_key: str = "messages",
        names: NameMap | None = None,
        concurrency: int = 4,
    ) -> None:
        self.name = name
        self.runtime = runtime
        self._context = context
        self._messages_key = messages_key
        self._names = names
        self._concurrency = concurrency

    def invoke(
        self,
        input: object,  # noqa: A002 - the name Runnable gives it
        config: RunnableConfig | None = None,
        **kwargs: object,  # noqa: ARG002 - Runnable passes options the node does not use
    ) -> object:
        """Answer every tool call of the last ``AIMessage`` (may pause for a person)."""
        calls, ctx, outcomes = self._start(input, config)
        todo = [i for i, o in enumerate(outcomes) if o is None]
        batch = run_batch(
            self.runtime, [calls[i].proposal for i in todo], ctx, concurrency=self._concurrency
        )
        for i, outcome in zip(todo, batch.outcomes, strict=True):
            outcomes[i] = outcome
        done = _settle(self.runtime, _all(outcomes), ctx)
        return self._output(input, calls, done)

    async def ainvoke(
        self,
        input: object,  # noqa: A002 - the name Runnable gives it
        config: RunnableConfig | None = None,
        **kwargs: object,  # noqa: ARG002 - Runnable passes options the node does not use
    ) -> object:
        """:meth:`invoke` for async graphs: async tools run on the graph's loop."""
        calls, ctx, outcomes = self._start(input, config)
        todo = [i for i, o in enumerate(outcomes) if o is None]
        batch = await arun_batch(
            self.runtime, [calls[i].proposal for i in todo], ctx, concurrency=self._concurrency
        )
        for i, outcome in zip(todo, batch.outcomes, strict=True):
            outcomes[i] = outcome
        done = await _asettle(self.runtime, _all(outcomes), ctx)
        return self._output(input, calls, done)

    def _start(
        self, state: object, config: RunnableConfig | None
    ) -> tuple[list[_Call], CallContext, list[Outcome | None]]:
        """The message's calls, the request's context, and the calls refused outright.

        Refusals (invalid or incomplete calls, R3 and R15) go through
        :meth:`~toolbound.Runtime.reject`, so they are traced like any rejection.
        """
        calls = _calls(self._last_ai(state), self._names)
        ctx = self._context_for(ensure_config(config))
        refused: list[Outcome | None] = [
            None if c.refusal is None else self.runtime.reject(c.proposal, ctx, c.refusal)
            for c in calls
        ]
        return calls, ctx, refused

    def _context_for(self, config: RunnableConfig) -> CallContext:
        return self._context(config) if callable(self._context) else self._context

    def _last_ai(self, state: object) -> AIMessage:
        for message in reversed(_messages(state, self._messages_key)):
            if isinstance(message, AIMessage):
                return message
        msg = f"no AIMessage in the state's {self._messages_key!r}"
        raise ConfigurationError(msg, code="no_ai_message")

    def _output(self, state: object, calls: list[_Call], outcomes: list[Outcome]) -> object:
        messages = [_tool_message(o, c) for c, o in zip(calls, outcomes, strict=True)]
        return messages if isinstance(state, list) else {self._messages_key: messages}


def _messages(state: object, key: str) -> Sequence[object]:
    if isinstance(state, list):
        return state
    found = state.get(key) if isinstance(state, Mapping) else getattr(state, key, None)
    if not isinstance(found, Sequence):
        msg = f"no {key!r} list in the graph state"
        raise ConfigurationError(msg, code="no_messages")
    return found


def _all(outcomes: list[Outcome | None]) -> list[Outcome]:
    assert all(o is not None for o in outcomes)  # noqa: S101 - each call was refused or run
    return cast("list[Outcome]", outcomes)


# -- from an AIMessage to proposals -------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Call:
    """One tool call of the message: its proposal, and why it must not run, if so."""

    name: str
    proposal: Proposal
    source: ArgumentSource
    refusal: Problem | None


def _calls(message: AIMessage, names: NameMap | None) -> list[_Call]:
    """Every call of ``message`` in order: the valid ones, then the invalid ones."""
    raw = _raw_arguments(message)
    cut = _cut_short(message)
    calls: list[_Call] = []
    for call in message.tool_calls:
        call_id = call.get("id") or ""
        arguments, source = _arguments(call["args"], raw.get(call_id))
        refusal = _incomplete(cut) if cut else None if call_id else _no_id()
        calls.append(
            _Call(
                name=call["name"],
                source=source,
                refusal=refusal,
                proposal=_proposal(message, call["name"], call_id, arguments, names),
            )
        )
    for bad in message.invalid_tool_calls:
        call_id = bad.get("id") or ""
        name = bad.get("name") or ""
        arguments = raw.get(call_id, bad.get("args") or "").encode("utf-8", "surrogatepass")
        refusal = _incomplete(cut) if cut else _invalid(arguments, bad.get("error"))
        calls.append(
            _Call(
                name=name,
                source="raw",
                refusal=refusal,
                proposal=_proposal(message, name, call_id, arguments, names),
            )
        )
    return calls


def _proposal(
    message: AIMessage, name: str, call_id: str, arguments: bytes, names: NameMap | None
) -> Proposal:
    return Proposal(
        name=name if names is None else names.tool_name(name),
        arguments=arguments,
        proposal_id=call_id,
        model_call_id=message.id,
    )


def _raw_arguments(message: AIMessage) -> dict[str, str]:
    """The provider's own argument strings, by call id, wherever LangChain kept them."""
    found: dict[str, str] = {}
    for call_id, text in _raw_candidates(message):
        if isinstance(call_id, str) and call_id and isinstance(text, str):
            found.setdefault(call_id, text)
    return found


def _raw_candidates(message: AIMessage) -> Iterator[tuple[object, object]]:
    # Chat Completions shape (langchain-openai and OpenAI-compatible integrations).
    for entry in _list(message.additional_kwargs.get("tool_calls")):
        function = entry.get("function")
        if isinstance(function, Mapping):
            yield entry.get("id"), function.get("arguments")
    # A streamed message still held as a chunk. Chunks LangChain made up from parsed
    # calls have no index; a provider's stream always gives one.
    if isinstance(message, AIMessageChunk):
        for chunk in message.tool_call_chunks:
            if chunk.get("index") is not None:
                yield chunk.get("id"), chunk.get("args")
    for block in _list(message.content):
        kind = block.get("type")
        if kind == "tool_use":  # Anthropic, streamed: the concatenated input_json_delta
            yield block.get("id"), block.get("partial_json")
        elif kind == "function_call":  # OpenAI Responses API
            yield block.get("call_id"), block.get("arguments")
        elif kind == "tool_call_chunk":
            yield block.get("id"), block.get("args")


def _list(value: object) -> list[Mapping[str, object]]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _arguments(parsed: Mapping[str, object], raw: str | None) -> tuple[bytes, ArgumentSource]:
    """The bytes to propose: the raw string when it is what LangChain parsed."""
    if raw:
        try:
            lenient = json.loads(raw)
        except (ValueError, RecursionError):
            # LangChain repaired it (partial JSON closed): the parser sees the original.
            return raw.encode("utf-8", "surrogatepass"), "raw"
        if not isinstance(lenient, dict) or _loose(lenient) == _loose(parsed):
            return raw.encode("utf-8", "surrogatepass"), "raw"
        # The dict no longer says what the provider sent: the application edited the
        # call in the graph state (as human-in-the-loop edits do). The edit wins.
        return _reserialize(parsed), "edited"
    return _reserialize(parsed), "parsed"


def _loose(value: object) -> str:
    """A comparison key that holds NaN equal to NaN, as two parses of one string are."""
    return json.dumps(value, sort_keys=True, allow_nan=True, default=repr)


def _reserialize(parsed: Mapping[str, object]) -> bytes:
    # allow_nan: NaN and Infinity are written out, so the strict parser, not this
    # module, refuses them with its own reason (R3).
    try:
        text = json.dumps(parsed, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(dict(parsed))  # not JSON at all: the parser refuses it
    return text.encode("utf-8", "surrogatepass")


def _cut_short(message: AIMessage) -> str | None:
    meta = message.response_metadata
    # finish_reason: OpenAI and most others; stop_reason: Anthropic; done_reason:
    # Ollama; status: the OpenAI Responses API.
    for key in ("finish_reason", "stop_reason", "done_reason", "status"):
        reason = meta.get(key)
        if isinstance(reason, str) and reason in _CUT_SHORT:
            return f"{key}={reason}"
    return None


def _incomplete(reason: str) -> Problem:
    return Problem(
        kind="parse",
        code="incomplete_call",
        message=f"the response ended before this call was complete ({reason})",
        recoverable=True,
        hint="send the whole call again",
    )


def _no_id() -> Problem:
    return Problem(
        kind="parse",
        code="missing_call_id",
        message="the call has no id, so its result could not be paired with it",
        recoverable=True,
        hint="give every call its own id",
    )


def _invalid(arguments: bytes, error: str | None) -> Problem:
    """Why an invalid call is refused: the strict parser's reason where it has one."""
    try:
        parse_arguments(arguments)
    except Rejection as r:
        return r.problem
    detail = f": {error}" if error else ""
    return Problem(
        kind="parse",
        code="invalid_tool_call",
        message=f"the provider marked this call invalid{detail}",
        recoverable=True,
        hint="send the call again with one JSON object of arguments",
    )


# -- results --------------------------------------------------------------------------


def _tool_message(outcome: Outcome, call: _Call) -> ToolMessage:
    """The ToolMessage for one outcome: toolbound's exact bytes, status, and evidence."""
    return ToolMessage(
        content=outcome.message.text,
        tool_call_id=outcome.proposal_id,
        name=call.name,
        status="error" if outcome.message.is_error else "success",
        artifact={"toolbound": _evidence(outcome, call.source)},
    )


def _evidence(outcome: Outcome, source: ArgumentSource) -> dict[str, str | None]:
    invocation = outcome.invocation
    return {
        "invocation_id": outcome.invocation_id,
        "kind": outcome.kind,
        "state": outcome.state.value,
        "commit_status": _commit_status(outcome),
        "digest": None if invocation is None else invocation.digest,
        "replayed_from": outcome.replayed_from if isinstance(outcome, Observed) else None,
        "arguments_source": source,
    }


def _commit_status(outcome: Outcome) -> CommitStatus:
    match outcome:
        case Observed():
            return outcome.result.commit_status
        case Rejected() | AwaitingConfirmation():
            return "not_committed"
        case Failed():
            return "not_committed" if outcome.result is None else outcome.result.commit_status
        case OutcomeUnknown():
            return "unknown"
        case Cancelled():
            return outcome.commit_status
        case _:
            assert_never(outcome)


# -- confirmations: interrupt() and Command(resume=...) ---------------------------------


def _settle(runtime: Runtime, outcomes: list[Outcome], ctx: CallContext) -> list[Outcome]:
    """Ask a person about every call waiting for one, until each is decided (R7)."""
    waiting = _waiting(outcomes)
    notes: dict[int, str] = {}
    while waiting:
        answer = _ask(runtime, waiting, notes)
        for i, decision in _matches(waiting, answer, notes):
            call, who = waiting.pop(i), decision["approver"]
            earlier = _earlier(runtime, call, decision)
            if earlier is not None:
                resumed = _resume_earlier(runtime, earlier, call, ctx)
                if resumed is not None:
                    outcomes[i] = resumed
                    continue
            if "arguments" in decision and decision["approved"]:
                outcomes[i] = runtime.edit(
                    call.invocation_id,
                    digest=decision["digest"],
                    arguments=decision["arguments"],
                    approver=who,
                )
                continue
            outcomes[i] = (
                runtime.approve(call.invocation_id, digest=decision["digest"], approver=who)
                if decision["approved"]
                else _refuse(runtime, call, decision)
            )
    return outcomes


async def _asettle(runtime: Runtime, outcomes: list[Outcome], ctx: CallContext) -> list[Outcome]:
    """:func:`_settle` for async callers: the journal is read off the event loop."""
    waiting = _waiting(outcomes)
    notes: dict[int, str] = {}
    while waiting:
        answer = _ask(runtime, waiting, notes)
        for i, decision in _matches(waiting, answer, notes):
            call, who = waiting.pop(i), decision["approver"]
            earlier = _earlier(runtime, call, decision)
            if earlier is not None:
                resumed = await _aresume_earlier(runtime, earlier, call, ctx)
                if resumed is not None:
                    outcomes[i] = resumed
                    continue
            if "arguments" in decision and decision["approved"]:
                outcomes[i] = await runtime.aedit(
                    call.invocation_id,
                    digest=decision["digest"],
                    arguments=decision["arguments"],
                    approver=who,
                )
                continue
            outcomes[i] = (
                await runtime.aapprove(call.invocation_id, digest=decision["digest"], approver=who)
                if decision["approved"]
                # A refusal runs nothing, so it needs no async variant.
                else _refuse(runtime, call, decision)
            )
    return outcomes


# -- with a journal: the call the pause parked is the one a person decides ----------------


def _earlier(runtime: Runtime, call: AwaitingConfirmation, decision: Decision) -> str | None:
    """The call an earlier pass parked that ``decision`` names, when the journal keeps it.

    With a journal the pause leaves its calls parked, in the inbox; the resumed pass
    admits each call afresh (``call``), and the decision belongs to the one parked.
    """
    earlier = decision.get("invocation_id")
    if runtime.inbox is None or earlier is None or earlier == call.invocation_id:
        return None
    return earlier


def _resume_earlier(
    runtime: Runtime, earlier: str, call: AwaitingConfirmation, ctx: CallContext
) -> Outcome | None:
    """The decision recorded in the journal, applied to the call it was made on, once.

    ``None`` when the journal holds no decision on ``earlier`` for this very call:
    the answer given with ``Command(resume=...)`` then decides the call of this pass
    (a call the runtime still holds from the pause is closed, nothing ran).
    """
    inbox = _inbox(runtime)
    held = earlier in set(runtime.parked())
    found = inbox.journal.decision(earlier)
    if found is None or not _same_call(found.call.body, call):
        if held:
            runtime.cancel_pending(earlier)
        return None
    if found.arguments is not None:
        # An edit: held here, the corrected call runs in the parked one's place, once.
        # Parked by a previous life, only this pass's call can take the corrected
        # arguments (the caller edits it), the parked one is left as the journal has it.
        outcome = inbox.take_edit(earlier) if held else None
        if outcome is None:
            return None
    elif held:
        confirmation = inbox.take(earlier)
        if confirmation is None:
            return None
        outcome = runtime.confirm(confirmation)
    else:
        # Parked by a previous life of this program: run from the journal.
        outcome = inbox.resume(earlier, ctx)
    runtime.cancel_pending(call.invocation_id)  # this pass's copy: nothing ran
    return outcome


async def _aresume_earlier(
    runtime: Runtime, earlier: str, call: AwaitingConfirmation, ctx: CallContext
) -> Outcome | None:
    """:func:`_resume_earlier` for async callers: the journal is read off the event loop."""
    inbox = _inbox(runtime)
    held = earlier in set(runtime.parked())
    found = await runtime.off_loop(inbox.journal.decision, earlier)
    if found is None or not _same_call(found.call.body, call):
        if held:
            runtime.cancel_pending(earlier)
        return None
    if found.arguments is not None:
        outcome = await inbox.atake_edit(earlier) if held else None
        if outcome is None:
            return None
    elif held:
        confirmation = await runtime.off_loop(inbox.take, earlier)
        if confirmation is None:
            return None
        outcome = await runtime.aconfirm(confirmation)
    else:
        outcome = await inbox.aresume(earlier, ctx)
    runtime.cancel_pending(call.invocation_id)
    return outcome


def _same_call(body: Mapping[str, object], call: AwaitingConfirmation) -> bool:
    """Whether the journal's parked call is ``call``: its id, its digest (R7)."""
    request = body.get("request")
    parked = body.get("confirmation")
    return (
        isinstance(request, Mapping)
        and isinstance(parked, Mapping)
        and request.get("call_id") == call.proposal_id
        and parked.get("digest") == call.request.digest
    )


def _refuse(runtime: Runtime, call: AwaitingConfirmation, decision: Decision) -> Outcome:
    """The person's denial of ``call``, with their reason when they gave one (R7)."""
    return runtime.deny(
        call.invocation_id,
        digest=decision["digest"],
        approver=decision["approver"],
        reason=decision.get("reason"),
    )


def _waiting(outcomes: list[Outcome]) -> dict[int, AwaitingConfirmation]:
    return {i: o for i, o in enumerate(outcomes) if isinstance(o, AwaitingConfirmation)}


def _ask(
    runtime: Runtime, waiting: Mapping[int, AwaitingConfirmation], notes: dict[int, str]
) -> Answer:
    """Pause the graph with the waiting calls; the answer once LangGraph resumes."""
    requests = []
    for i, o in waiting.items():
        request: dict[str, object] = {"call_id": o.proposal_id, **o.request.as_json()}
        if i in notes:
            request["note"] = notes[i]
        requests.append(request)
    try:
        answer: Answer = interrupt(
            {"type": CONFIRMATION, "requests": requests}, response_schema=Answer
        )
    except BaseException:
        if runtime.inbox is not None:
            # With a journal the parked calls wait in its inbox, where a person may
            # decide them (decided()); the resumed pass applies that decision.
            raise
        # The pause lives in LangGraph's checkpoint, not in this runtime's memory: on
        # resume the node admits each call afresh. Close the parked ones (nothing ran).
        for o in waiting.values():
            runtime.cancel_pending(o.invocation_id)
        raise
    return answer


def _matches(
    waiting: Mapping[int, AwaitingConfirmation], answer: Answer, notes: dict[int, str]
) -> list[tuple[int, Decision]]:
    """The decisions that fit a waiting call: its id, its current digest, its subject."""
    by_call = {d["call_id"]: d for d in answer["decisions"]}
    fits: list[tuple[int, Decision]] = []
    for i, o in waiting.items():
        decision = by_call.get(o.proposal_id)
        if decision is None:
            continue
        if decision["digest"] != o.request.digest:
            # R7: changed arguments, new digest, confirm again. The runtime would refuse
            # this confirmation too (ConfirmationMismatch); not issuing it keeps the
            # runtime from holding a record nobody can use.
            notes[i] = (
                f"the answer named digest {decision['digest']}; the call's arguments "
                f"now have digest {o.request.digest}"
            )
            continue
        if decision["subject"] != o.request.subject.id:
            # The graph was resumed for someone else: the call is theirs now, another
            # call than the one the person decided on.
            notes[i] = (
                f"the answer was for a call run for {decision['subject']}; "
                f"this one runs for {o.request.subject.id}"
            )
            continue
        fits.append((i, decision))
    return fits


# -- LangChain tools ----------------------------------------------------------------------


class ToolboundTool(BaseTool):
    """A toolbound tool as a LangChain ``BaseTool``: its schema, toolbound's pipeline.

    ``args_schema`` is the tool's JSON Schema as written, so ``bind_tools`` sends
    toolbound's schema. Invoked (by ``ToolNode``, an agent, or directly), a call goes
    through :meth:`toolbound.Runtime.run` with the context from the run's config, and a
    call that needs a person pauses the graph as :class:`ToolboundNode` does. It sees
    the arguments LangChain parsed (a string input is taken as the raw bytes), never
    the invalid calls: prefer :class:`ToolboundNode` as the graph's tool node.
    """

    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: bool | str | Callable[[ToolException], str] | None = True
    _runtime: Runtime = PrivateAttr()
    _context: CallContext | ContextFactory = PrivateAttr()
    _tool: str = PrivateAttr()

    def __init__(
        self,
        spec: ToolSpec,
        runtime: Runtime,
        context: CallContext | ContextFactory,
        *,
        names: NameMap | None = None,
    ) -> None:
        super().__init__(
            name=spec.name if names is None else names.provider_name(spec.name),
            description=describe(spec),
            args_schema=_parameters(spec),
        )
        self._runtime = runtime
        self._context = context
        self._tool = spec.name

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, object], tool_call_id: str | None
    ) -> tuple[tuple[str, ...], dict[str, object]]:
        # The arguments travel as one value, so no argument name can collide with the
        # keywords LangChain adds (config, run_manager).
        return (), {"arguments": tool_input, "tool_call_id": tool_call_id}

    def _run(
        self,
        arguments: str | dict[str, object],
        tool_call_id: str | None,
        config: RunnableConfig,
    ) -> tuple[str, dict[str, object]]:
        proposal, source = self._proposal(arguments, tool_call_id)
        ctx = self._context_for(config)
        outcome = self._runtime.run(proposal, ctx)
        (outcome,) = _settle(self._runtime, [outcome], ctx)
        return _content(outcome, source)

    async def _arun(
        self,
        arguments: str | dict[str, object],
        tool_call_id: str | None,
        config: RunnableConfig,
    ) -> tuple[str, dict[str, object]]:
        proposal, source = self._proposal(arguments, tool_call_id)
        ctx = self._context_for(config)
        outcome = await self._runtime.arun(proposal, ctx)
        (outcome,) = await _asettle(self._runtime, [outcome], ctx)
        return _content(outcome, source)

    def _proposal(
        self, arguments: str | dict[str, object], tool_call_id: str | None
    ) -> tuple[Proposal, ArgumentSource]:
        if isinstance(arguments, str):
            raw, source = arguments.encode("utf-8", "surrogatepass"), "raw"
        else:
            raw, source = _reserialize(arguments), "parsed"
        proposal = Proposal(
            name=self._tool,
            arguments=raw,
            proposal_id=tool_call_id or f"lc-{os.urandom(8).hex()}",
        )
        return proposal, cast("ArgumentSource", source)

    def _context_for(self, config: RunnableConfig) -> CallContext:
        return self._context(config) if callable(self._context) else self._context


def _content(outcome: Outcome, source: ArgumentSource) -> tuple[str, dict[str, object]]:
    if outcome.message.is_error:
        # LangChain marks the ToolMessage status="error" for a handled ToolException.
        raise ToolException(outcome.message.text)
    return outcome.message.text, {"toolbound": _evidence(outcome, source)}


def as_tools(
    tools: ToolSet,
    runtime: Runtime,
    context: CallContext | ContextFactory,
    *,
    names: NameMap | None = None,
) -> list[ToolboundTool]:
    """Every tool of ``tools`` as a :class:`ToolboundTool` (for ``bind_tools`` or agents)."""
    return [ToolboundTool(spec, runtime, context, names=names) for spec in tools.specs]

"""The framework integrations as surfaces that decide parked calls (R7).

Each driver runs the framework's own agent loop with a scripted model (no network):
MIRA's model proposes the write, the run stops at the framework's approval point
showing the digest (``park``); ``pending`` is what the framework shows as waiting;
``decide`` is the framework's way to approve or deny, naming the digest the person
was shown, and resumes the run; ``effects`` counts what the write really did.

* **Pydantic AI**: the run ends with ``DeferredToolRequests``; ``toolset.decide``
  records the decision with the runtime and the run resumes with its
  ``DeferredToolResults``.
* **OpenAI Agents SDK**: the run stops with ``result.interruptions``;
  ``GuardedTools.approve`` / ``deny`` mark the ``RunState`` and the run resumes from it.
* **LangGraph**: ``ToolboundNode`` pauses the graph with ``interrupt()``;
  ``Command(resume=approve(...))`` / ``deny(...)`` resumes the thread.

Every framework names an approver by name only: no subject, tenant or role reaches
the desk, so four eyes, tenants and roles cannot apply. Where a framework answers a
refused decision in its own way (a cancelled call, a question asked again, a run that
finished), the driver reads that answer and its ``refusals`` table says what it came to.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents import Agent as SdkAgent
from agents import RunConfig, Runner
from agents.items import ModelResponse as SdkResponse
from agents.models.interface import Model
from agents.usage import Usage
from desk_surfaces import (
    LIBRARY,
    MIRA,
    TOOL,
    Decided,
    Parked,
    Refused,
    _call_id,
    _ParkingRuntime,
)
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolbound import CallContext, ConfigurationError, ConfirmationMismatch, Subject
from toolbound.integrations import langgraph
from toolbound.integrations.openai_agents import GuardedTools
from toolbound.integrations.pydantic_ai import ToolboundToolset

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from pathlib import Path

    from agents import RunResult
    from desk_surfaces import Person, Result, Situation, Surface
    from pydantic_ai.run import AgentRunResult

    from toolbound import FixedClock, Outcome
    from toolbound.pipeline.confirm import ConfirmationDesk

PROVIDER_NAME = TOOL.replace(".", "__")
"""The write as the Pydantic AI and Agents SDK integrations show it to a model."""
ASKED = "save a note"


def _approver_only_by_name(sdk: str) -> dict[str, str]:
    """Why the cases about who decides cannot apply: the framework passes a name only."""
    by_name = f"{sdk} takes the approver's name only"
    return {
        "four_eyes": f"{by_name}: no subject to compare with the call's",
        "other_tenant": f"{by_name}: no tenant; the application shows whom it will",
        "not_an_approver": f"{by_name}: no roles; whoever the application lets decide, decides",
        "deny_reason": f"{sdk} takes no reason for a denial: the model is told who denied it",
    }


def _mira() -> Subject:
    return Subject(id=MIRA.subject, tenant=MIRA.tenant)


def _refusing(
    situations: Mapping[Situation, frozenset[Refused]],
) -> dict[Situation, frozenset[Refused]]:
    """A refusals table: ``situations``, and no refusal in those the driver never meets."""
    empty: dict[Situation, frozenset[Refused]] = dict.fromkeys(LIBRARY, frozenset())
    return {**empty, **situations}


# -- (6) Pydantic AI: DeferredToolRequests, toolset.decide, DeferredToolResults -----------


def _proposing(call_id: str, arguments: Mapping[str, object]) -> FunctionModel:
    """A model that proposes the write once, then says "done" to whatever it is told."""

    def model(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        if any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[TextPart("done")])
        call = ToolCallPart(PROVIDER_NAME, json.dumps(arguments), tool_call_id=call_id)
        return ModelResponse(parts=[call])

    return FunctionModel(model)


@dataclass
class _DeferredRun:
    """A run that ended waiting for a person: its agent, its messages, what it asked."""

    agent: Agent[None, str | DeferredToolRequests]
    first: AgentRunResult[str | DeferredToolRequests]
    requests: DeferredToolRequests
    call_id: str


class PydanticAi:
    """``ToolboundToolset``: a deferred approval per parked call, ``decide``, then resume.

    The decision names the digest the person was shown: the run's ``DeferredToolRequests``
    with that digest in the call's ``metadata["toolbound"]``, which ``decide`` records
    with the runtime's desk (R7).
    """

    # toolset.decide records through the runtime's desk (Runtime.issue / deny), so it
    # refuses with the library's codes; a call id the requests do not hold is its own
    # ConfigurationError, code not_pending.
    refusals = LIBRARY
    cannot: Mapping[str, str] = _approver_only_by_name("ToolboundToolset.decide")
    known_bugs: Mapping[str, str] = {}

    def __init__(self, clock: FixedClock) -> None:
        self.held = _ParkingRuntime(clock)
        self.outcomes: list[Outcome] = []
        context = CallContext(subject=_mira(), tools=self.held.tools)
        self.toolset: ToolboundToolset[None] = ToolboundToolset(
            self.held.runtime, context, on_outcome=self.outcomes.append
        )
        self.runs: dict[str, _DeferredRun] = {}

    def park(self, arguments: Mapping[str, object]) -> Parked:
        call_id = _call_id()
        agent: Agent[None, str | DeferredToolRequests] = Agent(
            _proposing(call_id, arguments),
            toolsets=[self.toolset],
            output_type=[str, DeferredToolRequests],
        )
        first = asyncio.run(agent.run(ASKED))
        requests = first.output
        assert isinstance(requests, DeferredToolRequests), requests
        shown = requests.metadata[call_id]["toolbound"]
        self.runs[shown["invocation_id"]] = _DeferredRun(agent, first, requests, call_id)
        return Parked(shown["invocation_id"], shown["digest"])

    def pending(self, approver: Person) -> set[str]:  # noqa: ARG002 - every person sees all
        return {
            request.invocation_id
            for run in self.runs.values()
            for request in self.toolset.confirmation_requests(run.requests).values()
        }

    def decide(self, invocation_id: str, digest: str, approver: Person, *, approve: bool) -> Result:
        run = self.runs.get(invocation_id)
        if run is None:
            # No run asked about this call: nothing the person could answer.
            requests, call_id = DeferredToolRequests(), invocation_id
        else:
            requests, call_id = _showing(run.requests, run.call_id, digest), run.call_id
        seen = len(self.outcomes)
        try:
            results = self.toolset.decide(requests, {call_id: approve}, approver=approver.name)
        except (ConfirmationMismatch, ConfigurationError) as exc:
            return Refused(exc.code)
        assert run is not None
        resumed = asyncio.run(
            run.agent.run(message_history=run.first.all_messages(), deferred_tool_results=results)
        )
        assert resumed.output == "done", resumed.output
        # A denial ends the call within decide; an approval when the run resumes.
        (ended,) = [o for o in self.outcomes[seen:] if o.invocation_id == invocation_id]
        return Decided(ended.kind)

    def effects(self) -> int:
        return self.held.effects()

    @contextmanager
    def twin(self) -> Iterator[PydanticAi]:
        # One toolset over one runtime: the parked calls live in its memory.
        yield self

    def desks(self) -> list[ConfirmationDesk]:
        return self.held.desks()

    def close(self) -> None:
        self.held.close()


def _showing(requests: DeferredToolRequests, call_id: str, digest: str) -> DeferredToolRequests:
    """The deferred requests as the person was shown them: the call with ``digest``."""
    entry = requests.metadata[call_id]["toolbound"]
    metadata = {**requests.metadata, call_id: {"toolbound": {**entry, "digest": digest}}}
    return dataclasses.replace(requests, metadata=metadata)


# -- (7) OpenAI Agents SDK: interruptions, GuardedTools.approve / deny, RunState ----------


class _Script(Model):
    """The SDK's Model interface playing one scripted response per model call."""

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)

    async def get_response(  # noqa: PLR0917 - the SDK's signature
        self,
        system_instructions: str | None,
        input: Any,  # noqa: A002 - the SDK's parameter name
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> SdkResponse:
        del system_instructions, input, model_settings, tools, output_schema, handoffs
        del tracing, previous_response_id, conversation_id, prompt  # the script ignores them
        return SdkResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        msg = "these runs are not streamed"
        raise NotImplementedError(msg)


def _sdk_proposing(call_id: str, arguments: Mapping[str, object]) -> _Script:
    call = ResponseFunctionToolCall(
        type="function_call",
        id=f"fc_{call_id}",
        call_id=call_id,
        name=PROVIDER_NAME,
        arguments=json.dumps(arguments),
        status="completed",
    )
    done = ResponseOutputMessage(
        type="message",
        id="msg",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
    )
    return _Script([call], [done])


_NO_TRACING = RunConfig(tracing_disabled=True)


@dataclass
class _InterruptedRun:
    """A run of the SDK and its latest result: what the application holds."""

    agent: SdkAgent[Any]
    result: RunResult


class OpenAiAgents:
    """``GuardedTools``: the run's interruptions, ``approve`` / ``deny``, the run resumed.

    A call is known by its SDK call id: the runtime parks it only when the resumed run
    reaches it, so there is no invocation id before the decision. The decision names
    the digest the person was shown: ``approve`` with that ``PendingConfirmation.digest``.
    """

    refusals = _refusing(
        {
            # The resumed call is parked, the runtime refuses the decision's digest and
            # the call is cancelled, nothing run: the code is in its trace.
            "digest": frozenset({Refused("digest_mismatch")}),
            # The resumed run shows no interruption for the call: nothing to approve.
            "decided": frozenset({Refused("not_pending")}),
        }
    )
    cannot: Mapping[str, str] = {
        **_approver_only_by_name("GuardedTools.approve/deny"),
        "digest_waits": (
            "a resumed run consumes its interruptions: the call whose decision named another "
            "digest is cancelled, nothing run (digest_mismatch in its trace, as documented); "
            "it does not wait for another decision"
        ),
        "digest:deny": (
            "GuardedTools.deny names no digest: the denial never reaches the runtime "
            "(documented), the SDK rejects the item and nothing runs"
        ),
        "unknown": "a decision is on an interruption of a RunState the application holds: "
        "there is no id to look a call up by",
        "raced": "a RunState is resumed by the application that holds it: the SDK has no "
        "shared desk for two approvers to race on",
        "expired_listed": "an interruption has no confirmation window: the call is judged "
        "afresh when the run resumes, and approval_ttl runs from the approval",
        "expired_decided": "an interruption has no confirmation window: the call is judged "
        "afresh when the run resumes, and approval_ttl runs from the approval",
    }
    known_bugs: Mapping[str, str] = {}

    def __init__(self, clock: FixedClock) -> None:
        self.held = _ParkingRuntime(clock)
        self.outcomes: list[Outcome] = []
        context = CallContext(subject=_mira(), tools=self.held.tools)
        self.guarded = GuardedTools(self.held.runtime, context, on_outcome=self.outcomes.append)
        self.runs: dict[str, _InterruptedRun] = {}

    def park(self, arguments: Mapping[str, object]) -> Parked:
        call_id = _call_id()
        agent = SdkAgent(
            name="notes", model=_sdk_proposing(call_id, arguments), tools=self.guarded.tools
        )
        result = asyncio.run(Runner.run(agent, ASKED, run_config=_NO_TRACING))
        (shown,) = self.guarded.pending(result)
        assert shown.call_id == call_id
        assert shown.digest is not None, shown.problem
        self.runs[call_id] = _InterruptedRun(agent, result)
        return Parked(call_id, shown.digest)

    def pending(self, approver: Person) -> set[str]:  # noqa: ARG002 - every person sees all
        return {p.call_id for run in self.runs.values() for p in self.guarded.pending(run.result)}

    def decide(self, invocation_id: str, digest: str, approver: Person, *, approve: bool) -> Result:
        run = self.runs[invocation_id]
        shown = [p for p in self.guarded.pending(run.result) if p.call_id == invocation_id]
        if not shown:
            return Refused("not_pending")
        state = run.result.to_state()
        named = dataclasses.replace(shown[0], digest=digest)
        if approve:
            self.guarded.approve(state, named, approver=approver.name)
        else:
            self.guarded.deny(state, named, approver=approver.name)
        seen = len(self.outcomes)
        run.result = asyncio.run(Runner.run(run.agent, state, run_config=_NO_TRACING))
        assert run.result.final_output == "done", run.result.final_output
        ended = [o for o in self.outcomes[seen:] if o.proposal_id == invocation_id]
        if not ended:
            # Denied: the SDK answered the model itself; the call never reached the runtime.
            told = _outputs(run.result)[invocation_id]
            assert json.loads(told)["error"]["code"] == "denied_by_person", told
            return Decided("rejected")
        (outcome,) = ended
        refused = outcome.trace.of_kind("confirmation_refused")
        if refused:
            assert outcome.kind == "cancelled", outcome
            return Refused(str(refused[0].data["code"]))
        return Decided(outcome.kind)

    def effects(self) -> int:
        return self.held.effects()

    @contextmanager
    def twin(self) -> Iterator[OpenAiAgents]:
        yield self

    def desks(self) -> list[ConfirmationDesk]:
        return self.held.desks()

    def close(self) -> None:
        self.held.close()


def _outputs(result: RunResult) -> dict[str, str]:
    """Every ``function_call_output`` of the run, by call id: what the model was told."""
    return {
        str(item["call_id"]): str(item["output"])
        for item in result.to_input_list()
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


# -- (8) LangGraph: ToolboundNode, interrupt(), Command(resume=approve(...)) --------------


def _graph(node: langgraph.ToolboundNode, call: AIMessage, saver: InMemorySaver) -> Any:
    """A graph model → tools → model, the model proposing ``call`` once, then "done"."""
    model = GenericFakeChatModel(messages=iter([call, AIMessage("done")]))
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("tools", node)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges(
        "agent", langgraph.tools_condition, {"tools": "tools", "__end__": "__end__"}
    )
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def _thread(call_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": call_id}}


# Why the node asked again, read from its note: the re-asked request carries no code.
_NOTES = (
    (re.compile(r"the answer named digest "), "digest_mismatch"),
    (re.compile(r"the answer was for a call run for "), "subject_mismatch"),
)


def _why_asked_again(request: Mapping[str, object]) -> str:
    note = str(request.get("note", ""))
    return next((code for pattern, code in _NOTES if pattern.match(note)), "asked_again")


class LangGraph:
    """``ToolboundNode``: the graph pauses with ``interrupt()``; ``Command(resume=...)``.

    One thread per call, named by its call id: the runtime closes its parked call when
    the graph pauses and admits it afresh on resume, so the call id is what stays. The
    decision names the digest the person was shown: ``approve``/``deny`` over the
    interrupt's value with that digest.
    """

    refusals = _refusing(
        {
            # The node asks again, the call unchanged, with a note naming both digests.
            "digest": frozenset({Refused("digest_mismatch")}),
            # Resuming a finished thread returns its state unchanged: nothing waits or runs.
            "decided": frozenset({Refused("not_pending")}),
        }
    )
    cannot: Mapping[str, str] = {
        **_approver_only_by_name("langgraph.approve/deny"),
        "unknown": "a decision resumes the thread the call paused: there is no lookup by id, "
        "and LangGraph runs an unknown thread from its start instead of refusing",
        "raced": "one thread's checkpoint resumed twice at once is outside LangGraph's model: "
        "no shared desk for two approvers to race on",
        "expired_listed": "the confirmation window starts when the graph resumes, since the call "
        "is admitted afresh then (documented): a paused call does not expire",
        "expired_decided": "the confirmation window starts when the graph resumes, since the "
        "call is admitted afresh then (documented): a late approval runs the call",
    }
    known_bugs: Mapping[str, str] = {}

    def __init__(self, clock: FixedClock) -> None:
        self.held = _ParkingRuntime(clock)
        context = CallContext(subject=_mira(), tools=self.held.tools)
        self.node = langgraph.ToolboundNode(self.held.runtime, context)
        self.saver = InMemorySaver()
        self.graphs: dict[str, Any] = {}
        self.shown: dict[str, Mapping[str, Any]] = {}

    def park(self, arguments: Mapping[str, object]) -> Parked:
        call_id = _call_id()
        # As Chat Completions sends it: the arguments as the model wrote them.
        function = {"name": TOOL, "arguments": json.dumps(arguments)}
        raw = {"id": call_id, "type": "function", "function": function}
        call = AIMessage("", additional_kwargs={"tool_calls": [raw]})
        graph = self.graphs[call_id] = _graph(self.node, call, self.saver)
        paused = graph.invoke({"messages": [HumanMessage(ASKED)]}, _thread(call_id))
        (pause,) = paused["__interrupt__"]
        self.shown[call_id] = pause.value
        (request,) = pause.value["requests"]
        return Parked(call_id, request["digest"])

    def _asking(self, call_id: str) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
        """The thread's questions about the call: each interrupt's value and its request."""
        paused = self.graphs[call_id].get_state(_thread(call_id)).interrupts
        return [
            (p.value, r) for p in paused for r in p.value["requests"] if r["call_id"] == call_id
        ]

    def pending(self, approver: Person) -> set[str]:  # noqa: ARG002 - every person sees all
        return {call_id for call_id in self.graphs if self._asking(call_id)}

    def decide(self, invocation_id: str, digest: str, approver: Person, *, approve: bool) -> Result:
        graph, thread = self.graphs[invocation_id], _thread(invocation_id)
        shown = self.shown[invocation_id]
        requests = [{**r, "digest": digest} for r in shown["requests"]]
        answer = (langgraph.approve if approve else langgraph.deny)(
            {**shown, "requests": requests}, approver=approver.name, calls=[invocation_id]
        )
        before = len(graph.get_state(thread).values["messages"])
        after = graph.invoke(Command(resume=answer), thread)
        asked = self._asking(invocation_id)
        if asked:
            (value, request), *_ = asked
            self.shown[invocation_id] = value
            return Refused(_why_asked_again(request))
        answered = [
            m
            for m in after["messages"][before:]
            if isinstance(m, ToolMessage) and m.tool_call_id == invocation_id
        ]
        if not answered:
            return Refused("not_pending")
        (message,) = answered
        return Decided(message.artifact["toolbound"]["kind"])

    def effects(self) -> int:
        return self.held.effects()

    @contextmanager
    def twin(self) -> Iterator[LangGraph]:
        yield self

    def desks(self) -> list[ConfirmationDesk]:
        return self.held.desks()

    def close(self) -> None:
        self.held.close()


FRAMEWORKS: Mapping[str, Callable[[Path, FixedClock], Surface]] = {
    "pydantic-ai": lambda _folder, clock: PydanticAi(clock),
    "openai-agents": lambda _folder, clock: OpenAiAgents(clock),
    "langgraph": lambda _folder, clock: LangGraph(clock),
}

"""A LangGraph agent's paused call, decided in the service's API (R7, R18).

The graph runs in its own program, its runtime given a journal on the service's store.
The pause (``interrupt()``) leaves the call parked in the journal's inbox, listed by
``/v1/confirmations`` with surface "library"; a person approves or denies it there;
``decided`` / ``wait_for_decisions`` turn the decision into the resume value
(``Command(resume=...)``) and the graph resumes with it — in the same process, or after
the program restarted (a new runtime on the same journal, the graph's checkpoint kept
by its checkpointer) — the call running exactly once, under the digest approved.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import TYPE_CHECKING, Any

import pytest
from service_config import KEYS
from service_pack import effects

from toolbound import ConfigurationError, Runtime, Subject
from toolbound._clock import SystemClock
from toolbound.pipeline.call import CallContext
from toolbound.wiring import journal_for, policy_for

pytest.importorskip("langgraph")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command, Interrupt

from toolbound.integrations.langgraph import (
    ToolboundNode,
    approve,
    decided,
    edit,
    tools_condition,
    wait_for_decisions,
)

if TYPE_CHECKING:
    from starlette.testclient import TestClient

    from toolbound.config import ServiceConfig

AGENT = Subject(id="agent-1", tenant="acme")
THREAD = {"configurable": {"thread_id": "t-1"}}


def add_note(text: str) -> AIMessage:
    """One call of notes.add, its arguments as Chat Completions sends them."""
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "notes.add", "arguments": json.dumps({"text": text})},
    }
    return AIMessage("", additional_kwargs={"tool_calls": [call]}, id="ai-1")


class GraphProgram:
    """An agent's program on the service's store: runtime with a journal, node, graph.

    ``turns`` are the model's answers still to come; ``checkpointer`` outlives the
    program, as a durable one would.
    """

    def __init__(
        self,
        config: ServiceConfig,
        checkpointer: InMemorySaver,
        *turns: AIMessage,
        holder: str = "graph-program",
    ) -> None:
        self.journal = journal_for(config.store_url)
        self.runtime = Runtime(
            policy=policy_for(config, SystemClock()), journal=self.journal, holder=holder
        )
        context = CallContext(subject=AGENT, tools=config.build_registry().toolset())
        model = GenericFakeChatModel(messages=iter([*turns, AIMessage("done")]))
        builder = StateGraph(MessagesState)
        builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
        builder.add_node("tools", ToolboundNode(self.runtime, context))
        builder.add_edge(START, "agent")
        builder.add_conditional_edges(
            "agent", tools_condition, {"tools": "tools", "__end__": "__end__"}
        )
        builder.add_edge("tools", "agent")
        self.graph: Any = builder.compile(checkpointer=checkpointer)

    def flush(self) -> None:
        assert self.runtime.recorder is not None
        self.runtime.recorder.flush()

    def close(self) -> None:
        self.runtime.close()
        self.journal.close()


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS['ana']}"}


def decide(client: TestClient, pause: Interrupt, decision: str, **body: object) -> None:
    """Ana decides the paused call in the API, as the inbox lists it."""
    [request] = pause.value["requests"]
    [listed] = [
        c
        for c in client.get("/v1/confirmations", headers=auth()).json()["confirmations"]
        if c["invocation_id"] == request["invocation_id"]
    ]
    assert (listed["surface"], listed["decidable"]) == ("library", True)
    assert listed["digest"] == request["digest"]
    r = client.post(
        f"/v1/invocations/{listed['invocation_id']}/decision",
        json={"digest": listed["digest"], "decision": decision, **body},
        headers=auth(),
    )
    assert r.status_code == 202, r.text


def told(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(str(m.content)) for m in state["messages"] if isinstance(m, ToolMessage)]


def test_a_graph_waiting_in_its_process_resumes_with_the_consoles_approval(client, service):
    """The program waits (wait_for_decisions) while ana approves in the API; it runs once."""
    program = GraphProgram(service.config, InMemorySaver(), add_note("from the graph"))

    async def scenario() -> tuple[dict[str, Any], str]:
        paused = await program.graph.ainvoke({"messages": [HumanMessage("add a note")]}, THREAD)
        (pause,) = paused["__interrupt__"]
        await asyncio.to_thread(program.flush)
        assert await asyncio.to_thread(decided, program.runtime, pause) is None  # not yet
        decider = threading.Timer(0.3, decide, args=(client, pause, "approve"))
        decider.start()
        answer = await wait_for_decisions(program.runtime, pause, timeout=10)
        await asyncio.to_thread(decider.join)
        assert answer is not None
        assert [d["approver"] for d in answer["decisions"]] == ["ana"]
        done = await program.graph.ainvoke(Command(resume=answer), THREAD)
        return done, pause.value["requests"][0]["invocation_id"]

    try:
        done, invocation_id = asyncio.run(scenario())
        assert "__interrupt__" not in done
        [result] = told(done)
        assert result["data"] is not None
        assert effects() == ["from the graph"]
        program.flush()
        ended = program.journal.get_call(invocation_id)
        assert (ended.status, ended.decision, ended.approver) == ("observed", "approved", "ana")
        assert program.runtime.pending() == []
    finally:
        program.close()


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_a_graph_restarted_after_the_approval_runs_the_call_once(client, service, asynchronous):
    """The program stops while paused; ana approves; the restarted program resumes the graph."""
    checkpointer = InMemorySaver()
    first_life = GraphProgram(service.config, checkpointer, add_note("after a restart"))
    paused = first_life.graph.invoke({"messages": [HumanMessage("add a note")]}, THREAD)
    (pause,) = paused["__interrupt__"]
    [request] = pause.value["requests"]
    first_life.close()  # the process ends; the call stays in the journal's inbox
    decide(client, pause, "approve")

    second_life = GraphProgram(service.config, checkpointer)
    try:
        # The restarted program finds the pause in the graph's checkpoint.
        (found,) = second_life.graph.get_state(THREAD).interrupts
        assert found.value == pause.value
        answer = decided(second_life.runtime, found)
        assert answer is not None
        resume = Command(resume=answer)
        if asynchronous:
            done = asyncio.run(second_life.graph.ainvoke(resume, THREAD))
        else:
            done = second_life.graph.invoke(resume, THREAD)
        assert "__interrupt__" not in done
        assert effects() == ["after a restart"]
        second_life.flush()
        ended = second_life.journal.get_call(request["invocation_id"])
        assert (ended.status, ended.approver, ended.digest) == (
            "observed",
            "ana",
            request["digest"],
        )
        assert second_life.runtime.pending() == []  # the pass's own copy was closed
        # The decision was applied: asked again, the journal has nothing to resume.
        assert decided(second_life.runtime, pause) is None
        assert effects() == ["after a restart"]
    finally:
        second_life.close()


def test_a_denial_with_a_reason_in_the_api_reaches_the_graphs_model(client, service):
    """Ana denies in the API with a reason; the model reads her words; nothing runs."""
    program = GraphProgram(service.config, InMemorySaver(), add_note("refused"))
    try:
        paused = program.graph.invoke({"messages": [HumanMessage("add a note")]}, THREAD)
        (pause,) = paused["__interrupt__"]
        program.flush()
        decide(client, pause, "deny", reason="use the team board")
        answer = decided(program.runtime, pause)
        assert answer is not None
        [decision] = answer["decisions"]
        assert (decision["approved"], decision.get("reason")) == (False, "use the team board")
        done = program.graph.invoke(Command(resume=answer), THREAD)
        assert effects() == []
        [result] = told(done)
        assert result["error"]["code"] == "denied_by_person"
        assert "use the team board" in json.dumps(result)
        assert "ana" in json.dumps(result)
        program.flush()
        ended = program.journal.get_call(pause.value["requests"][0]["invocation_id"])
        assert (ended.status, ended.decision) == ("rejected", "denied")
    finally:
        program.close()


def test_decisions_are_read_from_a_journal_only(service):
    """A runtime without a journal has no inbox to read: no_journal."""
    runtime = Runtime(policy=policy_for(service.config, SystemClock()))
    pause = {"type": "toolbound.confirmation", "requests": []}
    with pytest.raises(ConfigurationError) as missing:
        decided(runtime, pause)
    assert missing.value.code == "no_journal"


def test_an_answer_given_in_the_program_runs_once_and_leaves_no_call_waiting(service):
    """approve() in the program: the call runs once; the paused copy leaves the inbox."""
    program = GraphProgram(service.config, InMemorySaver(), add_note("decided here"))
    try:
        paused = program.graph.invoke({"messages": [HumanMessage("add a note")]}, THREAD)
        (pause,) = paused["__interrupt__"]
        program.graph.invoke(Command(resume=approve(pause, approver="ana")), THREAD)
        assert effects() == ["decided here"]
        program.flush()
        assert program.journal.list_calls("acme", status="awaiting_confirmation") == []
        assert program.runtime.pending() == []
        [request] = pause.value["requests"]
        parked = program.journal.get_call(request["invocation_id"])
        assert parked is not None
        # The paused copy closed, nothing ran; the resumed pass's call ran, once.
        assert parked.status == "cancelled"
        statuses = sorted(c.status for c in program.journal.list_calls("acme"))
        assert statuses == ["cancelled", "observed"]
    finally:
        program.close()


def test_an_edit_given_in_the_program_runs_the_corrected_call_once(service):
    """edit() with a journal: the corrected call runs in the paused one's place, once."""
    program = GraphProgram(service.config, InMemorySaver(), add_note("first draft"))
    try:
        paused = program.graph.invoke({"messages": [HumanMessage("add a note")]}, THREAD)
        (pause,) = paused["__interrupt__"]
        answer = edit(pause, approver="ana", arguments={"c1": {"text": "corrected"}})
        program.graph.invoke(Command(resume=answer), THREAD)
        assert effects() == ["corrected"]
        program.flush()
        assert program.journal.list_calls("acme", status="awaiting_confirmation") == []
    finally:
        program.close()


def test_an_edit_made_in_the_api_runs_the_corrected_call_once(client, service):
    """Ana edits the paused call in the API; the resumed graph runs her arguments, once."""
    program = GraphProgram(service.config, InMemorySaver(), add_note("first draft"))
    try:
        paused = program.graph.invoke({"messages": [HumanMessage("add a note")]}, THREAD)
        (pause,) = paused["__interrupt__"]
        program.flush()
        decide(client, pause, "edit", arguments='{"text": "corrected in the console"}')
        answer = decided(program.runtime, pause)
        assert answer is not None
        [decision] = answer["decisions"]
        assert decision.get("arguments") == '{"text": "corrected in the console"}'
        program.graph.invoke(Command(resume=answer), THREAD)
        assert effects() == ["corrected in the console"]  # never the shown draft
        program.flush()
        assert program.journal.list_calls("acme", status="awaiting_confirmation") == []
        assert decided(program.runtime, pause) is None
        assert effects() == ["corrected in the console"]
    finally:
        program.close()


def test_an_edit_made_while_the_program_was_down_runs_the_corrected_call_once(client, service):
    """The program stops; ana edits; the restarted graph runs her arguments, never the draft."""
    checkpointer = InMemorySaver()
    first_life = GraphProgram(service.config, checkpointer, add_note("first draft"))
    paused = first_life.graph.invoke({"messages": [HumanMessage("add a note")]}, THREAD)
    (pause,) = paused["__interrupt__"]
    first_life.close()
    decide(client, pause, "edit", arguments='{"text": "corrected meanwhile"}')

    second_life = GraphProgram(service.config, checkpointer)
    try:
        (found,) = second_life.graph.get_state(THREAD).interrupts
        answer = decided(second_life.runtime, found)
        assert answer is not None
        done = second_life.graph.invoke(Command(resume=answer), THREAD)
        assert "__interrupt__" not in done
        assert effects() == ["corrected meanwhile"]
    finally:
        second_life.close()

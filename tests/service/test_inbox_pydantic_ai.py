"""A Pydantic AI agent's deferred call, decided in the service's API (R7, R18).

The agent runs in its own program, its runtime given a journal on the service's store.
Its parked call is listed by ``/v1/confirmations`` with surface "library"; a person
approves or denies it there; the toolset reads the decision from the journal
(``decided``, ``wait_for_decisions``) and the run resumes with it — in the same
process, or after the program restarted — the call running exactly once, under the
digest that was approved.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import TYPE_CHECKING, Any

import pytest
from service_config import KEYS
from service_pack import effects

from toolbound import ConfirmationMismatch, Subject
from toolbound._clock import SystemClock
from toolbound.pipeline.call import CallContext
from toolbound.pipeline.runtime import Runtime
from toolbound.wiring import journal_for, policy_for

pydantic_ai = pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, DeferredToolRequests  # noqa: E402
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart  # noqa: E402
from pydantic_ai.models.function import FunctionModel  # noqa: E402

from toolbound.integrations.pydantic_ai import ToolboundToolset  # noqa: E402

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models.function import AgentInfo
    from starlette.testclient import TestClient

    from toolbound.config import ServiceConfig

AGENT = Subject(id="agent-1", tenant="acme")


class Script:
    """The model: one call of notes.add, then "done"; keeps what it was told."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.told: list[str] = []

    def __call__(self, messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        returned = [p for p in messages[-1].parts if p.part_kind == "tool-return"]
        if not returned:
            arguments = json.dumps({"text": self.text})
            return ModelResponse(parts=[ToolCallPart("notes__add", arguments, tool_call_id="c1")])
        self.told.extend(str(p.content) for p in returned)
        return ModelResponse(parts=[TextPart("done")])


class AgentProgram:
    """An agent's program on the service's store: runtime with a journal, toolset, agent.

    Runs go through ``asyncio.run`` (each loop closed after it), not ``run_sync``.
    """

    def __init__(self, config: ServiceConfig, script: Script, *, holder: str = "agent-program"):
        self.journal = journal_for(config.store_url)
        self.runtime = Runtime(
            policy=policy_for(config, SystemClock()), journal=self.journal, holder=holder
        )
        context = CallContext(subject=AGENT, tools=config.build_registry().toolset())
        self.toolset: ToolboundToolset[Any] = ToolboundToolset(self.runtime, context)
        self.agent = Agent(
            FunctionModel(script), toolsets=[self.toolset], output_type=[str, DeferredToolRequests]
        )

    def flush(self) -> None:
        assert self.runtime.recorder is not None
        self.runtime.recorder.flush()

    def close(self) -> None:
        self.runtime.close()
        self.journal.close()


def approve(client: TestClient, invocation_id: str, **body: object) -> dict[str, object]:
    [listed] = [
        c
        for c in client.get("/v1/confirmations", headers=auth()).json()["confirmations"]
        if c["invocation_id"] == invocation_id
    ]
    assert (listed["surface"], listed["decidable"]) == ("library", True)
    r = client.post(
        f"/v1/invocations/{invocation_id}/decision",
        json={"digest": listed["digest"], "decision": "approve", **body},
        headers=auth(),
    )
    assert r.status_code == 202, r.text
    return r.json()


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS['ana']}"}


def parked_id(requests: DeferredToolRequests) -> str:
    return str(requests.metadata["c1"]["toolbound"]["invocation_id"])


def test_an_agent_waiting_in_its_process_resumes_with_the_consoles_approval(client, service):
    """The run waits (wait_for_decisions) while ana approves in the API; it runs once."""
    script = Script("from the agent")
    program = AgentProgram(service.config, script)

    async def scenario() -> tuple[Any, str]:
        first = await program.agent.run("add a note")
        requests = first.output
        assert isinstance(requests, DeferredToolRequests)
        await asyncio.to_thread(program.flush)
        assert await asyncio.to_thread(program.toolset.decided, requests) is None  # not yet
        invocation_id = parked_id(requests)
        decider = threading.Timer(0.3, approve, args=(client, invocation_id))
        decider.start()
        results = await program.toolset.wait_for_decisions(requests, timeout=10)
        await asyncio.to_thread(decider.join)
        assert results is not None
        assert results.answered_by == {"c1": "ana"}
        second = await program.agent.run(
            message_history=first.all_messages(), deferred_tool_results=results
        )
        return second.output, invocation_id

    try:
        output, invocation_id = asyncio.run(scenario())
        assert output == "done"
        assert effects() == ["from the agent"]
        assert json.loads(script.told[0])["data"] is not None
        program.flush()
        ended = program.journal.get_call(invocation_id)
        assert (ended.status, ended.decision, ended.approver) == ("observed", "approved", "ana")
    finally:
        program.close()


def test_an_agent_restarted_after_the_approval_runs_the_call_once(client, service):
    """The program stops while parked; ana approves; the restarted program's run resumes."""
    first_life = AgentProgram(service.config, Script("after a restart"))
    first = asyncio.run(first_life.agent.run("add a note"))
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    history = first.all_messages()
    invocation_id = parked_id(requests)
    digest = requests.metadata["c1"]["toolbound"]["digest"]
    first_life.close()  # the process ends; the call stays in the journal's inbox
    approve(client, invocation_id)

    script = Script("after a restart")
    second_life = AgentProgram(service.config, script)
    try:
        results = second_life.toolset.decided(requests)
        assert results is not None
        again = asyncio.run(
            second_life.agent.run(message_history=history, deferred_tool_results=results)
        )
        assert again.output == "done"
        assert effects() == ["after a restart"]
        second_life.flush()
        ended = second_life.journal.get_call(invocation_id)
        assert (ended.status, ended.approver, ended.digest) == ("observed", "ana", digest)
        # The same results once more: the decision was applied; nothing runs twice.
        with pytest.raises(ConfirmationMismatch) as twice:
            asyncio.run(
                second_life.agent.run(message_history=history, deferred_tool_results=results)
            )
        assert twice.value.code == "not_decided"
        assert effects() == ["after a restart"]
    finally:
        second_life.close()


def test_a_denial_with_a_reason_in_the_api_reaches_the_agents_model(client, service):
    """Ana denies in the API with a reason; the model reads her words; nothing runs."""
    script = Script("refused")
    program = AgentProgram(service.config, script)
    try:
        first = asyncio.run(program.agent.run("add a note"))
        requests = first.output
        assert isinstance(requests, DeferredToolRequests)
        program.flush()
        invocation_id = parked_id(requests)
        digest = requests.metadata["c1"]["toolbound"]["digest"]
        r = client.post(
            f"/v1/invocations/{invocation_id}/decision",
            json={"digest": digest, "decision": "deny", "reason": "use the team board"},
            headers=auth(),
        )
        assert r.status_code == 202, r.text
        results = program.toolset.decided(requests)
        assert results is not None
        asyncio.run(
            program.agent.run(message_history=first.all_messages(), deferred_tool_results=results)
        )
        assert effects() == []
        assert any("use the team board" in told and "ana" in told for told in script.told)
    finally:
        program.close()


def test_an_edit_made_in_the_api_runs_the_corrected_call_once(client, service):
    """Ana edits the parked call in the API; the resumed run runs her arguments, once."""
    script = Script("first draft")
    program = AgentProgram(service.config, script)
    try:
        first = asyncio.run(program.agent.run("add a note"))
        requests = first.output
        assert isinstance(requests, DeferredToolRequests)
        program.flush()
        invocation_id = parked_id(requests)
        digest = requests.metadata["c1"]["toolbound"]["digest"]
        r = client.post(
            f"/v1/invocations/{invocation_id}/decision",
            json={"digest": digest, "decision": "edit", "arguments": '{"text": "corrected"}'},
            headers=auth(),
        )
        assert (r.status_code, r.json()["decision"]) == (202, "edited"), r.text
        results = program.toolset.decided(requests)
        assert results is not None
        assert results.answered_by == {"c1": "ana"}
        done = asyncio.run(
            program.agent.run(message_history=first.all_messages(), deferred_tool_results=results)
        )
        assert done.output == "done"
        assert effects() == ["corrected"]  # never the shown draft
        program.flush()
        shown = program.journal.get_call(invocation_id)
        assert (shown.status, shown.decision) == ("cancelled", "edited")
        assert program.journal.list_calls("acme", status="awaiting_confirmation") == []
    finally:
        program.close()


def test_an_edit_made_while_the_program_was_down_never_runs_the_shown_call(client, service):
    """Only the process holding a call applies an edit: the restarted run is refused."""
    first_life = AgentProgram(service.config, Script("first draft"))
    first = asyncio.run(first_life.agent.run("add a note"))
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    invocation_id = parked_id(requests)
    digest = requests.metadata["c1"]["toolbound"]["digest"]
    first_life.close()
    r = client.post(
        f"/v1/invocations/{invocation_id}/decision",
        json={"digest": digest, "decision": "edit", "arguments": '{"text": "corrected"}'},
        headers=auth(),
    )
    assert r.status_code == 202, r.text

    second_life = AgentProgram(service.config, Script("first draft"))
    try:
        results = second_life.toolset.decided(requests)
        assert results is not None
        with pytest.raises(ConfirmationMismatch) as refused:
            asyncio.run(
                second_life.agent.run(
                    message_history=first.all_messages(), deferred_tool_results=results
                )
            )
        assert refused.value.code == "not_decided"
        assert effects() == []
    finally:
        second_life.close()

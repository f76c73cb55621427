"""An OpenAI Agents SDK run's interruption, decided in the service's API (R7, R18).

The agent runs in its own program, its runtime given a journal on the service's store.
``GuardedTools.pending`` parks the interrupted call, so it is listed by
``/v1/confirmations`` with surface "library"; a person approves or denies it there;
``decided`` / ``wait_for_decisions`` apply the decision to the SDK's ``RunState``
(``approve``, or ``reject`` with the person's reason) and the run resumes — in the
same process, or after the program restarted with its serialized ``RunState`` — the
call running exactly once, under the digest that was approved.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import TYPE_CHECKING, Any

import pytest
from service_config import KEYS
from service_pack import effects

from toolbound import ConfigurationError, ConfirmationMismatch, Runtime, Subject
from toolbound._clock import SystemClock
from toolbound.pipeline.call import CallContext
from toolbound.wiring import journal_for, policy_for

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, RunState
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from toolbound.integrations.openai_agents import GuardedTools, PendingConfirmation

if TYPE_CHECKING:
    from starlette.testclient import TestClient

    from toolbound.config import ServiceConfig

AGENT = Subject(id="agent-1", tenant="acme")
NO_TRACING = RunConfig(tracing_disabled=True)


class Script(Model):
    """The model: one call of notes.add, then "done"; keeps every tool output it read."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.told: dict[str, str] = {}

    async def get_response(  # noqa: PLR0917 - the SDK's signature
        self,
        system_instructions: str | None,
        input: Any,  # noqa: A002 - the SDK's parameter name
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        del system_instructions, model_settings, tools, output_schema, handoffs, tracing
        del kwargs
        items = input if isinstance(input, list) else []
        outputs = [
            i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        self.told.update({str(i["call_id"]): str(i["output"]) for i in outputs})
        if not outputs:
            call = ResponseFunctionToolCall(
                type="function_call",
                id="fc_c1",
                call_id="c1",
                name="notes__add",
                arguments=json.dumps({"text": self.text}),
                status="completed",
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text="done", annotations=[])
        message = ResponseOutputMessage(
            type="message", id="msg", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
        raise NotImplementedError


class AgentProgram:
    """An agent's program on the service's store: runtime with a journal, tools, agent."""

    def __init__(self, config: ServiceConfig, script: Script, *, holder: str = "agent-program"):
        self.journal = journal_for(config.store_url)
        self.runtime = Runtime(
            policy=policy_for(config, SystemClock()), journal=self.journal, holder=holder
        )
        context = CallContext(subject=AGENT, tools=config.build_registry().toolset())
        self.guarded = GuardedTools(self.runtime, context)
        self.agent: Agent[Any] = Agent(name="notes", model=script, tools=self.guarded.tools)

    def flush(self) -> None:
        assert self.runtime.recorder is not None
        self.runtime.recorder.flush()

    def close(self) -> None:
        self.runtime.close()
        self.journal.close()


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS['ana']}"}


def decide(client: TestClient, pending: PendingConfirmation, decision: str, **body: object) -> None:
    """Ana decides the parked call in the API, as the inbox lists it."""
    [listed] = [
        c
        for c in client.get("/v1/confirmations", headers=auth()).json()["confirmations"]
        if c["invocation_id"] == pending.invocation_id
    ]
    assert (listed["surface"], listed["decidable"]) == ("library", True)
    assert listed["digest"] == pending.digest
    r = client.post(
        f"/v1/invocations/{pending.invocation_id}/decision",
        json={"digest": listed["digest"], "decision": decision, **body},
        headers=auth(),
    )
    assert r.status_code == 202, r.text


def test_a_run_waiting_in_its_process_resumes_with_the_consoles_approval(client, service):
    """The program waits (wait_for_decisions) while ana approves in the API; it runs once."""
    script = Script("from the agent")
    program = AgentProgram(service.config, script)

    async def scenario() -> tuple[Any, PendingConfirmation]:
        result = await Runner.run(program.agent, "add a note", run_config=NO_TRACING)
        (pending,) = await asyncio.to_thread(program.guarded.pending, result)
        assert pending.invocation_id is not None
        await asyncio.to_thread(program.flush)
        state = result.to_state()
        assert await asyncio.to_thread(program.guarded.decided, state) is False  # not yet
        decider = threading.Timer(0.3, decide, args=(client, pending, "approve"))
        decider.start()
        assert await program.guarded.wait_for_decisions(state, timeout=10) is True
        await asyncio.to_thread(decider.join)
        done = await Runner.run(program.agent, state, run_config=NO_TRACING)
        return done.final_output, pending

    try:
        output, pending = asyncio.run(scenario())
        assert output == "done"
        assert effects() == ["from the agent"]
        assert json.loads(script.told["c1"])["data"] is not None
        program.flush()
        ended = program.journal.get_call(str(pending.invocation_id))
        assert ended is not None
        assert (ended.status, ended.decision, ended.approver) == ("observed", "approved", "ana")
        assert ended.digest == pending.digest
        assert program.runtime.pending() == []
    finally:
        program.close()


def test_a_run_restarted_after_the_approval_runs_the_call_once(client, service):
    """The program stops while interrupted; ana approves; the restarted program resumes."""
    first_life = AgentProgram(service.config, Script("after a restart"))
    result = asyncio.run(Runner.run(first_life.agent, "add a note", run_config=NO_TRACING))
    (pending,) = first_life.guarded.pending(result)
    saved = result.to_state().to_string()
    parked = {pending.call_id: str(pending.invocation_id)}
    first_life.close()  # the process ends; the call stays in the journal's inbox
    decide(client, pending, "approve")

    script = Script("after a restart")
    second_life = AgentProgram(service.config, script)
    try:
        state = asyncio.run(RunState.from_string(second_life.agent, saved))
        assert second_life.guarded.decided(state, parked) is True
        done = asyncio.run(Runner.run(second_life.agent, state, run_config=NO_TRACING))
        assert done.final_output == "done"
        assert effects() == ["after a restart"]
        second_life.flush()
        ended = second_life.journal.get_call(parked["c1"])
        assert ended is not None
        assert (ended.status, ended.approver, ended.digest) == ("observed", "ana", pending.digest)
        # The same saved state once more: the decision was applied; nothing runs twice.
        again = asyncio.run(RunState.from_string(second_life.agent, saved))
        assert second_life.guarded.decided(again, parked) is False
        assert effects() == ["after a restart"]
    finally:
        second_life.close()


def test_a_denial_with_a_reason_in_the_api_reaches_the_agents_model(client, service):
    """Ana denies in the API with a reason; the model reads her words; nothing runs."""
    script = Script("refused")
    program = AgentProgram(service.config, script)
    try:
        result = asyncio.run(Runner.run(program.agent, "add a note", run_config=NO_TRACING))
        (pending,) = program.guarded.pending(result)
        program.flush()
        decide(client, pending, "deny", reason="use the team board")
        state = result.to_state()
        assert program.guarded.decided(state) is True
        asyncio.run(Runner.run(program.agent, state, run_config=NO_TRACING))
        assert effects() == []
        told = json.loads(script.told["c1"])
        assert told["error"]["code"] == "denied_by_person"
        assert "use the team board" in told["error"]["message"]
        assert "ana" in told["error"]["message"]
        program.flush()
        ended = program.journal.get_call(str(pending.invocation_id))
        assert ended is not None
        assert (ended.status, ended.decision) == ("rejected", "denied")
    finally:
        program.close()


def test_a_local_approval_is_recorded_in_the_inbox_and_runs_the_parked_call(service):
    """approve() in the program decides the very call in the inbox: one call, run once."""
    program = AgentProgram(service.config, Script("decided here"))
    try:
        result = asyncio.run(Runner.run(program.agent, "add a note", run_config=NO_TRACING))
        (pending,) = program.guarded.pending(result)
        state = result.to_state()
        program.guarded.approve(state, pending, approver="ana")
        asyncio.run(Runner.run(program.agent, state, run_config=NO_TRACING))
        assert effects() == ["decided here"]
        program.flush()
        ended = program.journal.get_call(str(pending.invocation_id))
        assert ended is not None
        assert (ended.status, ended.approver) == ("observed", "ana")
        assert program.journal.list_calls("acme", status="awaiting_confirmation") == []
    finally:
        program.close()


def test_decisions_are_read_from_a_journal_only(service):
    """A runtime without a journal has no inbox to read: no_journal."""
    runtime = Runtime(policy=policy_for(service.config, SystemClock()))
    context = CallContext(subject=AGENT, tools=service.config.build_registry().toolset())
    guarded = GuardedTools(runtime, context)
    agent: Agent[Any] = Agent(name="notes", model=Script("x"), tools=guarded.tools)
    result = asyncio.run(Runner.run(agent, "add a note", run_config=NO_TRACING))
    with pytest.raises(ConfigurationError) as missing:
        guarded.decided(result.to_state())
    assert missing.value.code == "no_journal"


def test_a_decision_in_the_console_and_one_in_the_program_one_wins(client, service):
    """Ana approves in the API first; the program's own denial is refused: not_pending."""
    program = AgentProgram(service.config, Script("the console won"))
    try:
        result = asyncio.run(Runner.run(program.agent, "add a note", run_config=NO_TRACING))
        (pending,) = program.guarded.pending(result)
        program.flush()
        decide(client, pending, "approve")
        state = result.to_state()
        with pytest.raises(ConfirmationMismatch) as late:
            program.guarded.approve(state, pending, approver="ops")
        assert late.value.code == "not_pending"
        assert program.guarded.decided(state) is True
        asyncio.run(Runner.run(program.agent, state, run_config=NO_TRACING))
        assert effects() == ["the console won"]
    finally:
        program.close()


def test_a_denial_in_the_program_is_the_parked_calls_with_its_reason(service):
    """deny() in the program ends the parked call in the runtime; the model reads why."""
    script = Script("refused here")
    program = AgentProgram(service.config, script)
    try:
        result = asyncio.run(Runner.run(program.agent, "add a note", run_config=NO_TRACING))
        (pending,) = program.guarded.pending(result)
        state = result.to_state()
        program.guarded.deny(state, pending, approver="ana", reason="not today")
        asyncio.run(Runner.run(program.agent, state, run_config=NO_TRACING))
        assert effects() == []
        message = json.loads(script.told["c1"])["error"]["message"]
        assert message == 'denied by a person (ana), who said: "not today"'
        program.flush()
        ended = program.journal.get_call(str(pending.invocation_id))
        assert ended is not None
        assert (ended.status, ended.decision, ended.approver) == ("rejected", "denied", "ana")
    finally:
        program.close()


def test_an_edit_made_in_the_api_runs_the_corrected_call_once(client, service):
    """Ana edits the parked call in the API; the resumed run runs her arguments, once."""
    script = Script("first draft")
    program = AgentProgram(service.config, script)
    try:
        result = asyncio.run(Runner.run(program.agent, "add a note", run_config=NO_TRACING))
        (pending,) = program.guarded.pending(result)
        program.flush()
        decide(client, pending, "edit", arguments='{"text": "corrected in the console"}')
        state = result.to_state()
        assert program.guarded.decided(state) is True
        done = asyncio.run(Runner.run(program.agent, state, run_config=NO_TRACING))
        assert done.final_output == "done"
        assert effects() == ["corrected in the console"]  # never the shown draft
        assert json.loads(script.told["c1"])["data"] is not None
        program.flush()
        shown = program.journal.get_call(str(pending.invocation_id))
        assert shown is not None
        assert (shown.status, shown.decision) == ("cancelled", "edited")
        assert program.runtime.pending() == []
    finally:
        program.close()


def test_an_edit_made_while_the_program_was_down_runs_once(client, service):
    """The program stops; ana edits; the restarted program runs her arguments, once."""
    first_life = AgentProgram(service.config, Script("first draft"))
    result = asyncio.run(Runner.run(first_life.agent, "add a note", run_config=NO_TRACING))
    (pending,) = first_life.guarded.pending(result)
    saved = result.to_state().to_string()
    parked = {pending.call_id: str(pending.invocation_id)}
    first_life.close()
    decide(client, pending, "edit", arguments='{"text": "corrected meanwhile"}')

    second_life = AgentProgram(service.config, Script("first draft"))
    try:
        state = asyncio.run(RunState.from_string(second_life.agent, saved))
        assert second_life.guarded.decided(state, parked) is True
        asyncio.run(Runner.run(second_life.agent, state, run_config=NO_TRACING))
        assert effects() == ["corrected meanwhile"]
        # The same saved state once more: the edit was claimed; nothing runs again.
        again = asyncio.run(RunState.from_string(second_life.agent, saved))
        if second_life.guarded.decided(again, parked):
            asyncio.run(Runner.run(second_life.agent, again, run_config=NO_TRACING))
        assert effects() == ["corrected meanwhile"]
    finally:
        second_life.close()

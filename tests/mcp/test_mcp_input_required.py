"""An upstream's input requests reach a 2026-07-28 caller, and its answers come back (SEP-2322).

The upstream is ``conformance_asking.py`` over stdio, configured
``relay_input_requests = true``: each of its tools answers a first call with an
``InputRequiredResult`` and completes once the retry carries the answers. The
callers are the official SDK client on 2026-07-28 connections over streamable HTTP:
``Client.call_tool`` runs the rounds itself (its callbacks answer), and
``session.call_tool(..., allow_input_required=True)`` shows each round.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_support import TOKENS, gateway, grant, run, serving, write_config

from toolbound._state import State

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from toolbound.trace import TraceEvent

ASKING = Path(__file__).parent / "conformance_asking.py"
PREFIX = "test_input_required_result_"
TOOLS = ("elicitation", "sampling", "multi_round", "request_state")


def asking_upstream(**settings: object) -> str:
    """The asking server as upstream ``ask``; its tools and prompt are reads of ``ask:read``."""
    extra = "".join(f"{k} = {str(v).lower()}\n" for k, v in settings.items())
    rules = "".join(
        f'\n[upstream.tools.{PREFIX}{t}]\neffect = "read"\ncapability = "ask:read"\n' for t in TOOLS
    )
    return (
        f"""
[[upstream]]
name = "ask"
command = ["{sys.executable}", "{ASKING}"]
prompts_capability = "ask:read"
{extra}{rules}"""
        + grant("mira", "ask:read")
        + grant("leo", "ask:read")
    )


RELAYING = {"relay_input_requests": True, "allow_elicitation": True, "allow_sampling": True}


@contextlib.asynccontextmanager
async def client(url: str, token: str, **callbacks: Any) -> AsyncIterator[Client]:
    """A 2026-07-28 SDK client carrying ``token``."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http), mode="2026-07-28", **callbacks) as c,
    ):
        yield c


async def _named(_ctx: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    del params
    return types.ElicitResult(action="accept", content={"name": "Alice"})


class Recorder:
    """A trace sink keeping every event with its invocation."""

    def __init__(self) -> None:
        self.events: list[tuple[str, TraceEvent]] = []

    def emit(self, invocation_id: str, event: TraceEvent) -> None:
        self.events.append((invocation_id, event))


def _per_invocation(recorder: Recorder) -> dict[str, list[str]]:
    """Each invocation's states, in order."""
    found: dict[str, list[str]] = {}
    for invocation_id, event in recorder.events:
        if event.state is not None:
            found.setdefault(invocation_id, []).append(event.state.value)
    return found


def test_an_upstream_s_elicitation_is_asked_of_the_caller_and_its_answer_completes_the_call(
    tmp_path: Path,
) -> None:
    """The caller's callback gets the upstream's question; the retry completes the call."""
    config = write_config(tmp_path, asking_upstream(**RELAYING))
    recorder = Recorder()
    asked: list[str] = []

    async def person(_ctx: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Alice"})

    async def scenario() -> types.CallToolResult:
        gw = gateway(config, sinks=[recorder])
        async with (
            serving(gw) as url,
            client(url, TOKENS["mira"], elicitation_callback=person) as c,
        ):
            return await c.call_tool(f"ask.{PREFIX}elicitation", {})

    result = run(scenario())
    assert result.is_error is False
    assert "Hello, Alice!" in str(result.content[0].text)  # type: ignore[union-attr]
    assert asked == ["What is your name?"]
    ends = [states[-1] for states in _per_invocation(recorder).values()]
    # Two rounds through the guard: the first commits nothing, the second is the call.
    assert sorted(ends) == sorted([State.FAILED_BEFORE_COMMIT.value, State.OBSERVED.value])
    refused = [e for _, e in recorder.events if e.state is State.FAILED_BEFORE_COMMIT]
    assert [e.data["problem"].code for e in refused] == ["input_required"]
    # The rounds read as one call: the second names the invocation that asked.
    asking = [(i, e) for i, e in recorder.events if e.kind == "input_required"]
    assert [e.data["requests"] for _, e in asking] == [{"user_name": "elicitation/create"}]
    rounds = [(i, e) for i, e in recorder.events if e.kind == "input_round"]
    assert [e.data for _, e in rounds] == [{"continues": asking[0][0], "answered": ["user_name"]}]
    assert rounds[0][0] != asking[0][0]


def test_each_round_s_state_is_the_gateway_s_seal_and_the_upstream_gets_its_own_back(
    tmp_path: Path,
) -> None:
    """Two rounds of input, a new sealed state each; the upstream's states never show."""
    config = write_config(tmp_path, asking_upstream(**RELAYING))

    async def scenario() -> list[types.CallToolResult | types.InputRequiredResult]:
        gw = gateway(config)
        name = f"ask.{PREFIX}multi_round"
        seen: list[types.CallToolResult | types.InputRequiredResult] = []
        async with (
            serving(gw) as url,
            client(url, TOKENS["mira"], elicitation_callback=_named) as c,
        ):
            first = await c.session.call_tool(name, {}, allow_input_required=True)
            seen.append(first)
            assert isinstance(first, types.InputRequiredResult)
            answer = types.ElicitResult(action="accept", content={"name": "Alice"})
            second = await c.session.call_tool(
                name, {}, input_responses={"step1": answer},
                request_state=first.request_state, allow_input_required=True,
            )  # fmt: skip
            seen.append(second)
            assert isinstance(second, types.InputRequiredResult)
            color = types.ElicitResult(action="accept", content={"color": "blue"})
            seen.append(
                await c.session.call_tool(
                    name,
                    {},
                    input_responses={"step2": color},
                    request_state=second.request_state,
                    allow_input_required=True,
                )
            )
        return seen

    first, second, last = run(scenario())
    assert isinstance(first, types.InputRequiredResult)
    assert isinstance(second, types.InputRequiredResult)
    assert list(first.input_requests or {}) == ["step1"]
    assert list(second.input_requests or {}) == ["step2"]
    assert first.request_state != second.request_state
    for state in (first.request_state, second.request_state):
        assert state is not None
        assert "round-" not in state  # sealed, not the upstream's plain text
    assert isinstance(last, types.CallToolResult)
    assert last.is_error is False


@pytest.mark.parametrize("who", ["tampered", "leo", "other tool"])
def test_a_state_not_sealed_for_this_caller_and_tool_is_refused_before_anything_runs(
    tmp_path: Path, who: str
) -> None:
    """A tampered state, or one sealed for another caller or tool: -32602."""
    config = write_config(tmp_path, asking_upstream(**RELAYING))
    recorder = Recorder()

    async def scenario() -> MCPError:
        gw = gateway(config, sinks=[recorder])
        name = f"ask.{PREFIX}request_state"
        async with serving(gw) as url:
            async with client(url, TOKENS["mira"], elicitation_callback=_named) as c:
                first = await c.session.call_tool(name, {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert first.request_state is not None
            state = first.request_state + ("-TAMPERED" if who == "tampered" else "")
            token = TOKENS["leo" if who == "leo" else "mira"]
            tool = f"ask.{PREFIX}elicitation" if who == "other tool" else name
            answer = types.ElicitResult(action="accept", content={"ok": True})
            async with client(url, token, elicitation_callback=_named) as c:
                with pytest.raises(MCPError) as refused:
                    await c.session.call_tool(
                        tool, {}, input_responses={"confirm": answer}, request_state=state
                    )
            return refused.value

    error = run(scenario())
    assert error.error.code == types.INVALID_PARAMS
    assert "requestState" in error.error.message
    # Only the first round ran: the refused retry never reached the runtime.
    assert len(_per_invocation(recorder)) == 1


def test_a_state_retried_with_other_arguments_sends_nothing_to_the_upstream(
    tmp_path: Path,
) -> None:
    """The seal binds the call's digest: the same state with other arguments is refused."""
    config = write_config(tmp_path, asking_upstream(**RELAYING))

    async def scenario() -> types.CallToolResult:
        gw = gateway(config)
        name = f"ask.{PREFIX}request_state"
        async with (
            serving(gw) as url,
            client(url, TOKENS["mira"], elicitation_callback=_named) as c,
        ):
            first = await c.session.call_tool(name, {"note": "a"}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            answer = types.ElicitResult(action="accept", content={"ok": True})
            return await c.session.call_tool(
                name, {"note": "b"}, input_responses={"confirm": answer},
                request_state=first.request_state,
            )  # fmt: skip

    result = run(scenario())
    assert result.is_error is True
    text = str(result.content[0].text)  # type: ignore[union-attr]
    assert "input_state_mismatch" in text
    assert "state-ok" not in text


def test_an_input_request_the_configuration_does_not_allow_is_refused_and_nobody_is_asked(
    tmp_path: Path,
) -> None:
    """Without allow_elicitation, an upstream's elicitation is a tool error."""
    config = write_config(tmp_path, asking_upstream(relay_input_requests=True))
    asked: list[object] = []

    async def person(_ctx: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"name": "Alice"})

    async def scenario() -> types.CallToolResult:
        gw = gateway(config)
        async with (
            serving(gw) as url,
            client(url, TOKENS["mira"], elicitation_callback=person) as c,
        ):
            return await c.call_tool(f"ask.{PREFIX}elicitation", {})

    result = run(scenario())
    assert result.is_error is True
    text = str(result.content[0].text)  # type: ignore[union-attr]
    assert "input_request_refused" in text
    assert "allow_elicitation is not set" in text
    assert asked == []


def test_an_input_request_the_caller_s_client_does_not_offer_is_a_missing_capability_error(
    tmp_path: Path,
) -> None:
    """A client that declared no elicitation gets -32021 naming it, not the question."""
    config = write_config(tmp_path, asking_upstream(**RELAYING))

    async def scenario() -> MCPError:
        gw = gateway(config)
        async with serving(gw) as url, client(url, TOKENS["mira"]) as c:
            with pytest.raises(MCPError) as refused:
                await c.session.call_tool(f"ask.{PREFIX}elicitation", {})
            return refused.value

    error = run(scenario())
    assert error.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error.error.data == {"requiredCapabilities": {"elicitation": {}}}


def test_a_2025_caller_s_calls_stay_on_the_handshake_connection(tmp_path: Path) -> None:
    """Without relay_input_requests, a 2026-07-28 caller never sees an InputRequiredResult."""
    config = write_config(tmp_path, asking_upstream(allow_elicitation=True))

    async def scenario() -> types.CallToolResult | types.InputRequiredResult:
        gw = gateway(config)
        async with (
            serving(gw) as url,
            client(url, TOKENS["mira"], elicitation_callback=_named) as c,
        ):
            return await c.session.call_tool(
                f"ask.{PREFIX}elicitation", {}, allow_input_required=True
            )

    result = run(scenario())
    # The upstream, on a 2025-era connection, cannot answer input_required.
    assert not isinstance(result, types.InputRequiredResult)
    assert result.is_error is True


def test_a_prompt_asks_the_caller_too_and_its_state_is_bound_to_the_prompt_s_arguments(
    tmp_path: Path,
) -> None:
    """prompts/get: asked, answered, rendered; the same state with other arguments: -32602."""
    config = write_config(tmp_path, asking_upstream(**RELAYING))
    name = f"ask.{PREFIX}prompt"

    async def scenario() -> tuple[types.GetPromptResult, MCPError]:
        gw = gateway(config)
        answer = types.ElicitResult(action="accept", content={"context": "the tests"})
        async with (
            serving(gw) as url,
            client(url, TOKENS["mira"], elicitation_callback=_named) as c,
        ):
            first = await c.session.get_prompt(name, {"a": "1"}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert list(first.input_requests or {}) == ["user_context"]
            done = await c.session.get_prompt(
                name, {"a": "1"}, input_responses={"user_context": answer},
                request_state=first.request_state, allow_input_required=True,
            )  # fmt: skip
            assert isinstance(done, types.GetPromptResult)
            with pytest.raises(MCPError) as refused:
                await c.session.get_prompt(
                    name, {"a": "2"}, input_responses={"user_context": answer},
                    request_state=first.request_state,
                )  # fmt: skip
        return done, refused.value

    done, refused = run(scenario())
    text = done.messages[0].content
    assert isinstance(text, types.TextContent)
    assert "Use this context: the tests" in text.text
    assert refused.error.code == types.INVALID_PARAMS

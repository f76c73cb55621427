"""The peer adapters run the cases through each framework as its docs show it.

These pin what each row is seen to do on a few telling cases, so a change in a
framework (or in an adapter) that moves a verdict is noticed here first.
"""

from __future__ import annotations

import pytest
from tool_runtime_conformance import bundled_cases, run_case

pytest.importorskip("pydantic_ai")

from tool_runtime_conformance.adapters.pydantic_ai_agent import (
    PydanticAIDefaults,
    PydanticAIGuarded,
)


def verdict(factory, case_id):
    case = next(c for c in bundled_cases() if c.id == case_id)
    return run_case(factory, case).verdict


@pytest.mark.parametrize(
    "case_id",
    ["r7-asks-before-running", "r7-approved-runs-once", "r7-denied-never-runs", "r4-extra-field"],
)
def test_pydantic_ai_guarded_asks_and_validates_where_defaults_do_not(case_id):
    """With approval and a schema check on, Pydantic AI asks and refuses; by default it runs."""
    assert verdict(PydanticAIGuarded, case_id) == "pass"
    assert verdict(PydanticAIDefaults, case_id) == "fail"


@pytest.mark.parametrize(
    "case_id",
    [
        "r7-arguments-replaced-after-approval",
        "r8-same-key-different-arguments",
        "r9-write-timeout",
        "r11-injected-instruction",
    ],
)
def test_pydantic_ai_guarded_still_fails_what_it_has_no_concept_for(case_id):
    """An approval names a call id, no key exists, a timeout is a retry, a result is plain text."""
    assert verdict(PydanticAIGuarded, case_id) == "fail"


def test_mcp_server_constraints_validate_what_plain_types_let_through():
    """Written with the schema's constraints, an MCPServer tool refuses out-of-range values."""
    pytest.importorskip("mcp")
    from tool_runtime_conformance.adapters.mcp_server import MCPServerDefaults, MCPServerGuarded

    for case_id in ("r4-enum", "r4-above-maximum", "r4-format-date-impossible"):
        assert verdict(MCPServerGuarded, case_id) == "pass", case_id
        assert verdict(MCPServerDefaults, case_id) == "fail", case_id


def test_mcp_text_that_cannot_travel_as_an_object_is_not_applicable():
    """MCP carries parsed objects: truncated text is n.a. with the reason, not a pass."""
    pytest.importorskip("mcp")
    from tool_runtime_conformance.adapters.mcp_server import MCPServerDefaults

    case = next(c for c in bundled_cases() if c.id == "r3-truncated")
    result = run_case(MCPServerDefaults, case)
    assert result.verdict == "not_applicable"
    assert "MCP carries a parsed JSON object" in result.reasons[0]


def test_mcp_has_no_approval_so_a_confirm_grant_does_not_stop_the_call():
    """Nothing in MCP asks a person: the refund runs at once."""
    pytest.importorskip("mcp")
    from tool_runtime_conformance.adapters.mcp_server import MCPServerGuarded

    case = next(c for c in bundled_cases() if c.id == "r7-asks-before-running")
    result = run_case(MCPServerGuarded, case)
    assert result.verdict == "fail"
    assert "refund must have 0 effect(s), had 1" in result.reasons


def test_langgraph_interrupt_asks_where_the_plain_tool_node_runs():
    """With interrupt() in confirm-marked tools LangGraph asks; ToolNode alone just runs."""
    pytest.importorskip("langgraph")
    from tool_runtime_conformance.adapters.langgraph_toolnode import (
        LangGraphDefaults,
        LangGraphGuarded,
    )

    for case_id in ("r7-asks-before-running", "r7-approved-runs-once", "r7-denied-never-runs"):
        assert verdict(LangGraphGuarded, case_id) == "pass", case_id
        assert verdict(LangGraphDefaults, case_id) == "fail", case_id
    # the interrupt is resumed by thread, whatever arguments the call now carries
    assert verdict(LangGraphGuarded, "r7-arguments-replaced-after-approval") == "fail"


def test_agents_sdk_needs_approval_asks_and_its_timeout_is_not_an_unknown_outcome():
    """needs_approval parks the call; a timed-out write comes back as an error, not unknown."""
    pytest.importorskip("agents")
    from tool_runtime_conformance.adapters.openai_agents_sdk import (
        AgentsSDKDefaults,
        AgentsSDKGuarded,
    )

    assert verdict(AgentsSDKGuarded, "r7-approved-runs-once") == "pass"
    assert verdict(AgentsSDKDefaults, "r7-asks-before-running") == "fail"
    assert verdict(AgentsSDKGuarded, "r9-write-timeout") == "fail"


def test_a_peer_without_a_streaming_path_marks_a_cut_off_call_not_applicable():
    """A cut-off stream is n.a. for the non-streaming adapters, with the reason."""
    from tool_runtime_conformance.adapter import CUT_OFF

    case = next(c for c in bundled_cases() if c.id == "r15-stream-ended-before-the-call")
    result = run_case(PydanticAIGuarded, case)
    assert result.verdict == "not_applicable"
    assert result.reasons == (CUT_OFF,)


def result_of(factory, case_id):
    return run_case(factory, next(c for c in bundled_cases() if c.id == case_id))


def test_pydantic_ai_sequential_writes_and_usage_limits_where_defaults_have_none():
    """Guarded: ``sequential`` keeps writes apart and ``UsageLimits`` ends the loop."""
    for case_id in ("r16-writes-one-at-a-time", "r16-writes-in-model-order"):
        assert verdict(PydanticAIGuarded, case_id) == "pass"
        assert verdict(PydanticAIDefaults, case_id) == "fail"
    stopped = result_of(PydanticAIGuarded, "r13-tool-call-budget")
    assert stopped.verdict == "pass"
    assert stopped.loop is not None
    assert "tool_calls_limit" in stopped.loop.detail
    ran_on = result_of(PydanticAIDefaults, "r13-tool-call-budget")
    assert "the loop must be stopped, it finished" in ran_on.reasons


def test_no_peer_stops_a_model_repeating_one_call():
    """None of the peers' loops notices the same call coming back with the same result."""
    from tool_runtime_conformance.adapters.langgraph_toolnode import LangGraphGuarded
    from tool_runtime_conformance.adapters.openai_agents_sdk import AgentsSDKGuarded

    for factory in (PydanticAIGuarded, AgentsSDKGuarded, LangGraphGuarded):
        assert verdict(factory, "r13-repeated-call-stops") == "fail"


def test_a_budget_a_framework_cannot_express_is_not_applicable():
    """The Agents SDK and LangGraph count model turns or graph steps, never tool calls."""
    from tool_runtime_conformance.adapters.langgraph_toolnode import (
        NO_TOOL_CALL_BUDGET as LANGGRAPH,
    )
    from tool_runtime_conformance.adapters.langgraph_toolnode import LangGraphGuarded
    from tool_runtime_conformance.adapters.openai_agents_sdk import (
        NO_TOOL_CALL_BUDGET as AGENTS,
    )
    from tool_runtime_conformance.adapters.openai_agents_sdk import AgentsSDKGuarded

    for factory, reason in ((AgentsSDKGuarded, AGENTS), (LangGraphGuarded, LANGGRAPH)):
        result = result_of(factory, "r13-tool-call-budget")
        assert result.verdict == "not_applicable"
        assert result.reasons == (reason,)
        assert verdict(factory, "r13-model-call-budget") == "pass"


def test_mcp_has_no_turn_loop_or_trace_and_says_so():
    """Each of the three is n.a. for an MCP server, with MCP's own reason."""
    pytest.importorskip("mcp")
    from tool_runtime_conformance.adapters.mcp_server import (
        NO_LOOP,
        NO_TRACE,
        NO_TURN,
        MCPServerGuarded,
    )

    for case_id, reason in (
        ("r16-results-pair-by-id", NO_TURN),
        ("r13-model-call-budget", NO_LOOP),
        ("r14-message-to-model-traced", NO_TRACE),
    ):
        result = result_of(MCPServerGuarded, case_id)
        assert result.verdict == "not_applicable"
        assert result.reasons == (reason,)


def test_the_agents_sdk_trace_keeps_arguments_and_output_but_no_call_id():
    """Its function spans hold the raw arguments and the output, never the tool call's id."""
    from tool_runtime_conformance.adapters.openai_agents_sdk import AgentsSDKGuarded

    result = result_of(AgentsSDKGuarded, "r14-message-to-model-traced")
    assert result.verdict == "fail"
    assert result.reasons == ("the trace does not name the call(s) ['c1']",)

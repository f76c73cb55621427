"""The kit's optional capabilities: turns of several calls, loops, and traces.

Each check is shown failing on an adapter that gets it wrong on purpose, and passing on
toolbound's, so no expectation can pass by default.
"""

from __future__ import annotations

import json
import threading
from types import MappingProxyType

import pytest
from tool_runtime_conformance import (
    CaseFormatError,
    LoopObservation,
    Observation,
    bundled_cases,
    run_case,
)
from tool_runtime_conformance.adapters.naive import NaiveRuntime
from tool_runtime_conformance.adapters.toolbound_library import ToolboundRuntime
from tool_runtime_conformance.cases import Loop, Turn, load_document
from tool_runtime_conformance.runner import MISSING


def case(case_id):
    return next(c for c in bundled_cases() if c.id == case_id)


class Plain:
    """Only the required protocol: no turn, no loop, no trace."""

    name = "plain"
    versions = MappingProxyType({})

    def start(self, setup):
        self.tools = {spec.name: tool for spec, tool in setup.tools}

    def propose(self, proposal, cancel):  # noqa: ARG002 - nothing to cancel
        value = self.tools[proposal.tool](json.loads(proposal.arguments))
        return Observation(kind="ran", text=json.dumps(value))

    def approve(self, call_id, shown):  # noqa: ARG002 - nothing waits
        return Observation(kind="failed", text="")

    def deny(self, call_id):  # noqa: ARG002 - nothing waits
        return Observation(kind="failed", text="")

    def close(self):
        pass


@pytest.mark.parametrize(
    ("case_id", "missing"),
    [
        ("r16-results-pair-by-id", "propose_turn"),
        ("r13-tool-call-budget", "run_loop"),
        ("r14-message-to-model-traced", "trace"),
    ],
)
def test_a_capability_the_adapter_lacks_is_not_applicable_with_its_name(case_id, missing):
    """A case needing an optional capability is n.a. for an adapter without it, never a pass."""
    result = run_case(Plain, case(case_id))
    assert result.verdict == "not_applicable"
    assert result.reasons == (MISSING[missing],)
    assert missing in result.reasons[0]


class Swapped(NaiveRuntime):
    """Runs a turn's calls at once and hands results back in completion order."""

    def propose_turn(self, calls, cancel, *, interleaved):  # noqa: ARG002 - not streamed
        finished: list[Observation] = []
        lock = threading.Lock()

        def run(call):
            seen = self.propose(call, cancel)
            with lock:
                finished.append(seen)

        threads = [threading.Thread(target=run, args=(c,)) for c in calls]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {c.call_id: seen for c, seen in zip(calls, finished, strict=True)}


def test_results_handed_back_by_completion_order_fail_the_pairing():
    """The slow first call's result under the second call's id is caught by ``texts``."""
    result = run_case(Swapped, case("r16-results-pair-by-id"))
    assert result.verdict == "fail"
    assert any("its own result, by id" in r for r in result.reasons)
    assert run_case(NaiveRuntime, case("r16-results-pair-by-id")).verdict == "pass"


def test_writes_started_together_fail_serial_and_order():
    """Two slow writes run at once: the world counts them overlapping, and out of order."""
    overlapping = run_case(Swapped, case("r16-writes-one-at-a-time"))
    assert overlapping.verdict == "fail"
    assert "2 writes ran at the same time" in overlapping.reasons
    ordered = run_case(Swapped, case("r16-writes-in-model-order"))
    assert ordered.verdict == "fail"
    assert any("must happen in the order ['c1', 'c2']" in r for r in ordered.reasons)


def test_a_loop_without_limits_is_seen_finishing_and_running_every_call():
    """The naive loop plays every turn: the unreached calls ran, and it was not stopped."""
    result = run_case(NaiveRuntime, case("r13-tool-call-budget"))
    assert result.verdict == "fail"
    assert "c3 must be not_run: the tool ran (1x)" in result.reasons
    assert "the loop must be stopped, it finished" in result.reasons
    assert result.loop == LoopObservation(end="finished", calls=result.loop.calls)


def test_toolbound_stops_its_loop_on_the_budget_and_says_which():
    """Toolbound's Loop ends with budget_exhausted on tool_calls; c3 never reached a tool."""
    result = run_case(ToolboundRuntime, case("r13-tool-call-budget"))
    assert result.verdict == "pass", result.reasons
    assert result.loop is not None
    assert result.loop.end == "stopped"
    assert "tool_calls" in result.loop.detail
    assert "c3" not in result.observations


class Forgetful(ToolboundRuntime):
    """toolbound, but its trace reader drops what came first and hides raw arguments."""

    def trace(self):
        events = list(super().trace())
        return [{k: v for k, v in e.items() if k != "data"} for e in events[len(events) // 2 :]]


def test_a_trace_that_loses_events_fails_append_only_and_content():
    """A trace read that loses its first events is not append-only and keeps no raw text."""
    result = run_case(Forgetful, case("r14-every-call-of-a-turn"))
    assert result.verdict == "fail"
    reasons = " ".join(result.reasons)
    assert "not append-only" in reasons
    assert "does not keep the raw argument text" in reasons
    assert run_case(ToolboundRuntime, case("r14-every-call-of-a-turn")).verdict == "pass"


DOC = {
    "format": 1,
    "title": "t",
    "tools": {
        "echo": {
            "description": "echo",
            "input_schema": {"type": "object"},
            "output_schema": {"type": "object"},
            "effect": "read",
            "capability": "echo",
            "returns": {},
            "resource": {"pointer": "/path", "kind": "path", "action": "read"},
        }
    },
    "subject": {"id": "u", "tenant": "t", "session": "s"},
    "grants": [{"capability": "echo", "actions": ["read"], "scope": {"path_root": "/srv"}}],
    "cases": [
        {
            "id": "t-1",
            "title": "t",
            "why": "w",
            "requirements": ["R16"],
            "tools": ["echo"],
            "steps": [
                {
                    "turn": {
                        "interleaved": True,
                        "calls": [
                            {"call_id": "a", "tool": "echo", "deltas": ["{", "}"]},
                            {"call_id": "b", "tool": "echo", "arguments": "{}"},
                        ],
                    }
                },
                {"loop": {"turns": [[{"call_id": "c", "tool": "echo", "arguments": "{}"}]]}},
            ],
            "expect": {
                "calls": {"a": "ran_once", "c": "not_run"},
                "effects": {},
                "loop": "stopped",
                "texts": {"b": "x"},
                "order": ["a", "b"],
                "serial": True,
                "trace": ["every_call", "append_only"],
            },
        }
    ],
}


def test_turns_loops_scopes_and_the_new_expectations_load():
    """The optional step kinds, tool resource, grant scope and expectations are read back."""
    (loaded,) = load_document(json.dumps(DOC), source="doc.json")
    turn, loop = loaded.steps
    assert isinstance(turn, Turn)
    assert turn.interleaved
    assert [c.call_id for c in turn.calls] == ["a", "b"]
    assert isinstance(loop, Loop)
    assert [c.call_id for c in loop.calls] == ["c"]
    assert loaded.tools[0].resource is not None
    assert loaded.tools[0].resource.of({"path": "x/y"}) == "x/y"
    assert loaded.grants[0].path_root == "/srv"
    assert loaded.grants[0].actions == frozenset({"read"})
    assert loaded.expect_loop == "stopped"
    assert loaded.expect_order == ("a", "b")
    assert loaded.expect_trace == ("every_call", "append_only")


def _broken(edit):
    doc = json.loads(json.dumps(DOC))
    edit(doc["cases"][0])
    with pytest.raises(CaseFormatError) as caught:
        load_document(json.dumps(doc), source="doc.json")
    return caught.value.problems


def test_a_turn_of_one_call_and_an_unknown_trace_check_are_refused_by_the_schema():
    """A turn holds at least two calls; trace checks come from a fixed list."""
    problems = _broken(lambda c: c["steps"][0]["turn"]["calls"].pop())
    assert problems[0][0] == "/cases/0/steps/0/turn/calls"
    problems = _broken(lambda c: c["expect"].update(trace=["everything"]))
    assert problems[0][0] == "/cases/0/expect/trace/0"


def test_names_the_schema_cannot_check_are_checked_by_the_loader():
    """A call id repeated across a turn and a loop, an order naming an unknown call."""
    problems = _broken(lambda c: c["steps"][1]["loop"]["turns"][0][0].update(call_id="a"))
    assert ("/cases/0/steps/1/loop", "call id 'a' is proposed twice") in problems
    problems = _broken(lambda c: c["expect"].update(order=["a", "zz"]))
    assert ("/cases/0/expect/order", "names call 'zz', never proposed") in problems
    problems = _broken(lambda c: c["steps"].pop())
    assert any(p == "/cases/0/expect/loop" for p, _ in problems)

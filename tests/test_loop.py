"""R13: the bounded loop, typed endings, tool sets by phase, request_capability."""

from __future__ import annotations

import threading

import pytest

from harness import SHARED_DATA, Harness, grant, spec
from toolbound import Registry
from toolbound.gates.authorize import IdScope
from toolbound.loop import Budgets, Loop, ModelTurn
from toolbound.testing import FakeTool, ScriptedModel, call, turn_from_stream


def turn(*calls, text="", cost=0.0):
    return ModelTurn(text=text, proposals=tuple(calls), cost=cost)


@pytest.fixture
def h(clock):
    harness = Harness(clock)
    harness.tool = FakeTool(returns=lambda a: {"text": str(a["text"]).upper()})
    harness.registry.register(spec(), harness.tool)
    yield harness
    harness.close()


def loop(h, model, **kw):
    return Loop(h.runtime, model, context=h.context(), **kw)


def test_finishes_when_the_model_answers(h):
    """A turn without calls ends the loop 'finished' with the model's text."""
    model = ScriptedModel([turn(call("echo", {"text": "a"}, "c1")), turn(text="A it is")])
    out = loop(h, model).run("shout a")
    assert out.kind == "finished"
    assert out.text == "A it is"
    assert out.usage.model_calls == 2
    assert out.usage.tool_calls == 1
    # the second model call saw the tool message, byte for byte
    tool_msg = model.contexts[1][-1]
    assert tool_msg["role"] == "tool"
    assert tool_msg["call_id"] == "c1"
    assert tool_msg["content"] == out.steps[0].batch["c1"].message.text
    assert out.steps[1].context_digest != out.steps[0].context_digest


@pytest.mark.parametrize(
    ("budgets", "reason"),
    [
        (Budgets(model_calls=2), "model_calls"),
        (Budgets(tool_calls=3), "tool_calls"),
        (Budgets(cost=0.25), "cost"),
        (Budgets(result_bytes=300), "result_bytes"),
    ],
)
def test_runtime_ends_the_loop_on_budget(h, budgets, reason):
    """Each budget ends the loop as budget_exhausted, whatever the model wants."""
    model = ScriptedModel(
        [turn(call("echo", {"text": f"x{i}"}, f"c{i}"), cost=0.1) for i in range(10)]
    )
    out = loop(h, model, budgets=replace_repeats(budgets)).run("go")
    assert out.kind == "budget_exhausted"
    assert out.reason == reason


def replace_repeats(b):
    from dataclasses import replace

    return replace(b, repeats=100)


def test_wall_time_budget(h):
    """A wall-time budget ends the loop even while the model keeps calling."""
    h.tool.delay = 0.05
    model = ScriptedModel([turn(call("echo", {"text": f"{i}"}, f"c{i}")) for i in range(50)])
    out = loop(h, model, budgets=Budgets(wall_time=0.2)).run("go")
    assert out.kind == "budget_exhausted"
    assert out.reason == "wall_time"


def test_repeated_call_without_progress_stops(h):
    """The same normalized call returning the same result again and again stops the loop."""
    # key order differs, digest does not
    script = [
        turn(call("echo", b'{"text": "same"}', "c1")),
        turn(call("echo", b'{ "text":"same" }', "c2")),
        turn(call("echo", b'{"text":"same"}', "c3")),
        turn(text="never reached"),
    ]
    out = loop(h, ScriptedModel(script), budgets=Budgets(repeats=2)).run("go")
    assert out.kind == "no_progress"
    assert out.usage.tool_calls == 3


def test_corrected_call_is_a_new_proposal(h):
    """After an error the model's corrected call is a new proposal with a new id."""
    model = ScriptedModel(
        [
            turn(call("echo", {"text": 1}, "c1")),
            turn(call("echo", {"text": "1"}, "c2")),
            turn(text="done"),
        ]
    )
    out = loop(h, model).run("go")
    first, second = out.steps[0].batch["c1"], out.steps[1].batch["c2"]
    assert first.kind == "rejected"
    assert second.kind == "observed"
    assert first.invocation_id != second.invocation_id


def test_tool_set_by_phase(h):
    """The visible tool set may change from one step to the next."""
    other = Registry()
    other.register(spec("plan"), FakeTool(returns={"text": "p"}))
    phases = [other.toolset(), h.registry.toolset()]
    model = ScriptedModel(
        [turn(call("echo", {"text": "a"}, "c1")), turn(call("echo", {"text": "a"}, "c2")), turn()]
    )
    out = loop(h, model, tools=lambda step: phases[min(step, 1)]).run("go")
    assert model.tools[0] == ("plan@v1",)
    assert out.steps[0].batch["c1"].problem.code == "unknown_tool"
    assert out.steps[1].batch["c2"].kind == "observed"


def test_request_capability_is_authorized(clock):
    """A model asks for a hidden tool; the policy decides; granted tools become visible."""
    h = Harness(
        clock,
        grant(),
        grant(capability="tools:request", scope=IdScope(frozenset({"echo"}))),
    )
    h.registry.register(spec(), FakeTool(returns={"text": "E"}))
    hidden = Registry()
    model = ScriptedModel(
        [
            turn(call("request_capability", {"tool": "secret", "reason": "x"}, "c1")),
            turn(call("request_capability", {"tool": "echo", "reason": "need it"}, "c2")),
            turn(call("echo", {"text": "a"}, "c3")),
            turn(text="done"),
        ]
    )
    out = Loop(
        h.runtime, model, context=h.context(), tools=hidden.toolset(), requestable=h.registry
    ).run("go")
    h.close()
    assert out.kind == "finished"
    assert model.tools[0] == ("request_capability@v1",)
    denied = out.steps[0].batch["c1"]
    assert denied.problem.code == "resource_out_of_scope"
    assert out.steps[1].batch["c2"].result.value == {"tool": "echo", "granted": True}
    assert "echo@v1" in model.tools[2]
    assert out.steps[2].batch["c3"].result.value == {"text": "E"}


def test_cancelled_loop_emits_nothing_more(h):
    """Once cancelled, the loop ends and no further call runs (R17 last row)."""
    cancel = threading.Event()

    def cancel_then_call(_transcript):
        cancel.set()
        return turn(call("echo", {"text": "late"}, "c9"))

    model = ScriptedModel([turn(call("echo", {"text": "a"}, "c1")), cancel_then_call])
    out = loop(h, model, cancel=cancel).run("go")
    assert out.kind == "cancelled"
    assert [c["text"] for c in h.tool.calls] == ["a"]
    assert out.transcript[-1]["role"] == "tool"


# -- driven by recorded provider streams ------------------------------------------

STREAMS = SHARED_DATA / "streams"
NO_STREAMS = "shared/data/streams is not there: the recorded loop tests did NOT run"


def weather_spec(name, props):
    return spec(
        name,
        capabilities=("test:use",),
        input_schema={
            "type": "object",
            "properties": {p: {"type": "string"} for p in props},
            "additionalProperties": False,
        },
        output_schema=None,
    )


@pytest.mark.skipif(not STREAMS.exists(), reason=NO_STREAMS)
def test_recorded_parallel_stream_drives_the_loop(clock):
    """A recorded two-call OpenAI stream: both calls run, results pair by id."""
    h = Harness(clock)
    weather = FakeTool(returns={"sky": "clear"})
    stock = FakeTool(returns={"price": 1})
    h.registry.register(weather_spec("GetWeatherArgs", ["city", "country", "units"]), weather)
    h.registry.register(weather_spec("get_stock_price", ["ticker", "exchange"]), stock)
    first = turn_from_stream(
        "openai-chat", (STREAMS / "openai-chat" / "f82268f2fefd.sse").read_bytes()
    )
    model = ScriptedModel([first, turn(text="done")])
    out = loop(h, model).run("weather and stock")
    h.close()
    assert out.kind == "finished"
    batch = out.steps[0].batch
    ids = [p.proposal_id for p in first.proposals]
    assert [o.proposal_id for o in batch.outcomes] == ids
    assert all(o.kind == "observed" for o in batch.outcomes)
    assert len(weather.calls) == len(stock.calls) == 1


@pytest.mark.skipif(not STREAMS.exists(), reason=NO_STREAMS)
def test_cut_off_stream_executes_nothing(clock):
    """A recording cut off mid-arguments: nothing runs, the model is told it was incomplete."""
    h = Harness(clock)
    tool = FakeTool(returns={})
    h.registry.register(weather_spec("make_file", ["filename", "lines_of_text"]), tool)
    data = (STREAMS / "anthropic" / "incomplete_partial_json_response.sse").read_bytes()
    cut = turn_from_stream("anthropic", data)
    model = ScriptedModel([cut, turn(text="sorry")])
    out = loop(h, model).run("write a file")
    h.close()
    assert out.kind == "finished"
    assert cut.proposals == ()
    assert len(cut.incomplete) == 1
    assert tool.calls == []
    told = model.contexts[1][-1]
    assert told["role"] == "tool"
    assert '"code":"incomplete_call"' in told["content"]

"""R11, R15, R18: the official SDKs on loopback, their results run by a real Runtime.

A replay server on 127.0.0.1 answers the ``openai`` and ``anthropic`` clients with
responses written here and with the recorded streams in ``shared/data/streams``.
What the SDKs return goes through the adapters into a :class:`toolbound.Runtime`,
and the tool results go back through the SDKs to the server, which records them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from replay_server import ReplayServer, Reply, json_reply, jsonl_as_sse, sse_reply

from toolbound import (
    CallContext,
    Grant,
    GrantPolicy,
    Outcome,
    Proposal,
    Registry,
    Runtime,
    Subject,
    ToolSpec,
)
from toolbound.adapters import NameMap
from toolbound.adapters import anthropic as an
from toolbound.adapters import openai_chat as chat
from toolbound.adapters import openai_responses as resp
from toolbound.testing import FakeTool

if TYPE_CHECKING:
    from collections.abc import Iterator

openai = pytest.importorskip("openai", reason="the openai SDK: pip install 'toolbound[openai]'")
anthropic = pytest.importorskip(
    "anthropic", reason="the anthropic SDK: pip install 'toolbound[anthropic]'"
)

STREAMS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "streams"
MIRA = Subject(id="mira", tenant="acme", session="s-1")
USER = [{"role": "user", "content": "What is the weather?"}]

# Every tool name the recordings and the scripted responses call.
STREAMED_TOOLS = (
    "get_weather",
    "GetWeatherArgs",
    "get_stock_price",
    "weather",
    "calculator",
    "json",
    "make_file",
    "updateIssueList",
    # Named like the recordings' custom tool and MCP approval request: never run.
    "write_sql",
    "create_short_url",
)
SCRIPTED_TOOLS = ("weather.current", "stock.quote")
STRICT_INPUT = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "units": {"type": ["string", "null"]}},
    "required": ["city", "units"],
    "additionalProperties": False,
}


@dataclass
class Bench:
    """A registry of FakeTools, a Runtime with a GrantPolicy, and a context for MIRA."""

    runtime: Runtime
    registry: Registry
    tools: dict[str, FakeTool] = field(default_factory=dict)

    @property
    def names(self) -> NameMap:
        return NameMap(self.registry.toolset().specs)

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return self.registry.toolset(*(f"{n}@v1" for n in SCRIPTED_TOOLS)).specs

    def run(self, proposals: tuple[Proposal, ...]) -> list[Outcome]:
        context = CallContext(subject=MIRA, tools=self.registry.toolset())
        return [self.runtime.run(p, context) for p in proposals]

    def calls(self) -> dict[str, list[object]]:
        return {name: tool.calls for name, tool in self.tools.items() if tool.calls}


@pytest.fixture
def bench() -> Iterator[Bench]:
    registry = Registry()
    tools: dict[str, FakeTool] = {}
    for name in (*STREAMED_TOOLS, *SCRIPTED_TOOLS):
        tools[name] = FakeTool(returns={"tool": name, "forecast": "sonnig, 21 °C"})
        registry.register(
            ToolSpec(
                name=name,
                version="v1",
                description=f"The {name} tool.",
                input_schema=STRICT_INPUT if name in SCRIPTED_TOOLS else {"type": "object"},
                effect="read",
                capabilities=("weather:read",),
            ),
            tools[name],
        )
    grant = Grant(
        subject=MIRA.id, tenant=MIRA.tenant, capability="weather:read", actions=frozenset({"read"})
    )
    with Runtime(policy=GrantPolicy([grant])) as runtime:
        yield Bench(runtime=runtime, registry=registry, tools=tools)


@pytest.fixture
def streams() -> Path:
    if not STREAMS.is_dir():
        pytest.skip(
            f"the recorded streams are missing at {STREAMS}: the SDK stream tests did NOT run"
        )
    return STREAMS


def openai_client(server: ReplayServer):
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)


def anthropic_client(server: ReplayServer):
    return anthropic.Anthropic(base_url=server.url, api_key="test-key", max_retries=0)


def assert_observed_and_paired(outcomes: list[Outcome], proposals: tuple[Proposal, ...]) -> None:
    assert [o.kind for o in outcomes] == ["observed"] * len(proposals)
    assert [o.proposal_id for o in outcomes] == [p.proposal_id for p in proposals]
    for outcome, proposal in zip(outcomes, proposals, strict=True):
        assert outcome.invocation.arguments == json.loads(proposal.arguments)


# -- non-streamed responses written here ------------------------------------------------

# Arguments as a model writes them: spacing, key order and non-ASCII, kept byte for byte.
ARGS_ZURICH = '{ "city": "Zürich", "units": "c" }'
ARGS_OSLO = '{"units":null,"city":"Oslo"}'

CHAT_COMPLETION = {
    "id": "chatcmpl-two-calls",
    "object": "chat.completion",
    "created": 1727346182,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "tool_calls": [
                    {
                        "id": "call_zurich",
                        "type": "function",
                        "function": {"name": "weather__current", "arguments": ARGS_ZURICH},
                    },
                    {
                        "id": "call_oslo",
                        "type": "function",
                        "function": {"name": "stock__quote", "arguments": ARGS_OSLO},
                    },
                ],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 44, "completion_tokens": 16, "total_tokens": 60},
}


def chat_text(text: str) -> dict[str, object]:
    return {
        "id": "chatcmpl-answer",
        "object": "chat.completion",
        "created": 1727346183,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }


def test_openai_chat_completion_with_two_calls_round_trips(bench: Bench):
    """Two tool_calls from the SDK run by id; the tool messages go back with those ids."""
    names = bench.names
    tools = chat.tool_definitions(bench.specs, names=names)
    replies = [json_reply(CHAT_COMPLETION), json_reply(chat_text("Zürich: sonnig."))]
    with ReplayServer(replies) as server, openai_client(server) as client:
        completion = client.chat.completions.create(model="test-model", messages=USER, tools=tools)
        calls = chat.read_completion(completion, names=names)
        outcomes = bench.run(calls.proposals)
        messages = chat.tool_messages(outcomes, proposals=calls.proposals)
        assistant = CHAT_COMPLETION["choices"][0]["message"]
        final = client.chat.completions.create(
            model="test-model", messages=[*USER, assistant, *messages]
        )

    assert [(p.proposal_id, p.name, p.arguments, p.model_call_id) for p in calls.proposals] == [
        ("call_zurich", "weather.current", ARGS_ZURICH.encode(), "chatcmpl-two-calls"),
        ("call_oslo", "stock.quote", ARGS_OSLO.encode(), "chatcmpl-two-calls"),
    ]
    assert_observed_and_paired(outcomes, calls.proposals)
    assert bench.calls() == {
        "weather.current": [{"city": "Zürich", "units": "c"}],
        "stock.quote": [{"units": None, "city": "Oslo"}],
    }
    first, second = server.requests
    assert first.path == "/v1/chat/completions"
    assert first.body["tools"] == tools  # the definitions reach the wire unchanged
    assert [t["function"]["strict"] for t in tools] == [True, True]
    sent = second.body["messages"][-2:]
    assert [m["tool_call_id"] for m in sent] == ["call_zurich", "call_oslo"]
    for message, outcome in zip(sent, outcomes, strict=True):
        assert message == {"role": "tool", "tool_call_id": outcome.proposal_id,
                           "content": outcome.message.text}  # fmt: skip
        [recorded] = outcome.trace.of_kind("tool_message")
        assert message["content"].encode() == recorded.data["content"]  # R14
    assert chat.read_completion(final).proposals == ()


RESPONSE = {
    "id": "resp_two_calls",
    "object": "response",
    "created_at": 1770803615,
    "status": "completed",
    "model": "gpt-5.1",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "function_call",
            "id": "fc_zurich",
            "call_id": "call_zurich",
            "name": "weather__current",
            "arguments": ARGS_ZURICH,
            "status": "completed",
        },
        {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "name": "create_short_url",
            "server_label": "zip1",
            "arguments": '{"url":"https://example.com/"}',
        },
        {
            "type": "function_call",
            "id": "fc_oslo",
            "call_id": "call_oslo",
            "name": "stock__quote",
            "arguments": ARGS_OSLO,
            "status": "completed",
        },
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}


def test_openai_responses_function_calls_round_trip(bench: Bench):
    """function_call items run by call_id; the MCP request does not; outputs keep call_id."""
    names = bench.names
    tools = resp.tool_definitions(bench.specs, names=names)
    answer = {**RESPONSE, "id": "resp_answer", "output": []}
    replies = [json_reply(RESPONSE), json_reply(answer)]
    with ReplayServer(replies) as server, openai_client(server) as client:
        response = client.responses.create(model="test-model", input="weather?", tools=tools)
        calls = resp.read_response(response, names=names)
        outcomes = bench.run(calls.proposals)
        outputs = resp.function_call_outputs(outcomes, proposals=calls.proposals)
        client.responses.create(model="test-model", previous_response_id=response.id, input=outputs)

    assert [(p.proposal_id, p.name, p.arguments) for p in calls.proposals] == [
        ("call_zurich", "weather.current", ARGS_ZURICH.encode()),
        ("call_oslo", "stock.quote", ARGS_OSLO.encode()),
    ]
    assert [o.kind for o in calls.other_items] == ["mcp_approval_request"]
    assert_observed_and_paired(outcomes, calls.proposals)
    assert "create_short_url" not in bench.calls()
    first, second = server.requests
    assert (first.path, first.body["tools"]) == ("/v1/responses", tools)
    assert second.body["previous_response_id"] == "resp_two_calls"
    assert second.body["input"] == [
        {"type": "function_call_output", "call_id": o.proposal_id, "output": o.message.text}
        for o in outcomes
    ]


MESSAGE = {
    "id": "msg_two_calls",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-20250514",
    "content": [
        {"type": "text", "text": "I'll check both."},
        {
            "type": "tool_use",
            "id": "toolu_zurich",
            "name": "weather__current",
            "input": {"city": "Zürich", "units": "c"},
        },
        {
            "type": "tool_use",
            "id": "toolu_oslo",
            "name": "stock__quote",
            "input": {"units": None, "city": "Oslo"},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 377, "output_tokens": 65},
}


def test_anthropic_message_with_two_tool_uses_round_trips(bench: Bench):
    """tool_use blocks run by id; tool_result blocks go back with tool_use_id and is_error."""
    names = bench.names
    tools = an.tool_definitions(bench.specs, names=names)
    answer = {
        **MESSAGE,
        "id": "msg_answer",
        "content": [{"type": "text", "text": "Sonnig."}],
        "stop_reason": "end_turn",
    }
    replies = [json_reply(MESSAGE), json_reply(answer)]
    with ReplayServer(replies) as server, anthropic_client(server) as client:
        message = client.messages.create(
            model="test-model", max_tokens=512, messages=USER, tools=tools
        )
        calls = an.read_message(message, names=names)
        outcomes = bench.run(calls.proposals)
        results = an.tool_results_message(outcomes, proposals=calls.proposals)
        final = client.messages.create(
            model="test-model",
            max_tokens=512,
            messages=[*USER, {"role": "assistant", "content": MESSAGE["content"]}, results],
        )

    # Anthropic sends a parsed object: the bytes are its compact serialization.
    assert [(p.proposal_id, p.name, p.arguments) for p in calls.proposals] == [
        ("toolu_zurich", "weather.current", '{"city":"Zürich","units":"c"}'.encode()),
        ("toolu_oslo", "stock.quote", b'{"units":null,"city":"Oslo"}'),
    ]
    assert_observed_and_paired(outcomes, calls.proposals)
    first, second = server.requests
    assert (first.path, first.body["tools"]) == ("/v1/messages", tools)
    assert second.body["messages"][-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": o.proposal_id,
                "content": o.message.text,
                "is_error": False,
            }
            for o in outcomes
        ],
    }
    assert an.read_message(final).proposals == ()


def test_anthropic_truncated_message_runs_nothing(bench: Bench):
    """A non-streamed message stopped for max_tokens runs none of its tool_use blocks."""
    cut = {**MESSAGE, "stop_reason": "max_tokens"}
    with ReplayServer([json_reply(cut)]) as server, anthropic_client(server) as client:
        message = client.messages.create(model="test-model", max_tokens=8, messages=USER)
    calls = an.read_message(message, names=bench.names)
    assert calls.proposals == ()
    assert [(i.call_id, i.reason) for i in calls.incomplete] == [
        ("toolu_zurich", "response_incomplete"),
        ("toolu_oslo", "arguments_incomplete"),
    ]
    assert bench.run(calls.proposals) == []
    assert bench.calls() == {}


def test_openai_chat_length_truncated_completion_runs_nothing(bench: Bench):
    """A completion cut at max_tokens (finish_reason length) runs none of its calls."""
    cut = json.loads(json.dumps(CHAT_COMPLETION))
    cut["choices"][0]["finish_reason"] = "length"
    with ReplayServer([json_reply(cut)]) as server, openai_client(server) as client:
        completion = client.chat.completions.create(model="test-model", messages=USER)
    calls = chat.read_completion(completion, names=bench.names)
    assert calls.proposals == ()
    assert [i.call_id for i in calls.incomplete] == ["call_zurich", "call_oslo"]


# -- recorded streams, accumulated by the SDKs' own helpers ---------------------------


@dataclass(frozen=True)
class Recording:
    """One recorded stream and what it must come to."""

    path: str
    calls: list[tuple[str, str, bytes]]
    incomplete: list[tuple[str, str]] = field(default_factory=list)
    others: list[str] = field(default_factory=list)
    segment: int | None = None  # for a file holding several responses, which one

    def body(self, root: Path) -> bytes:
        raw = (root / self.path).read_bytes()
        if self.path.endswith(".sse"):
            return raw
        lines = raw.decode().splitlines()
        if self.segment is not None:
            starts = [i for i, line in enumerate(lines) if '"type":"response.created"' in line]
            ends = [*starts[1:], len(lines)]
            lines = lines[starts[self.segment] : ends[self.segment]]
        return jsonl_as_sse(lines)

    @property
    def id(self) -> str:
        return self.path + ("" if self.segment is None else f"#{self.segment}")


CHAT_RECORDINGS = [
    Recording(
        "openai-chat/2018feb66ae1.sse",
        [("call_4XzlGBLtUe9dy3GVNV4jhq7h", "get_weather", b'{"city":"New York City"}')],
    ),
    Recording(
        "openai-chat/a247c49c5fcd.sse",
        [
            (
                "call_CTf1nWJLqSeRgDqaCG27xZ74",
                "get_weather",
                b'{"city":"San Francisco","state":"CA"}',
            )
        ],
    ),
    Recording(
        "openai-chat/c6aa7e397b71.sse",
        [
            (
                "call_c91SqDXlYFuETYv8mUHzz6pp",
                "GetWeatherArgs",
                b'{"city":"Edinburgh","country":"UK","units":"c"}',
            )
        ],
    ),
    Recording(
        "openai-chat/f82268f2fefd.sse",
        [
            (
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                b'{"city": "Edinburgh", "country": "GB", "units": "c"}',
            ),
            (
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                b'{"ticker": "AAPL", "exchange": "NASDAQ"}',
            ),
        ],
    ),
]

RESPONSES_RECORDINGS = [
    Recording(
        "openai-responses/azure-tool-call.1.jsonl",
        [("call_H5DxLSFnsGhiROnUiDHmgyc8", "weather", b'{"location":"San Francisco"}')],
    ),
    Recording("openai-responses/openai-custom-tool.1.jsonl", [], others=["custom_tool_call"]),
    Recording(
        "openai-responses/openai-mcp-tool-approval.1.jsonl", [], others=["mcp_approval_request"]
    ),
    *[
        Recording(
            "openai-responses/openai-reasoning-encrypted-content.1.jsonl",
            calls,
            segment=segment,
        )
        for segment, calls in enumerate(
            [
                [("call_AB6AaRZ1FYZB2RwS6A5vbdqn", "calculator", b'{"a":12,"b":7,"op":"add"}')],
                [
                    (
                        "call_Q6pW65MUgW9vF59BmItYGos3",
                        "calculator",
                        b'{"a":19,"b":3,"op":"multiply"}',
                    )
                ],
                [
                    (
                        "call_Zl5vIMnD7dVAjgU6FkhmiCZh",
                        "calculator",
                        b'{"a":57,"b":10,"op":"multiply"}',
                    )
                ],
                [],
            ]
        )
    ],
]

JSON_ELEMENTS = b'{"elements":[{"location":"San Francisco","temperature":58,"condition":"sunny"}]}'
ANTHROPIC_RECORDINGS = [
    Recording(
        "anthropic/tool_use_response.sse",
        [("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", b'{"location":"Paris"}')],
    ),
    Recording(
        "anthropic/incomplete_partial_json_response.sse",
        [],
        incomplete=[("toolu_01EKqbqmZrGRXy18eN7m9kvY", "arguments_incomplete")],
    ),
    Recording(
        "anthropic/anthropic-json-tool.1.jsonl",
        [("toolu_01KFbKqPYSuAKujiL6mTfzYA", "json", JSON_ELEMENTS)],
    ),
    Recording(
        "anthropic/anthropic-json-tool.2.jsonl",
        [("toolu_01KFbKqPYSuAKujiL6mTfzYA", "json", JSON_ELEMENTS)],
    ),
    Recording(
        "anthropic/anthropic-json-other-tool.1.jsonl",
        [("toolu_019Zvehfe1XQWweT1pm7okyt", "weather", b'{"location":"San Francisco"}')],
    ),
    Recording(
        "anthropic/anthropic-tool-no-args.jsonl",
        [("toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList", b"{}")],
    ),
    Recording("anthropic/anthropic-text.jsonl", []),
    Recording("anthropic/anthropic-refusal.jsonl", []),
    Recording("anthropic/anthropic-clear-tool-uses.1.jsonl", []),
]


def check_stream(bench: Bench, recording: Recording, calls, results, key: str) -> None:
    """The SDK's final object mapped to the recording's calls, run, answered by id."""
    assert [(p.proposal_id, p.name, p.arguments) for p in calls.proposals] == recording.calls
    assert [(i.call_id, i.reason) for i in calls.incomplete] == recording.incomplete
    assert [o.kind for o in calls.other_items] == recording.others
    outcomes = bench.run(calls.proposals)
    assert_observed_and_paired(outcomes, calls.proposals)
    assert [r[key] for r in results(outcomes, proposals=calls.proposals)] == [
        c[0] for c in recording.calls
    ]
    ran = {name: len(args) for name, args in bench.calls().items()}
    expected: dict[str, int] = {}
    for _, name, _ in recording.calls:
        expected[name] = expected.get(name, 0) + 1
    assert ran == expected  # nothing incomplete or foreign ran


@pytest.mark.parametrize("recording", CHAT_RECORDINGS, ids=lambda r: r.id)
def test_openai_chat_recorded_stream(bench: Bench, streams: Path, recording: Recording):
    """The chat stream helper's final completion maps to the recorded calls, bytes exact."""
    with (
        ReplayServer([sse_reply(recording.body(streams))]) as server,
        openai_client(server) as client,
        client.chat.completions.stream(model="test-model", messages=USER) as stream,
    ):
        completion = stream.get_final_completion()
    assert server.requests[0].body["stream"] is True
    calls = chat.read_completion(completion)
    assert calls.complete
    check_stream(bench, recording, calls, chat.tool_messages, "tool_call_id")


@pytest.mark.parametrize("recording", RESPONSES_RECORDINGS, ids=lambda r: r.id)
def test_openai_responses_recorded_stream(bench: Bench, streams: Path, recording: Recording):
    """The Responses stream helper's final response maps to the recorded function calls."""
    with (
        ReplayServer([sse_reply(recording.body(streams))]) as server,
        openai_client(server) as client,
        client.responses.stream(model="test-model", input="hi") as stream,
    ):
        response = stream.get_final_response()
    calls = resp.read_response(response)
    assert calls.complete
    check_stream(bench, recording, calls, resp.function_call_outputs, "call_id")


def test_openai_responses_error_stream_reaches_nothing(bench: Bench, streams: Path):
    """A stream that ends in an error event raises in the SDK; no call exists to run."""
    body = Recording("openai-responses/openai-error.1.jsonl", []).body(streams)
    with (
        ReplayServer([sse_reply(body)]) as server,
        openai_client(server) as client,
        pytest.raises(openai.APIError, match="quota"),
        client.responses.stream(model="test-model", input="hi") as stream,
    ):
        stream.get_final_response()
    assert bench.calls() == {}


@pytest.mark.parametrize("recording", ANTHROPIC_RECORDINGS, ids=lambda r: r.id)
def test_anthropic_recorded_stream(bench: Bench, streams: Path, recording: Recording):
    """The Messages stream helper's final message maps to the recorded tool uses."""
    with (
        ReplayServer([sse_reply(recording.body(streams))]) as server,
        anthropic_client(server) as client,
        client.messages.stream(model="test-model", max_tokens=512, messages=USER) as s,
    ):
        message = s.get_final_message()
    calls = an.read_message(message)
    check_stream(bench, recording, calls, an.tool_result_blocks, "tool_use_id")


def test_anthropic_cut_off_stream_looks_whole_to_the_sdk_but_runs_nothing(
    bench: Bench, streams: Path
):
    """The SDK fills the cut-off input by lenient partial parsing; toolbound still refuses."""
    body = (streams / "anthropic/incomplete_partial_json_response.sse").read_bytes()
    with (
        ReplayServer([sse_reply(body)]) as server,
        anthropic_client(server) as client,
        client.messages.stream(model="test-model", max_tokens=124, messages=USER) as s,
    ):
        message = s.get_final_message()
    tool_use = message.content[-1]
    # What the SDK hands over reads like a complete call …
    assert tool_use.input["filename"] == "taxes.txt"
    assert message.stop_reason == "max_tokens"
    # … so the stop reason, not the input's shape, decides (R15).
    calls = an.read_message(message)
    assert calls.proposals == ()
    [cut] = calls.incomplete
    assert (cut.call_id, cut.name, cut.reason) == (
        "toolu_01EKqbqmZrGRXy18eN7m9kvY",
        "make_file",
        "arguments_incomplete",
    )
    assert json.loads(cut.received_arguments) == tool_use.input
    assert bench.calls() == {}


# -- the guide's examples ---------------------------------------------------------------

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "adapters.md"


def guide_replies() -> dict[str, list[Reply]]:
    oslo = '{"city":"Oslo"}'
    completion = json.loads(json.dumps(CHAT_COMPLETION))
    completion["choices"][0]["message"]["tool_calls"] = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "weather__current", "arguments": oslo},
        }
    ]
    response = json.loads(json.dumps(RESPONSE))
    response["output"] = [{**response["output"][1], "arguments": oslo}]
    message = json.loads(json.dumps(MESSAGE))
    message["content"] = [{**message["content"][1], "input": {"city": "Oslo"}}]
    return {
        "chat": [json_reply(completion), json_reply(chat_text("Clear."))],
        "responses": [json_reply(response), json_reply({**RESPONSE, "output": []})],
        "anthropic": [json_reply(message), json_reply({**message, "stop_reason": "end_turn"})],
    }


@pytest.mark.parametrize(
    ("block", "provider", "sdk", "factory"),
    [
        (1, "chat", "openai", "OpenAI"),
        (2, "responses", "openai", "OpenAI"),
        (3, "anthropic", "anthropic", "Anthropic"),
    ],
    ids=["chat", "responses", "anthropic"],
)
def test_guide_examples_run(monkeypatch, block, provider, sdk, factory):
    """Each provider example in docs/adapters.md runs as written, against loopback."""
    import re

    code = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    module = {"openai": openai, "anthropic": anthropic}[sdk]
    real = getattr(module, factory)
    namespace: dict[str, object] = {}
    with ReplayServer(guide_replies()[provider]) as server:
        base = f"{server.url}/v1" if sdk == "openai" else server.url
        monkeypatch.setattr(
            module, factory, lambda: real(base_url=base, api_key="test-key", max_retries=0)
        )
        try:
            exec(code[0], namespace)  # noqa: S102 - the guide's own code
            exec(code[block], namespace)  # noqa: S102
        finally:
            for name in ("client", "runtime"):
                if name in namespace:
                    namespace[name].close()
    assert [o.kind for o in namespace["outcomes"]] == ["observed"]
    assert len(server.requests) == 2  # the results went back

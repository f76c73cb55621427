"""R15/R16 on real recordings: every stream in ../shared/data/streams, any chunking.

Each recorded response must assemble to exactly the calls it contains. The expected
calls are written out below (name, call id, arguments as JSON) and, for the
Responses recordings, also derived from the recording's own final data: the
``function_call_arguments.done`` and ``output_item.done`` events.

Chunking. For every response the bytes are assembled (a) whole, (b) one byte per
chunk, (c) split once at *every* byte position and (d) at Hypothesis-drawn chunk
sizes; all must give the same outcome. ``.jsonl`` recordings are re-framed as SSE
(``event:`` + ``data:`` with the original line, byte for byte) for (b)-(d), and are
also fed as JSON lines and as already-decoded events. A response larger than
``FULL_SPLIT_LIMIT`` bytes (only the first, 17 kB, response of the multi-turn
reasoning recording, whose size is mostly its encrypted reasoning) is split at every
position inside its tool-call region - from the event before the first
``function_call`` item to the end of the response - and left to (b) and (d)
elsewhere. Every-position splitting costs O(n^2) in bytes, and the whole region that
can hold a call is still covered byte by byte.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbound.streams import (
    AnthropicAssembler,
    ChatCompletionsAssembler,
    ResponsesAssembler,
    StreamError,
    StreamOutcome,
    assemble_events,
    assemble_jsonl,
    assemble_sse,
)
from toolbound.testing import turn_from_stream

STREAMS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "streams"

if not STREAMS.is_dir():
    pytest.skip(
        f"recorded streams not found at {STREAMS}: R15 recording tests NOT run",
        allow_module_level=True,
    )

ASSEMBLERS = {
    "openai-chat": ChatCompletionsAssembler,
    "openai-responses": ResponsesAssembler,
    "anthropic": AnthropicAssembler,
}
FULL_SPLIT_LIMIT = 12_000

# (name, call id, arguments) per recorded response, in the model's order.
EXPECTED: dict[str, list[tuple[str, str, object]]] = {
    "openai-chat/2018feb66ae1.sse": [
        ("get_weather", "call_4XzlGBLtUe9dy3GVNV4jhq7h", {"city": "New York City"}),
    ],
    "openai-chat/a247c49c5fcd.sse": [
        ("get_weather", "call_CTf1nWJLqSeRgDqaCG27xZ74", {"city": "San Francisco", "state": "CA"}),
    ],
    "openai-chat/c6aa7e397b71.sse": [
        (
            "GetWeatherArgs",
            "call_c91SqDXlYFuETYv8mUHzz6pp",
            {"city": "Edinburgh", "country": "UK", "units": "c"},
        ),
    ],
    "openai-chat/f82268f2fefd.sse": [
        (
            "GetWeatherArgs",
            "call_JMW1whyEaYG438VE1OIflxA2",
            {"city": "Edinburgh", "country": "GB", "units": "c"},
        ),
        (
            "get_stock_price",
            "call_DNYTawLBoN8fj3KN6qU9N1Ou",
            {"ticker": "AAPL", "exchange": "NASDAQ"},
        ),
    ],
    "anthropic/tool_use_response.sse": [
        ("get_weather", "toolu_01NRLabsLyVHZPKxbKvkfSMn", {"location": "Paris"}),
    ],
    "anthropic/incomplete_partial_json_response.sse": [],
    "anthropic/anthropic-clear-tool-uses.1.jsonl#0": [],
    "anthropic/anthropic-json-other-tool.1.jsonl#0": [
        ("weather", "toolu_019Zvehfe1XQWweT1pm7okyt", {"location": "San Francisco"}),
    ],
    "anthropic/anthropic-json-tool.1.jsonl#0": [
        (
            "json",
            "toolu_01KFbKqPYSuAKujiL6mTfzYA",
            {"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]},
        ),
    ],
    "anthropic/anthropic-json-tool.2.jsonl#0": [
        (
            "json",
            "toolu_01KFbKqPYSuAKujiL6mTfzYA",
            {"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]},
        ),
    ],
    "anthropic/anthropic-refusal.jsonl#0": [],
    "anthropic/anthropic-text.jsonl#0": [],
    "anthropic/anthropic-tool-no-args.jsonl#0": [
        ("updateIssueList", "toolu_01QE1WLsSVp5hy5Q3GmGTmjP", {}),
    ],
    "openai-responses/azure-tool-call.1.jsonl#0": [
        ("weather", "call_H5DxLSFnsGhiROnUiDHmgyc8", {"location": "San Francisco"}),
    ],
    "openai-responses/openai-custom-tool.1.jsonl#0": [],
    "openai-responses/openai-error.1.jsonl#0": [],
    "openai-responses/openai-mcp-tool-approval.1.jsonl#0": [],
    "openai-responses/openai-reasoning-encrypted-content.1.jsonl#0": [
        ("calculator", "call_AB6AaRZ1FYZB2RwS6A5vbdqn", {"a": 12, "b": 7, "op": "add"}),
    ],
    "openai-responses/openai-reasoning-encrypted-content.1.jsonl#1": [
        ("calculator", "call_Q6pW65MUgW9vF59BmItYGos3", {"a": 19, "b": 3, "op": "multiply"}),
    ],
    "openai-responses/openai-reasoning-encrypted-content.1.jsonl#2": [
        ("calculator", "call_Zl5vIMnD7dVAjgU6FkhmiCZh", {"a": 57, "b": 10, "op": "multiply"}),
    ],
    "openai-responses/openai-reasoning-encrypted-content.1.jsonl#3": [],
}

# How a response ends, where it is not simply complete: (complete, stop_reason, error_code).
ENDINGS: dict[str, tuple[bool, str | None, str | None]] = {
    "anthropic/incomplete_partial_json_response.sse": (False, "max_tokens", None),
    "anthropic/anthropic-refusal.jsonl#0": (False, "refusal", None),
    "openai-responses/openai-error.1.jsonl#0": (False, None, "insufficient_quota"),
}


@dataclass(frozen=True)
class Case:
    """One recorded response: its SSE bytes, and for .jsonl its lines and events."""

    key: str
    provider: str
    sse: bytes
    jsonl: bytes | None = None
    events: tuple[dict[str, object], ...] = ()

    def assemble(self, chunks) -> StreamOutcome:
        return assemble_sse(ASSEMBLERS[self.provider](), chunks)


def _jsonl_cases(path: Path) -> list[Case]:
    # Some recordings hold several responses (a multi-turn fixture): one assembler
    # assembles one response, so each response is a case of its own.
    responses: list[list[bytes]] = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        if not responses or json.loads(line)["type"] in {"response.created", "message_start"}:
            responses.append([])
        responses[-1].append(line)
    cases = []
    for n, lines in enumerate(responses):
        events = tuple(json.loads(line) for line in lines)
        sse = b"".join(
            b"event: " + e["type"].encode() + b"\ndata: " + line + b"\n\n"
            for e, line in zip(events, lines, strict=True)
        )
        key = f"{path.parent.name}/{path.name}#{n}"
        cases.append(
            Case(
                key=key,
                provider=path.parent.name,
                sse=sse,
                jsonl=b"\n".join(lines),
                events=events,
            )
        )
    return cases


def _cases() -> list[Case]:
    cases = []
    for path in sorted(STREAMS.glob("*/*")):
        if path.suffix == ".sse":
            key = f"{path.parent.name}/{path.name}"
            cases.append(Case(key=key, provider=path.parent.name, sse=path.read_bytes()))
        elif path.suffix == ".jsonl":
            cases += _jsonl_cases(path)
    return cases


CASES = _cases()
BY_KEY = {c.key: c for c in CASES}
WHOLE = {c.key: c.assemble([c.sse]) for c in CASES}
JSONL = [c for c in CASES if c.jsonl is not None]
RESPONSES = [c for c in CASES if c.provider == "openai-responses"]

each_case = pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])


def test_every_recording_has_an_expectation():
    """The table above covers exactly the recorded responses on disk."""
    assert sorted(BY_KEY) == sorted(EXPECTED)


@each_case
def test_recording_assembles_to_its_calls(case):
    """Each recorded response yields exactly its calls: names, ids and argument JSON."""
    outcome = WHOLE[case.key]
    got = [(p.name, p.proposal_id, json.loads(p.arguments)) for p in outcome.calls]
    assert got == EXPECTED[case.key]
    complete, stop_reason, error_code = ENDINGS.get(case.key, (True, outcome.stop_reason, None))
    assert (outcome.complete, outcome.stop_reason, outcome.error_code) == (
        complete,
        stop_reason,
        error_code,
    )
    if outcome.complete:
        assert outcome.incomplete == ()
    assert {p.model_call_id for p in outcome.calls} <= {outcome.model_call_id}


@pytest.mark.parametrize("case", RESPONSES, ids=[c.key for c in RESPONSES])
def test_responses_calls_equal_the_recordings_done_arguments(case):
    """For Responses, each call's bytes are the recording's own .done and item arguments."""
    done = {
        e["item_id"]: e["arguments"]
        for e in case.events
        if e["type"] == "response.function_call_arguments.done"
    }
    items = [
        e["item"]
        for e in case.events
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"
    ]
    assert [done[i["id"]] for i in items] == [i["arguments"] for i in items]
    outcome = WHOLE[case.key]
    assert [(p.proposal_id, p.name, p.arguments) for p in outcome.calls] == [
        (i["call_id"], i["name"], i["arguments"].encode()) for i in items
    ]


def test_incomplete_partial_json_executes_nothing():
    """The max_tokens Anthropic recording gives no Proposal and one incomplete call."""
    outcome = WHOLE["anthropic/incomplete_partial_json_response.sse"]
    assert outcome.calls == ()
    (call,) = outcome.incomplete
    assert (call.call_id, call.name, call.reason) == (
        "toolu_01EKqbqmZrGRXy18eN7m9kvY",
        "make_file",
        "arguments_incomplete",
    )
    assert call.received_arguments.startswith(b'{"filename": "taxes.txt"')
    assert call.received_arguments.endswith(b'\n"Filing taxes')
    with pytest.raises(json.JSONDecodeError):
        json.loads(call.received_arguments)


def test_two_call_chat_stream_pairs_calls_by_id():
    """f82268f2fefd.sse yields two calls, each id bound to its own name and arguments."""
    outcome = WHOLE["openai-chat/f82268f2fefd.sse"]
    by_id = {p.proposal_id: p for p in outcome.calls}
    assert len(by_id) == 2
    assert by_id["call_JMW1whyEaYG438VE1OIflxA2"].name == "GetWeatherArgs"
    assert json.loads(by_id["call_DNYTawLBoN8fj3KN6qU9N1Ou"].arguments) == {
        "ticker": "AAPL",
        "exchange": "NASDAQ",
    }


def test_non_function_items_are_reported_not_proposed():
    """The custom-tool and MCP-approval recordings give other items and no Proposal."""
    custom = WHOLE["openai-responses/openai-custom-tool.1.jsonl#0"]
    mcp = WHOLE["openai-responses/openai-mcp-tool-approval.1.jsonl#0"]
    assert custom.calls == mcp.calls == ()
    assert [(o.kind, o.name, o.content) for o in custom.other_items] == [
        ("custom_tool_call", "write_sql", b"SELECT * FROM users WHERE age > 25")
    ]
    ((kind, name, content),) = [(o.kind, o.name, o.content) for o in mcp.other_items]
    assert (kind, name) == ("mcp_approval_request", "create_short_url")
    assert json.loads(content or b"")["url"] == "https://ai-sdk.dev/"


def test_heartbeats_in_recordings_are_ignored():
    """Dropping every ping from a recording changes nothing."""
    case = BY_KEY["anthropic/anthropic-json-other-tool.1.jsonl#0"]
    assert sum(e["type"] == "ping" for e in case.events) == 5
    quiet = [e for e in case.events if e["type"] != "ping"]
    assert assemble_events(AnthropicAssembler(), quiet) == WHOLE[case.key]


MULTI = STREAMS / "openai-responses" / "openai-reasoning-encrypted-content.1.jsonl"
MULTI_CASES = [c for c in CASES if c.key.startswith("openai-responses/openai-reasoning")]


def test_a_whole_multi_response_file_is_refused_not_cut_short():
    """Fed as one stream, a four-response recording raises several_responses."""
    with pytest.raises(StreamError, match="assemble each response") as caught:
        assemble_jsonl(ResponsesAssembler(), [MULTI.read_bytes()])
    assert caught.value.code == "several_responses"


@pytest.mark.parametrize(
    "feed",
    [
        lambda: assemble_sse(ResponsesAssembler(), [b"".join(c.sse for c in MULTI_CASES)]),
        lambda: assemble_events(ResponsesAssembler(), [e for c in MULTI_CASES for e in c.events]),
        lambda: turn_from_stream("openai-responses", MULTI.read_bytes(), framing="jsonl"),
    ],
    ids=["sse", "events", "turn_from_stream"],
)
def test_several_responses_are_refused_on_every_path(feed):
    """As SSE, as decoded events, or as a scripted model turn: refused, never truncated."""
    with pytest.raises(StreamError) as caught:
        feed()
    assert caught.value.code == "several_responses"


def test_each_response_of_a_multi_response_recording_assembles_alone():
    """Split at each response.created, every response gives its own calls, all kept."""
    calls = [p.proposal_id for c in MULTI_CASES for p in c.assemble([c.sse]).calls]
    assert calls == [
        "call_AB6AaRZ1FYZB2RwS6A5vbdqn",
        "call_Q6pW65MUgW9vF59BmItYGos3",
        "call_Zl5vIMnD7dVAjgU6FkhmiCZh",
    ]


@each_case
def test_one_byte_per_chunk(case):
    """Fed one byte at a time, every recording assembles identically."""
    sse = case.sse
    assert case.assemble([sse[i : i + 1] for i in range(len(sse))]) == WHOLE[case.key]


def _split_positions(case: Case) -> range:
    if len(case.sse) <= FULL_SPLIT_LIMIT:
        return range(len(case.sse) + 1)
    start = case.sse.index(b'"type":"function_call"')
    start = case.sse.rindex(b"\n\n", 0, start)
    return range(start, len(case.sse) + 1)


@each_case
def test_split_at_every_position(case):
    """Split once at each byte position (see module docstring), the outcome is the same."""
    sse, whole = case.sse, WHOLE[case.key]
    for cut in _split_positions(case):
        assert case.assemble([sse[:cut], sse[cut:]]) == whole, cut


# Parametrised by key, not by Case: Hypothesis prints a test's arguments when it
# replays an example (a failure, or a run over its deadline), and a Case's repr is
# the whole recording (63 kB), which Hypothesis warns about, and the warning is an
# error here. No deadline: a run's time says how busy the machine is, not whether
# the chunking matters.
@pytest.mark.parametrize("key", list(BY_KEY))
@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.integers(min_value=1, max_value=700), min_size=1, max_size=30))
def test_random_chunk_sizes(key, sizes):
    """Any chunking drawn by Hypothesis gives the same outcome."""
    case = BY_KEY[key]
    sse, chunks, at, i = case.sse, [], 0, 0
    while at < len(sse):
        size = sizes[i % len(sizes)]
        chunks.append(sse[at : at + size])
        at, i = at + size, i + 1
    assert case.assemble(chunks) == WHOLE[case.key]


@pytest.mark.parametrize("case", JSONL, ids=[c.key for c in JSONL])
def test_jsonl_as_lines_and_as_events(case):
    """A .jsonl recording fed as JSON lines (whole, byte by byte) or as events agrees."""
    make, whole = ASSEMBLERS[case.provider], WHOLE[case.key]
    raw = case.jsonl or b""
    assert assemble_jsonl(make(), [raw]) == whole
    assert assemble_jsonl(make(), [raw[i : i + 1] for i in range(len(raw))]) == whole
    assert assemble_events(make(), case.events) == whole


NUMBERED = [c for c in RESPONSES if "sequence_number" in c.events[0]]  # not the custom tool


@pytest.mark.parametrize("case", NUMBERED, ids=[c.key for c in NUMBERED])
def test_recorded_responses_events_delivered_twice_are_dropped(case):
    """Every event of a Responses recording delivered twice assembles to the same outcome."""
    doubled = [e for event in case.events for e in (event, event)]
    assert assemble_events(ResponsesAssembler(), doubled) == WHOLE[case.key]


@each_case
def test_a_recording_replayed_after_its_end_changes_nothing(case):
    """The same bytes sent again after the response ended are ignored (R17, last row)."""
    outcome = case.assemble([case.sse, case.sse])
    assert outcome == WHOLE[case.key]

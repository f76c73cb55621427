"""R15, R18: the official SDKs' raw stream events, assembled by toolbound itself.

A replay server on 127.0.0.1 serves every recording in ``shared/data/streams`` as
``text/event-stream``. The ``openai`` and ``anthropic`` clients (sync and async) read
it with ``stream=True``, and the objects they yield go through
:mod:`toolbound.streams.sdk` into toolbound's assemblers. The outcome must be the
one toolbound assembles from the recording's bytes; where the SDK also accumulates
a final message (its ``.stream()`` helpers), the arguments must agree with it,
except where that accumulation makes up what never arrived.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from replay_server import ReplayServer, jsonl_as_sse, sse_reply

from toolbound import ConfigurationError
from toolbound.streams import (
    AnthropicAssembler,
    ChatCompletionsAssembler,
    JSONLinesDecoder,
    ResponsesAssembler,
    SSEDecoder,
    assemble_jsonl,
    assemble_sse,
    parse_event,
    sdk,
)

if TYPE_CHECKING:
    from toolbound.streams import StreamOutcome

openai = pytest.importorskip("openai", reason="the openai SDK: pip install 'toolbound[openai]'")
anthropic = pytest.importorskip(
    "anthropic", reason="the anthropic SDK: pip install 'toolbound[anthropic]'"
)

STREAMS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "streams"
MISSING = f"the recorded streams are missing at {STREAMS}: the SDK stream tests did NOT run"
MODEL = "test-model"
USER = [{"role": "user", "content": "What is the weather?"}]
MODES = ["sync", "async"]

ASSEMBLERS = {
    "openai-chat": ChatCompletionsAssembler,
    "openai-responses": ResponsesAssembler,
    "anthropic": AnthropicAssembler,
}
HELPERS = {
    "openai-chat": (sdk.assemble_openai_chat, sdk.assemble_openai_chat_async),
    "openai-responses": (sdk.assemble_openai_responses, sdk.assemble_openai_responses_async),
    "anthropic": (sdk.assemble_anthropic, sdk.assemble_anthropic_async),
}
# The event that starts a response, to split a file that holds several.
STARTS = {"openai-responses": "response.created", "anthropic": "message_start"}
# The SDK raises on these instead of yielding their events; tested on their own.
SDK_RAISES = {"openai-responses/openai-error.1.jsonl"}
CUT_OFF = "anthropic/incomplete_partial_json_response.sse"
TWO_CALLS = "openai-chat/f82268f2fefd.sse"


# -- the recordings -------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One recorded response: its provider, its bytes, and the SSE the API would send."""

    provider: str
    path: str  # relative to STREAMS
    raw: bytes  # the recording's own bytes (one response's lines of a JSON-lines file)
    segment: int | None = None

    @property
    def id(self) -> str:
        return self.path + ("" if self.segment is None else f"#{self.segment}")

    @property
    def jsonl(self) -> bool:
        return self.path.endswith(".jsonl")

    def served(self) -> bytes:
        return jsonl_as_sse(self.raw.decode().splitlines()) if self.jsonl else self.raw

    def raw_outcome(self) -> StreamOutcome:
        """What toolbound assembles from the recording's bytes, no SDK involved."""
        drive = assemble_jsonl if self.jsonl else assemble_sse
        return drive(ASSEMBLERS[self.provider](), [self.raw])

    def wire_events(self) -> list[dict[str, object]]:
        """The recording's events as JSON objects, up to Chat's ``[DONE]``."""
        if self.jsonl:
            lines = JSONLinesDecoder()
            return [*lines.feed(self.raw), *lines.close()]
        decoder = SSEDecoder()
        data = decoder.feed_data(self.raw)
        decoder.close()
        return [parse_event(d) for d in itertools.takewhile(lambda d: d != "[DONE]", data)]


def load(provider: str, path: Path) -> list[Case]:
    relative = path.relative_to(STREAMS).as_posix()
    if path.suffix == ".sse":
        return [Case(provider, relative, path.read_bytes())]
    lines = [line for line in path.read_bytes().splitlines(keepends=True) if line.strip()]
    starts = [i for i, line in enumerate(lines) if json.loads(line)["type"] == STARTS[provider]]
    if len(starts) <= 1:
        return [Case(provider, relative, b"".join(lines))]
    bounds = zip(starts, [*starts[1:], len(lines)], strict=True)
    return [
        Case(provider, relative, b"".join(lines[start:end]), segment)
        for segment, (start, end) in enumerate(bounds)
    ]


def recordings() -> list[object]:
    if not STREAMS.is_dir():
        return [pytest.param(None, id="streams-missing", marks=pytest.mark.skip(reason=MISSING))]
    return [
        pytest.param(case, id=case.id)
        for provider in ASSEMBLERS
        for path in sorted((STREAMS / provider).glob("*"))
        if path.suffix in {".sse", ".jsonl"}
        for case in load(provider, path)
        if case.path not in SDK_RAISES
    ]


def recording(path: str) -> Case:
    if not STREAMS.is_dir():
        pytest.skip(MISSING)
    provider = path.split("/", 1)[0]
    [case] = load(provider, STREAMS / path)
    return case


# -- the SDKs, sync and async -----------------------------------------------------------


def make_client(provider: str, server: ReplayServer, *, is_async: bool):
    if provider == "anthropic":
        cls = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        return cls(base_url=server.url, api_key="test-key", max_retries=0)
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)


def raw_stream(provider: str, client):
    """The SDK's plain ``stream=True`` call: one pydantic object per event."""
    if provider == "openai-chat":
        return client.chat.completions.create(model=MODEL, messages=USER, stream=True)
    if provider == "openai-responses":
        return client.responses.create(model=MODEL, input="What is the weather?", stream=True)
    return client.messages.create(model=MODEL, max_tokens=512, messages=USER, stream=True)


def accumulating_stream(provider: str, client):
    """The SDK's ``.stream()`` helper, which accumulates a final message."""
    if provider == "openai-chat":
        return client.chat.completions.stream(model=MODEL, messages=USER)
    if provider == "openai-responses":
        return client.responses.stream(model=MODEL, input="What is the weather?")
    return client.messages.stream(model=MODEL, max_tokens=512, messages=USER)


FINAL = {
    "openai-chat": "get_final_completion",
    "openai-responses": "get_final_response",
    "anthropic": "get_final_message",
}


def final_calls(provider: str, final) -> dict[str, tuple[str, object]]:
    """The calls in the SDK's accumulated message: call id → (name, arguments).

    OpenAI keeps the argument string; Anthropic has parsed it into an object.
    """
    if provider == "openai-chat":
        calls = final.choices[0].message.tool_calls or []
        return {c.id: (c.function.name, c.function.arguments) for c in calls}
    if provider == "openai-responses":
        items = [i for i in final.output if i.type == "function_call"]
        return {i.call_id: (i.name, i.arguments) for i in items}
    return {b.id: (b.name, b.input) for b in final.content if b.type == "tool_use"}


def run_sync(provider, server, *, accumulate, **options):
    with make_client(provider, server, is_async=False) as client:
        with raw_stream(provider, client) as stream:
            outcome = HELPERS[provider][0](stream, **options)
        if not accumulate:
            return outcome, None
        with accumulating_stream(provider, client) as stream:
            return outcome, final_calls(provider, getattr(stream, FINAL[provider])())


async def run_async(provider, server, *, accumulate, **options):
    async with make_client(provider, server, is_async=True) as client:
        async with await raw_stream(provider, client) as stream:
            outcome = await HELPERS[provider][1](stream, **options)
        if not accumulate:
            return outcome, None
        async with accumulating_stream(provider, client) as stream:
            return outcome, final_calls(provider, await getattr(stream, FINAL[provider])())


def through_sdk(
    mode: str, case: Case, *, accumulate: bool = True, **options
) -> tuple[StreamOutcome, dict[str, tuple[str, object]] | None]:
    """Serve ``case`` (twice if accumulating); assemble the SDK's raw events with toolbound."""
    replies = [sse_reply(case.served())] * (2 if accumulate else 1)
    with ReplayServer(replies) as server:
        if mode == "sync":
            result = run_sync(case.provider, server, accumulate=accumulate, **options)
        else:
            result = asyncio.run(run_async(case.provider, server, accumulate=accumulate, **options))
    assert server.requests[0].body["stream"] is True
    return result


def calls_of(outcome: StreamOutcome) -> list[tuple[str, str, bytes]]:
    return [(p.proposal_id, p.name, p.arguments) for p in outcome.calls]


def json_value(arguments: object) -> object:
    return json.loads(arguments) if isinstance(arguments, str | bytes) else arguments


# -- every recording --------------------------------------------------------------------


def test_the_recordings_cover_every_format_with_calls():
    """Every provider format has recordings here, and they propose calls between them."""
    if not STREAMS.is_dir():
        pytest.skip(MISSING)
    proposed = dict.fromkeys(ASSEMBLERS, 0)
    for param in recordings():
        case = param.values[0]
        proposed[case.provider] += len(case.raw_outcome().calls)
    assert all(proposed.values()), proposed  # 5 chat, 4 Responses, 5 Anthropic today


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", recordings())
def test_sdk_stream_assembles_like_the_recorded_bytes(case: Case, mode: str):
    """The SDK's raw events give the outcome the bytes give; its final message agrees."""
    expected = case.raw_outcome()
    outcome, final = through_sdk(mode, case)

    assert outcome == expected  # calls, incomplete, other items, stop reason, text, ids
    assert calls_of(outcome) == calls_of(expected)  # names, exact argument bytes, ids
    # Everything the SDK accumulated as a function call, toolbound proposed or withheld.
    assert set(final) == {p.proposal_id for p in outcome.calls} | {
        i.call_id for i in outcome.incomplete
    }
    for proposal in outcome.calls:
        name, arguments = final[proposal.proposal_id]
        assert name == proposal.name
        assert json_value(arguments) == json.loads(proposal.arguments)
        if isinstance(arguments, str):  # OpenAI keeps the string: the very bytes
            assert arguments.encode() == proposal.arguments


@pytest.mark.parametrize("case", recordings())
def test_sdk_events_dump_to_the_wire_json(case: Case):
    """Each SDK event, dumped at the boundary, is the recording's event JSON again."""
    with (
        ReplayServer([sse_reply(case.served())]) as server,
        make_client(case.provider, server, is_async=False) as client,
        raw_stream(case.provider, client) as stream,
    ):
        dumped = [sdk.event_mapping(event) for event in stream]
    # Key for key, in order; the only events the SDK keeps back are Anthropic's pings.
    assert dumped == [e for e in case.wire_events() if e.get("type") != "ping"]


@pytest.mark.parametrize("case", recordings())
def test_plain_mappings_are_events_too(case: Case):
    """The helpers take the events' JSON as mappings and assemble them like the bytes."""
    helper = HELPERS[case.provider][0]
    assert helper(case.wire_events()) == case.raw_outcome()


# -- the cases that matter most ----------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_cut_off_anthropic_stream_proposes_nothing_though_the_sdk_repairs_it(mode: str):
    """The cut-off tool input stays incomplete here; the SDK's accumulation fills it in."""
    case = recording(CUT_OFF)
    outcome, final = through_sdk(mode, case)

    assert outcome == case.raw_outcome()
    assert outcome.calls == ()
    assert (outcome.complete, outcome.stop_reason) == (False, "max_tokens")
    [cut] = outcome.incomplete
    assert (cut.call_id, cut.name, cut.reason) == (
        "toolu_01EKqbqmZrGRXy18eN7m9kvY",
        "make_file",
        "arguments_incomplete",
    )
    # What arrived is a JSON prefix, cut inside a string …
    assert cut.received_arguments.startswith(b'{"filename": "taxes.txt", "lines_of_text": [')
    assert cut.received_arguments.endswith(b'"Filing taxes')
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut.received_arguments)
    # … which the SDK's lenient partial parsing turns into a complete-looking call.
    name, repaired = final[cut.call_id]
    assert name == "make_file"
    assert repaired["filename"] == "taxes.txt"
    assert repaired["lines_of_text"][:2] == [
        "# COMPREHENSIVE TAX GUIDE FOR INDIVIDUALS WITH MULTIPLE W-2s",
        "",
    ]


@pytest.mark.parametrize("mode", MODES)
def test_two_call_chat_stream_yields_two_proposals_paired_by_id(mode: str):
    """Both calls come out whole, in order, each paired with the SDK's own call by id."""
    case = recording(TWO_CALLS)
    released = []
    outcome, final = through_sdk(mode, case, on_ready=released.append)

    assert calls_of(outcome) == [
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
    ]
    assert calls_of(outcome) == calls_of(case.raw_outcome())
    assert [(r.proposal, r.early) for r in released] == [(p, False) for p in outcome.calls]
    by_id = {p.proposal_id: (p.name, p.arguments.decode()) for p in outcome.calls}
    assert by_id == final


@pytest.mark.parametrize("mode", MODES)
def test_error_stream_raises_in_the_sdk_and_releases_nothing(mode: str):
    """The bytes give a failed outcome; the SDK raises its APIError before one exists."""
    case = recording("openai-responses/openai-error.1.jsonl")
    expected = case.raw_outcome()
    assert (expected.calls, expected.error_code) == ((), "insufficient_quota")

    released = []
    with pytest.raises(openai.APIError, match="quota"):
        through_sdk(mode, case, accumulate=False, on_ready=released.append)
    assert released == []


def test_early_release_through_the_sdk_comes_at_the_blocks_stop():
    """A read call allowed to start early is released at content_block_stop, not later."""
    case = recording("anthropic/tool_use_response.sse")
    seen: list[str] = []
    released: list[tuple[str, str, bool]] = []

    def tap(stream):
        for event in stream:
            seen.append(event.type)
            yield event

    def on_ready(ready):
        released.append((ready.proposal.proposal_id, seen[-1], ready.early))

    with (
        ReplayServer([sse_reply(case.served())]) as server,
        make_client(case.provider, server, is_async=False) as client,
        raw_stream(case.provider, client) as stream,
    ):
        outcome = sdk.assemble_anthropic(
            tap(stream), may_start_early=lambda name: name == "get_weather", on_ready=on_ready
        )
    assert released == [("toolu_01NRLabsLyVHZPKxbKvkfSMn", "content_block_stop", True)]
    assert seen[-1] == "message_delta"  # the response went on after the release
    assert calls_of(outcome) == calls_of(case.raw_outcome())


# -- the boundary itself, no server -----------------------------------------------------


def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


OPENED = chunk(
    {"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "{}"}}]}
)
FINISHED = chunk({}, "tool_calls")


class Dumps:
    """A stand-in SDK object whose model_dump gives or raises what it is told."""

    def __init__(self, result: object) -> None:
        self.result = result

    def model_dump(self, *, mode, by_alias, exclude_unset):
        assert (mode, by_alias, exclude_unset) == ("json", True, True)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def assemble_chat(mode: str, events: list[object], pulled: list[object]) -> StreamOutcome:
    """Run the chat helper over ``events``, noting in ``pulled`` each one it reads."""

    def source():
        for event in events:
            pulled.append(event)
            yield event

    async def async_source():
        for event in source():
            yield event

    if mode == "sync":
        return sdk.assemble_openai_chat(source())
    return asyncio.run(sdk.assemble_openai_chat_async(async_source()))


@pytest.mark.parametrize(
    ("event", "code"),
    [
        (Dumps([1, 2]), "not_an_object"),
        (Dumps(ValueError("no JSON form")), "invalid_json"),
    ],
    ids=["not-an-object", "no-json-form"],
)
@pytest.mark.parametrize("mode", MODES)
def test_an_event_without_a_json_object_fails_the_stream(event, code, mode):
    """A dump that is no JSON object fails the outcome; the call before it is withheld."""
    outcome = assemble_chat(mode, [OPENED, event, FINISHED], [])
    assert (outcome.calls, outcome.error_code, outcome.complete) == ((), code, False)
    assert [(i.call_id, i.received_arguments) for i in outcome.incomplete] == [("call_1", b"{}")]


@pytest.mark.parametrize("mode", MODES)
def test_an_object_that_is_no_event_is_a_programming_error(mode):
    """Something with no model_dump that is no mapping raises ConfigurationError."""
    with pytest.raises(ConfigurationError, match="not a stream event") as caught:
        assemble_chat(mode, [OPENED, b"data: {}"], [])
    assert caught.value.code == "not_a_stream_event"


@pytest.mark.parametrize("mode", MODES)
def test_reading_stops_at_the_terminal_event(mode):
    """Events after the one that ends the response are never pulled from the SDK (R17)."""
    pulled: list[object] = []
    outcome = assemble_chat(mode, [OPENED, FINISHED, chunk({})], pulled)
    assert [p.proposal_id for p in outcome.calls] == ["call_1"]
    assert pulled == [OPENED, FINISHED]

"""R15/R16: events → tool calls for the three formats, on hand-written event tables.

The same scenarios run against every format: two calls (``lookup`` then ``refund``)
in one response. Hypothesis interleaves the fragments of several calls to show that
buffers never mix.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolbound.streams
from toolbound._errors import IllegalTransition
from toolbound.streams import (
    AnthropicAssembler,
    ChatCompletionsAssembler,
    Ready,
    ResponsesAssembler,
    StreamAssembler,
    StreamError,
    StreamLimits,
    assemble_events,
    assemble_jsonl,
    assemble_sse,
)
from toolbound.streams.assemble import PHASES
from toolbound.streams.sdk import assemble_openai_responses

if TYPE_CHECKING:
    from collections.abc import Callable

LOOKUP = ("call_a", "lookup", ['{"order', '_id": "A-1', '04"}'])
REFUND = ("call_b", "refund", ['{"amount"', ": 12.5", ', "note": "caf\u00e9 \u7231"}'])


def joined(call):
    return "".join(call[2]).encode()


# -- event builders, one family per format ------------------------------------------


def chat_chunk(*, tool_calls=None, content=None, finish=None, choice=0):
    delta: dict[str, object] = {}
    if content is not None:
        delta["content"] = content
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": choice, "delta": delta, "finish_reason": finish}],
    }


def chat_first(index, call_id, name, args=""):
    return {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": args},
    }


def chat_more(index, args):
    return {"index": index, "function": {"arguments": args}}


def chat_call(index, call):
    call_id, name, pieces = call
    first = chat_chunk(tool_calls=[chat_first(index, call_id, name)])
    return [first] + [chat_chunk(tool_calls=[chat_more(index, p)]) for p in pieces]


def resp_added(index, call, kind="function_call"):
    call_id, name, _ = call
    item = {"id": f"fc_{call_id}", "type": kind, "status": "in_progress"}
    item |= {"arguments": "", "call_id": call_id, "name": name}
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def resp_delta(index, call, piece):
    return {
        "type": "response.function_call_arguments.delta",
        "item_id": f"fc_{call[0]}",
        "output_index": index,
        "delta": piece,
    }


def resp_args_done(index, call, args=None):
    args = "".join(call[2]) if args is None else args
    return {
        "type": "response.function_call_arguments.done",
        "item_id": f"fc_{call[0]}",
        "output_index": index,
        "arguments": args,
    }


def resp_item(call, args=None, status="completed", name=None):
    call_id, call_name, pieces = call
    return {
        "id": f"fc_{call_id}",
        "type": "function_call",
        "status": status,
        "arguments": "".join(pieces) if args is None else args,
        "call_id": call_id,
        "name": call_name if name is None else name,
    }


def resp_item_done(index, call, **kw):
    return {
        "type": "response.output_item.done",
        "output_index": index,
        "item": resp_item(call, **kw),
    }


def resp_call(index, call):
    deltas = [resp_delta(index, call, p) for p in call[2]]
    return [
        resp_added(index, call),
        *deltas,
        resp_args_done(index, call),
        resp_item_done(index, call),
    ]


def resp_created():
    return {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}


def resp_completed(*calls):
    output = [resp_item(c) for c in calls]
    return {
        "type": "response.completed",
        "response": {"id": "resp_1", "status": "completed", "output": output},
    }


def numbered(events):
    return [{**e, "sequence_number": i} for i, e in enumerate(events)]


def ant_start():
    return {"type": "message_start", "message": {"id": "msg_1", "content": [], "stop_reason": None}}


def ant_tool_start(index, call, kind="tool_use"):
    block = {"type": kind, "id": call[0], "name": call[1], "input": {}}
    return {"type": "content_block_start", "index": index, "content_block": block}


def ant_json(index, piece):
    delta = {"type": "input_json_delta", "partial_json": piece}
    return {"type": "content_block_delta", "index": index, "delta": delta}


def ant_stop(index):
    return {"type": "content_block_stop", "index": index}


def ant_end(reason):
    return {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None}}


def ant_call(index, call):
    deltas = [ant_json(index, p) for p in call[2]]
    return [ant_tool_start(index, call), *deltas, ant_stop(index)]


PING = {"type": "ping"}
ANT_STOP = {"type": "message_stop"}


# -- one two-call scenario per format ----------------------------------------------------


def chat_two():
    text = chat_chunk(content="Checking.")
    finish = chat_chunk(finish="tool_calls")
    return [text, *chat_call(0, LOOKUP), *chat_call(1, REFUND), finish]


def responses_two():
    events = [
        resp_created(),
        *resp_call(0, LOOKUP),
        *resp_call(1, REFUND),
        resp_completed(LOOKUP, REFUND),
    ]
    return numbered(events)


def anthropic_two():
    text = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Checking."},
        },
        ant_stop(0),
    ]
    return [
        ant_start(),
        *text,
        PING,
        *ant_call(1, LOOKUP),
        *ant_call(2, REFUND),
        ant_end("tool_use"),
        ANT_STOP,
    ]


FORMATS: dict[str, tuple[Callable[..., StreamAssembler], Callable[[], list[dict]]]] = {
    "openai-chat": (ChatCompletionsAssembler, chat_two),
    "openai-responses": (ResponsesAssembler, responses_two),
    "anthropic": (AnthropicAssembler, anthropic_two),
}
# The event at which the response has ended normally (Anthropic: the message_delta).
TERMINAL = {"openai-chat": -1, "openai-responses": -1, "anthropic": -2}


def run(make, events, **kw):
    assembler = make(**kw)
    released: list[tuple[int, Ready]] = []
    for i, event in enumerate(events):
        released += [(i, r) for r in assembler.feed(event)]
    return released, assembler.finish()


@pytest.fixture(params=list(FORMATS))
def fmt(request):
    return request.param


def test_successful_response_releases_all_calls_at_its_end(fmt):
    """Every call is released by the response's final event, in the model's order."""
    make, build = FORMATS[fmt]
    events = build()
    released, outcome = run(make, events)
    end = len(events) + TERMINAL[fmt]
    assert [i for i, _ in released] == [end, end]
    assert [r.early for _, r in released] == [False, False]
    assert outcome.calls == tuple(r.proposal for _, r in released)
    assert [(p.proposal_id, p.name, p.arguments) for p in outcome.calls] == [
        ("call_a", "lookup", joined(LOOKUP)),
        ("call_b", "refund", joined(REFUND)),
    ]
    assert outcome.complete
    assert outcome.incomplete == ()
    assert outcome.error is None
    assert outcome.text == "Checking." or fmt == "openai-responses"
    assert {p.model_call_id for p in outcome.calls} == {outcome.model_call_id}
    assert outcome.model_call_id in {"chatcmpl-1", "resp_1", "msg_1"}


def test_a_stream_cut_anywhere_releases_nothing(fmt):
    """Ending the stream before any prefix's end releases no call and reports each (R15)."""
    make, build = FORMATS[fmt]
    events = build()
    for cut in range(len(events) + TERMINAL[fmt] + 1):
        released, outcome = run(make, events[:cut])
        assert released == []
        assert outcome.calls == ()
        assert not outcome.complete
        assert outcome.stop_reason is None
        for call in outcome.incomplete:
            expected = {"call_a": LOOKUP, "call_b": REFUND}[call.call_id]
            assert joined(expected).startswith(call.received_arguments)


def test_cut_after_a_complete_call_withholds_it_as_response_incomplete():
    """A call that completed inside a response that did not is withheld, and says so."""
    make, build = FORMATS["openai-responses"]
    events = build()
    cut = next(i for i, e in enumerate(events) if e["type"] == "response.output_item.done") + 1
    _, outcome = run(make, events[:cut])
    assert [(c.call_id, c.reason) for c in outcome.incomplete] == [
        ("call_a", "response_incomplete")
    ]
    assert outcome.incomplete[0].received_arguments == joined(LOOKUP)


def test_events_after_the_terminal_state_are_ignored(fmt):
    """Nothing after a terminal state changes the outcome (R17, last row)."""
    make, build = FORMATS[fmt]
    events = build()
    _, clean = run(make, events)
    extra = {
        "openai-chat": [*chat_call(2, ("call_x", "wipe", ["{}"])), chat_chunk(finish="tool_calls")],
        "openai-responses": numbered(
            [*[{} for _ in events], *resp_call(2, ("call_x", "wipe", ["{}"])), resp_completed()]
        )[len(events) :],
        "anthropic": [*ant_call(3, ("call_x", "wipe", ["{}"])), ant_end("tool_use")],
    }[fmt]
    released, noisy = run(make, events + extra)
    assert noisy == clean
    assert all(r.proposal.name != "wipe" for _, r in released)


def test_readiness_policy_may_release_a_call_at_its_item_end(fmt):
    """A call the policy allows starts when its item completes; others wait for the end."""
    make, build = FORMATS[fmt]
    events = build()
    released, outcome = run(make, events, may_start_early=lambda name: name == "lookup")
    end = len(events) + TERMINAL[fmt]
    early = [(i, r.proposal.name) for i, r in released if r.early]
    if fmt == "openai-chat":
        assert early == []  # Chat Completions never says one call is complete
    else:
        ((at, name),) = early
        assert name == "lookup"
        assert at < end
        assert events[at]["type"] in {"response.output_item.done", "content_block_stop"}
    assert [r.proposal.name for i, r in released if not r.early] == (
        ["lookup", "refund"] if fmt == "openai-chat" else ["refund"]
    )
    assert [p.name for p in outcome.calls] == ["lookup", "refund"]


def test_early_release_survives_a_later_cut(fmt):
    """A call released early stays in calls; the rest of a cut-off response is withheld."""
    make, build = FORMATS[fmt]
    events = build()
    _, outcome = run(make, events[: len(events) + TERMINAL[fmt]], may_start_early=lambda n: True)
    if fmt == "openai-chat":
        assert outcome.calls == ()
        assert {c.call_id for c in outcome.incomplete} == {"call_a", "call_b"}
    else:
        assert [p.name for p in outcome.calls] == ["lookup", "refund"]
    assert not outcome.complete


STOPS = [
    ("openai-chat", chat_chunk(finish="length"), "length"),
    ("openai-chat", chat_chunk(finish="content_filter"), "content_filter"),
    (
        "openai-responses",
        {
            "type": "response.incomplete",
            "response": {
                "id": "resp_1",
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
            },
        },
        "max_output_tokens",
    ),
    ("anthropic", ant_end("max_tokens"), "max_tokens"),
    ("anthropic", ant_end("refusal"), "refusal"),
    ("anthropic", ant_end("pause_turn"), "pause_turn"),
    ("anthropic", ant_end("model_context_window_exceeded"), "model_context_window_exceeded"),
    ("anthropic", ant_end("a_reason_from_the_future"), "a_reason_from_the_future"),
    ("anthropic", ANT_STOP, None),
]


@pytest.mark.parametrize(("name", "stop", "reason"), STOPS, ids=[f"{s[0]}-{s[2]}" for s in STOPS])
def test_a_response_stopped_short_releases_nothing(name, stop, reason):
    """max_tokens / length / incomplete / refusal / unknown reasons release no call."""
    make, build = FORMATS[name]
    events = build()
    body = events[: len(events) + TERMINAL[name]]
    if name == "openai-responses":
        stop = {**stop, "sequence_number": len(body)}
    released, outcome = run(make, [*body, stop])
    assert released == []
    assert outcome.calls == ()
    assert (outcome.complete, outcome.stop_reason) == (False, reason)
    expected = "arguments_incomplete" if name == "openai-chat" else "response_incomplete"
    assert [(c.call_id, c.reason) for c in outcome.incomplete] == [
        ("call_a", expected),
        ("call_b", expected),
    ]
    assert [c.received_arguments for c in outcome.incomplete] == [joined(LOOKUP), joined(REFUND)]


ERRORS = [
    ("openai-chat", {"error": {"message": "overloaded", "type": "server_error"}}, "server_error"),
    (
        "openai-responses",
        {"type": "error", "code": "server_error", "message": "overloaded"},
        "server_error",
    ),
    (
        "openai-responses",
        {
            "type": "response.failed",
            "response": {
                "id": "resp_1",
                "status": "failed",
                "error": {"code": "server_error", "message": "overloaded"},
            },
        },
        "server_error",
    ),
    (
        "anthropic",
        {"type": "error", "error": {"type": "overloaded_error", "message": "overloaded"}},
        "overloaded_error",
    ),
]


@pytest.mark.parametrize(
    ("name", "error", "code"), ERRORS, ids=[f"{e[0]}-{e[1].get('type', 'chunk')}" for e in ERRORS]
)
def test_an_error_event_fails_the_response(name, error, code):
    """An error event releases nothing, reports the provider's error, and ends the stream."""
    make, build = FORMATS[name]
    events = build()
    body = events[: len(events) + TERMINAL[name]]
    if name == "openai-responses":
        error = {**error, "sequence_number": len(body)}
    _, outcome = run(make, [*body, error, *events[len(body) :]])
    assert outcome.calls == ()
    assert (outcome.error, outcome.error_code, outcome.complete) == ("overloaded", code, False)
    assert len(outcome.incomplete) == 2


def test_finish_is_idempotent_and_fail_after_terminal_is_ignored(fmt):
    """finish() returns the same outcome twice; fail() after the end changes nothing."""
    make, build = FORMATS[fmt]
    assembler = make()
    for event in build():
        assembler.feed(event)
    first = assembler.finish()
    assembler.fail(StreamError("late", code="protocol"))
    assert assembler.finish() is first
    assert first.complete


# -- never mixed: interleaved calls ---------------------------------------------------------

PIECES = st.lists(st.text(alphabet='ab{}":,\\ 爱', min_size=1, max_size=4), min_size=1, max_size=5)


def interleave(draw, streams):
    """Merge lists of events, keeping each list's own order, in a drawn order."""
    cursors = [0] * len(streams)
    out = []
    while any(c < len(s) for c, s in zip(cursors, streams, strict=True)):
        live = [i for i, s in enumerate(streams) if cursors[i] < len(s)]
        pick = draw(st.sampled_from(live))
        out.append(streams[pick][cursors[pick]])
        cursors[pick] += 1
    return out


@settings(max_examples=60)
@given(st.data(), st.lists(PIECES, min_size=2, max_size=4))
def test_interleaved_chat_fragments_never_mix(data, calls):
    """Chat fragments of parallel calls, interleaved any way, stay in their own buffers."""
    specs = [(f"call_{i}", f"tool_{i}", pieces) for i, pieces in enumerate(calls)]
    streams = [chat_call(i, spec) for i, spec in enumerate(specs)]
    events = [*interleave(data.draw, streams), chat_chunk(finish="tool_calls")]
    _, outcome = run(ChatCompletionsAssembler, events)
    assert [(p.proposal_id, p.arguments) for p in outcome.calls] == [
        (s[0], joined(s)) for s in specs
    ]


@settings(max_examples=60)
@given(st.data(), st.lists(PIECES, min_size=2, max_size=4))
def test_interleaved_responses_deltas_never_mix(data, calls):
    """Responses deltas of parallel items, interleaved any way, stay with their item."""
    specs = [(f"call_{i}", f"tool_{i}", pieces) for i, pieces in enumerate(calls)]
    streams = [resp_call(i, spec) for i, spec in enumerate(specs)]
    events = numbered([resp_created(), *interleave(data.draw, streams), resp_completed(*specs)])
    _, outcome = run(ResponsesAssembler, events)
    assert [(p.proposal_id, p.arguments) for p in outcome.calls] == [
        (s[0], joined(s)) for s in specs
    ]


@settings(max_examples=60)
@given(st.data(), st.lists(PIECES, min_size=2, max_size=4))
def test_interleaved_anthropic_blocks_never_mix(data, calls):
    """Deltas of several open tool_use blocks, interleaved any way, stay with their block."""
    specs = [(f"call_{i}", f"tool_{i}", pieces) for i, pieces in enumerate(calls)]
    streams = [ant_call(i, spec) for i, spec in enumerate(specs)]
    events = [ant_start(), *interleave(data.draw, streams), ant_end("tool_use")]
    _, outcome = run(AnthropicAssembler, events)
    assert [(p.proposal_id, p.arguments) for p in outcome.calls] == [
        (s[0], joined(s)) for s in specs
    ]


# -- duplicates and heartbeats --------------------------------------------------------------


def test_responses_duplicates_are_dropped_by_sequence_number():
    """Every event delivered twice, and a stale replay later, change nothing."""
    events = responses_two()
    _, clean = run(ResponsesAssembler, events)
    doubled = [e for event in events[:-1] for e in (event, event)]
    stale = [events[3], events[2]]  # an argument delta replayed out of order
    _, noisy = run(ResponsesAssembler, [*doubled, *stale, events[-1]])
    assert noisy == clean


def test_responses_structural_duplicates_without_sequence_numbers_are_dropped():
    """Without sequence numbers a repeated added/.done/item-done is still recognised."""
    events = [resp_created(), *resp_call(0, LOOKUP), resp_completed(LOOKUP)]
    _, clean = run(ResponsesAssembler, events)
    added, done, item_done = events[1], events[-3], events[-2]
    noisy = [*events[:2], added, *events[2:-2], done, item_done, item_done, events[-1]]
    _, outcome = run(ResponsesAssembler, noisy)
    assert outcome == clean


def test_anthropic_pings_and_structural_duplicates_change_nothing():
    """Pings anywhere and repeated message/block starts and stops are ignored."""
    events = anthropic_two()
    _, clean = run(AnthropicAssembler, events)
    noisy = []
    for event in events:
        noisy += [PING, event]
        if event["type"] in {"message_start", "content_block_start", "content_block_stop"}:
            noisy.append(event)
    _, outcome = run(AnthropicAssembler, noisy)
    assert outcome == clean


def test_chat_repeated_first_fragment_is_harmless():
    """Some servers repeat id and name in every fragment; the same id extends its buffer."""
    events = [
        chat_chunk(tool_calls=[chat_first(0, "call_a", "lookup", '{"a":')]),
        chat_chunk(tool_calls=[chat_first(0, "call_a", "lookup", "1}")]),
        chat_chunk(finish="tool_calls"),
    ]
    _, outcome = run(ChatCompletionsAssembler, events)
    assert outcome.calls[0].arguments == b'{"a":1}'


# -- broken streams: StreamError, and nothing released -------------------------------------

BROKEN = [
    (
        "chat: an index reused by another call id",
        ChatCompletionsAssembler,
        [*chat_call(0, LOOKUP), chat_chunk(tool_calls=[chat_first(0, "call_z", "lookup")])],
        "call_id_conflict",
    ),
    (
        "chat: one call id at two indices",
        ChatCompletionsAssembler,
        [*chat_call(0, LOOKUP), *chat_call(1, LOOKUP)],
        "call_id_conflict",
    ),
    (
        "chat: a first fragment without id",
        ChatCompletionsAssembler,
        [chat_chunk(tool_calls=[chat_more(0, "{}")])],
        "protocol",
    ),
    (
        "chat: a fragment without index",
        ChatCompletionsAssembler,
        [chat_chunk(tool_calls=[{"id": "c", "function": {"name": "f"}}])],
        "protocol",
    ),
    ("chat: n > 1", ChatCompletionsAssembler, [chat_chunk(content="x", choice=1)], "unsupported"),
    (
        "chat: legacy function_call",
        ChatCompletionsAssembler,
        [
            {
                "id": "c",
                "choices": [
                    {"index": 0, "delta": {"function_call": {"name": "f", "arguments": ""}}}
                ],
            }
        ],
        "unsupported",
    ),
    (
        "chat: a field of the wrong type",
        ChatCompletionsAssembler,
        [{"id": 7, "choices": []}],
        "protocol",
    ),
    (
        "responses: .done differs from the deltas",
        ResponsesAssembler,
        [resp_added(0, LOOKUP), resp_delta(0, LOOKUP, "{}"), resp_args_done(0, LOOKUP, '{"x":1}')],
        "arguments_mismatch",
    ),
    (
        "responses: output_item.done differs",
        ResponsesAssembler,
        [*resp_call(0, LOOKUP)[:-1], resp_item_done(0, LOOKUP, args="{}")],
        "arguments_mismatch",
    ),
    (
        "responses: completed lists other arguments",
        ResponsesAssembler,
        [
            *resp_call(0, LOOKUP),
            {
                "type": "response.completed",
                "response": {"id": "r", "output": [resp_item(LOOKUP, args="{}")]},
            },
        ],
        "arguments_mismatch",
    ),
    (
        "responses: completed lists a call never streamed",
        ResponsesAssembler,
        [*resp_call(0, LOOKUP), resp_completed(LOOKUP, REFUND)],
        "protocol",
    ),
    (
        "responses: a delta for an item never added",
        ResponsesAssembler,
        [resp_delta(0, LOOKUP, "{")],
        "protocol",
    ),
    (
        "responses: a delta after .done",
        ResponsesAssembler,
        [*resp_call(0, LOOKUP)[:-1], resp_delta(0, LOOKUP, " ")],
        "protocol",
    ),
    (
        "responses: completed while a call is open",
        ResponsesAssembler,
        [resp_added(0, LOOKUP), resp_delta(0, LOOKUP, "{}"), resp_completed()],
        "protocol",
    ),
    (
        "responses: completed after an incomplete item",
        ResponsesAssembler,
        [
            *resp_call(0, LOOKUP)[:-1],
            resp_item_done(0, LOOKUP, status="incomplete"),
            resp_completed(),
        ],
        "protocol",
    ),
    (
        "responses: an item renamed at done",
        ResponsesAssembler,
        [*resp_call(0, LOOKUP)[:-1], resp_item_done(0, LOOKUP, name="refund")],
        "call_id_conflict",
    ),
    (
        "responses: an item added twice as different calls",
        ResponsesAssembler,
        [resp_added(0, LOOKUP), resp_added(0, (LOOKUP[0], "refund", []))],
        "call_id_conflict",
    ),
    (
        "anthropic: a block started twice as different calls",
        AnthropicAssembler,
        [ant_tool_start(0, LOOKUP), ant_tool_start(0, REFUND)],
        "call_id_conflict",
    ),
    (
        "anthropic: a delta after stop",
        AnthropicAssembler,
        [*ant_call(0, LOOKUP), ant_json(0, " ")],
        "protocol",
    ),
    (
        "anthropic: a delta for a block never started",
        AnthropicAssembler,
        [ant_json(4, "{")],
        "protocol",
    ),
    ("anthropic: a stop for a block never started", AnthropicAssembler, [ant_stop(4)], "protocol"),
    (
        "anthropic: a JSON delta on a text block",
        AnthropicAssembler,
        [
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            ant_json(0, "{"),
        ],
        "protocol",
    ),
    (
        "anthropic: tool_use stop reason with a block still open",
        AnthropicAssembler,
        [ant_tool_start(0, LOOKUP), ant_json(0, "{}"), ant_end("tool_use")],
        "protocol",
    ),
    (
        "anthropic: a delta without index",
        AnthropicAssembler,
        [{"type": "content_block_delta", "delta": {}}],
        "protocol",
    ),
]


@pytest.mark.parametrize(
    ("make", "events", "code"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN]
)
def test_a_broken_stream_raises_and_releases_nothing(make, events, code):
    """A stream that breaks its format raises StreamError; the outcome holds no call."""
    assembler = make()

    def feed_all():
        for event in events:
            assembler.feed(event)

    with pytest.raises(StreamError) as info:
        feed_all()
    assert info.value.code == code
    assert assembler.phase == "failed"
    assert assembler.feed(events[0]) == []  # failed is terminal
    outcome = assembler.finish()
    assert (outcome.calls, outcome.complete, outcome.error_code) == ((), False, code)


def test_a_mismatch_after_an_early_release_keeps_only_that_call():
    """A StreamError cannot take back a call already released early, but stops the rest."""
    events = [
        *resp_call(0, LOOKUP),
        resp_added(1, REFUND),
        resp_delta(1, REFUND, "{}"),
        resp_args_done(1, REFUND, "[]"),
    ]
    outcome = assemble_events(ResponsesAssembler(may_start_early=lambda n: True), events)
    assert [p.name for p in outcome.calls] == ["lookup"]
    assert outcome.error_code == "arguments_mismatch"
    assert [c.call_id for c in outcome.incomplete] == ["call_b"]


# -- provider details -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [([], b"{}"), ([""], b"{}"), (["", ""], b"{}"), (['{"a":', "1}"], b'{"a":1}')],
    ids=["no deltas", "one empty delta", "empty deltas", "deltas"],
)
def test_anthropic_tool_use_arguments(pieces, expected):
    """A tool_use with no (or only empty) input deltas has the start input, {}."""
    events = [ant_start(), *ant_call(0, ("toolu_1", "f", pieces)), ant_end("tool_use")]
    _, outcome = run(AnthropicAssembler, events)
    assert outcome.calls[0].arguments == expected


def test_anthropic_message_stop_after_the_stop_reason_only_confirms():
    """message_stop after a tool_use stop reason changes nothing."""
    events = anthropic_two()
    _, with_stop = run(AnthropicAssembler, events)
    _, without = run(AnthropicAssembler, events[:-1])
    assert with_stop == without
    assert with_stop.complete


@pytest.mark.parametrize(
    ("make", "events", "kind"),
    [
        (
            ChatCompletionsAssembler,
            [
                chat_chunk(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "call_c",
                            "type": "custom",
                            "custom": {"name": "sql", "input": "SELECT "},
                        }
                    ]
                ),
                chat_chunk(tool_calls=[{"index": 0, "type": "custom", "custom": {"input": "1"}}]),
                chat_chunk(finish="tool_calls"),
            ],
            "custom",
        ),
        (
            ResponsesAssembler,
            [
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {
                        "type": "custom_tool_call",
                        "id": "ct_1",
                        "call_id": "call_c",
                        "name": "sql",
                        "input": "",
                    },
                },
                {
                    "type": "response.custom_tool_call_input.delta",
                    "item_id": "ct_1",
                    "output_index": 0,
                    "delta": "SELECT ",
                },
                {
                    "type": "response.custom_tool_call_input.delta",
                    "item_id": "ct_1",
                    "output_index": 0,
                    "delta": "1",
                },
                {
                    "type": "response.output_item.done",
                    "output_index": 0,
                    "item": {
                        "type": "custom_tool_call",
                        "id": "ct_1",
                        "call_id": "call_c",
                        "name": "sql",
                        "input": "SELECT 1",
                    },
                },
                {"type": "response.completed", "response": {"id": "r", "output": []}},
            ],
            "custom_tool_call",
        ),
        (
            AnthropicAssembler,
            [
                ant_tool_start(0, ("call_c", "sql", []), kind="server_tool_use"),
                ant_json(0, "SELECT "),
                ant_json(0, "1"),
                ant_stop(0),
                ant_end("end_turn"),
            ],
            "server_tool_use",
        ),
    ],
    ids=["chat custom tool", "responses custom tool", "anthropic server tool"],
)
def test_call_like_items_that_are_not_functions_are_never_proposals(make, events, kind):
    """Custom and server tool calls are reported as other items, never as Proposals."""
    released, outcome = run(make, events, may_start_early=lambda name: True)
    assert released == []
    assert outcome.calls == ()
    (item,) = outcome.other_items
    assert (item.kind, item.call_id, item.name, item.content, item.done) == (
        kind,
        "call_c",
        "sql",
        b"SELECT 1",
        True,
    )


def test_chat_split_surrogate_pair_is_recombined():
    """A UTF-16 surrogate pair split over two deltas becomes one UTF-8 character."""
    events = [
        chat_chunk(tool_calls=[chat_first(0, "call_a", "say", '{"t":"\ud83d')]),
        chat_chunk(tool_calls=[chat_more(0, '\ude00"}')]),
        chat_chunk(finish="stop"),
    ]
    _, outcome = run(ChatCompletionsAssembler, events)
    assert outcome.calls[0].arguments == '{"t":"😀"}'.encode()


def test_a_lone_surrogate_fails_the_response():
    """Arguments that cannot be UTF-8 are a StreamError, not a Proposal."""
    events = [
        chat_chunk(tool_calls=[chat_first(0, "call_a", "say", '"\ud83d"')]),
        chat_chunk(finish="stop"),
    ]
    outcome = assemble_events(ChatCompletionsAssembler(), events)
    assert (outcome.calls, outcome.error_code) == ((), "invalid_utf8")
    assert outcome.incomplete[0].received_arguments == '"\ud83d"'.encode("utf-8", "surrogatepass")


# -- the drivers ----------------------------------------------------------------------------


def sse(events, *, done=False):
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    return (body + ("data: [DONE]\n\n" if done else "")).encode()


def test_assemble_sse_stops_reading_at_done():
    """After Chat's data: [DONE], even invalid bytes change nothing."""
    raw = sse(chat_two(), done=True) + b"data: \xff\n\n"
    outcome = assemble_sse(ChatCompletionsAssembler(), [raw])
    assert [p.name for p in outcome.calls] == ["lookup", "refund"]
    assert outcome.error is None


@pytest.mark.parametrize(
    ("tail", "code"),
    [
        (b"data: \xff\n\n", "invalid_utf8"),
        (b"data: {oops\n\n", "invalid_json"),
        (b"data: [1]\n\n", "not_an_object"),
    ],
)
def test_assemble_sse_reports_a_broken_stream_in_the_outcome(tail, code):
    """Bad bytes mid-stream fail the outcome with a code; nothing is released."""
    events = chat_two()
    raw = sse(events[:4]) + tail + sse(events[4:])
    outcome = assemble_sse(ChatCompletionsAssembler(), [raw])
    assert (outcome.calls, outcome.error_code, outcome.complete) == ((), code, False)


def test_on_ready_sees_each_release_as_it_happens():
    """The driver hands each released call to on_ready at once, early ones first."""
    seen: list[tuple[str, bool]] = []
    outcome = assemble_events(
        AnthropicAssembler(may_start_early=lambda n: n == "lookup"),
        anthropic_two(),
        on_ready=lambda r: seen.append((r.proposal.name, r.early)),
    )
    assert seen == [("lookup", True), ("refund", False)]
    assert [p.name for p in outcome.calls] == ["lookup", "refund"]


def test_done_before_the_finish_reason_ends_the_response_cut_off():
    """A [DONE] with no finish_reason before it cuts the response; later bytes are not fed."""
    events = chat_two()
    raw = sse(events[:-1], done=True) + sse(events[-1:])
    outcome = assemble_sse(ChatCompletionsAssembler(), [raw])
    assert (outcome.calls, outcome.complete) == ((), False)
    assert [c.reason for c in outcome.incomplete] == ["arguments_incomplete"] * 2


# -- byte budgets (StreamLimits) ------------------------------------------------------------

LOOKUP_BYTES = len(joined(LOOKUP))  # 21
REFUND_BYTES = len(joined(REFUND))  # 36: "café 爱" is 8 bytes in UTF-8


def test_a_call_over_its_budget_is_refused_and_the_response_with_it(fmt):
    """REFUND over max_call_bytes: too_large, reported arguments_too_large; LOOKUP withheld."""
    make, build = FORMATS[fmt]
    limits = StreamLimits(max_call_bytes=LOOKUP_BYTES)  # LOOKUP fits exactly
    with pytest.raises(StreamError) as caught:
        run(make, build(), limits=limits)  # feed() raises; the drivers report it
    assert caught.value.code == "too_large"
    outcome = assemble_events(make(limits=limits), build())
    assert (outcome.calls, outcome.complete, outcome.error_code) == ((), False, "too_large")
    lookup_reason = "arguments_incomplete" if fmt == "openai-chat" else "response_incomplete"
    assert [(c.call_id, c.reason) for c in outcome.incomplete] == [
        ("call_a", lookup_reason),
        ("call_b", "arguments_too_large"),
    ]
    refund = outcome.incomplete[1].received_arguments
    assert len(refund) <= LOOKUP_BYTES
    assert joined(REFUND).startswith(refund)


def test_a_call_released_early_stays_released_when_a_later_one_is_too_large(fmt):
    """The budget fails the response; a call the policy already released stays released."""
    make, build = FORMATS[fmt]
    limits = StreamLimits(max_call_bytes=LOOKUP_BYTES)
    outcome = assemble_events(make(limits=limits, may_start_early=lambda _: True), build())
    assert outcome.error_code == "too_large"
    early = [] if fmt == "openai-chat" else ["lookup"]  # Chat never releases early
    assert [p.name for p in outcome.calls] == early
    assert [c.reason for c in outcome.incomplete][-1] == "arguments_too_large"


def test_calls_within_their_budget_but_over_the_streams_are_refused(fmt):
    """Text and both calls fit max_call_bytes one by one, not max_stream_bytes together."""
    make, build = FORMATS[fmt]
    fits = StreamLimits(max_call_bytes=REFUND_BYTES, max_stream_bytes=100)
    assert assemble_events(make(limits=fits), build()).complete
    limits = StreamLimits(max_call_bytes=REFUND_BYTES, max_stream_bytes=50)
    outcome = assemble_events(make(limits=limits), build())
    assert (outcome.calls, outcome.complete, outcome.error_code) == ((), False, "stream_too_large")
    assert [c.call_id for c in outcome.incomplete] == ["call_a", "call_b"]
    assert outcome.incomplete[1].reason == "arguments_incomplete"


def test_the_stream_budget_counts_an_unfinished_event():
    """An event still arriving counts with what the assembler holds, before it is parsed."""
    raw = sse(chat_two()[:-1])
    held = assemble_sse(ChatCompletionsAssembler(), [raw]).incomplete
    holding = sum(len(c.received_arguments) for c in held) + len("Checking.")
    longest = max(len(line) for line in raw.split(b"\n"))
    limits = StreamLimits(max_call_bytes=REFUND_BYTES, max_stream_bytes=holding + longest)
    assert assemble_sse(ChatCompletionsAssembler(limits=limits), [raw]).error_code is None
    long_text = sse([chat_chunk(content="x" * 200)])[:-2]  # no blank line: never dispatched
    outcome = assemble_sse(ChatCompletionsAssembler(limits=limits), [raw + long_text])
    assert outcome.error_code == "stream_too_large"
    assert outcome.text == "Checking."  # refused before it was parsed


def jsonl(events):
    return "".join(json.dumps(e) + "\n" for e in events).encode()


@settings(max_examples=150, deadline=None)
@given(
    fmt=st.sampled_from(list(FORMATS)),
    framing=st.sampled_from(["sse", "jsonl"]),
    budgets=st.tuples(st.integers(min_value=2, max_value=60), st.integers(0, 700)),
    heartbeat=st.integers(min_value=0, max_value=300),
    cuts=st.lists(st.integers(min_value=0, max_value=6000), max_size=12),
)
def test_budgets_give_the_same_outcome_however_the_bytes_are_split(
    fmt, framing, budgets, heartbeat, cuts
):
    """R15 with tight budgets: whole, split at drawn positions, or byte by byte, one outcome."""
    make, build = FORMATS[fmt]
    call, extra = budgets
    limits = StreamLimits(max_call_bytes=call, max_stream_bytes=call + extra)
    events = build()
    if framing == "sse":
        # A comment line (held while it arrives) and a comment-only group, drawn long.
        beat = f": {'h' * heartbeat}\n".encode()
        raw = sse(events[:2]) + beat + b"\n" + beat + sse(events[2:])
        assemble = assemble_sse
    else:
        raw = jsonl(events).replace(b"\n", b"\n" + b" " * heartbeat + b"\n", 1)  # a long blank line
        assemble = assemble_jsonl
    whole = assemble(make(limits=limits), [raw])
    at = sorted({c % (len(raw) + 1) for c in cuts})
    pieces = [raw[a:b] for a, b in zip([0, *at], [*at, len(raw)], strict=True)]
    assert assemble(make(limits=limits), pieces) == whole
    assert assemble(make(limits=limits), [raw[i : i + 1] for i in range(len(raw))]) == whole


# -- one response per assembler ------------------------------------------------------------


def second_response(fmt):
    """The two-call response again, under another response id."""
    events = FORMATS[fmt][1]()
    text = json.dumps(events)
    for old, new in [("chatcmpl-1", "chatcmpl-2"), ("resp_1", "resp_2"), ("msg_1", "msg_2")]:
        text = text.replace(old, new)
    return json.loads(text)


@pytest.mark.parametrize("framing", ["events", "sse", "jsonl"])
def test_a_second_response_in_one_stream_is_refused(fmt, framing):
    """Another response id after the first response ends raises several_responses."""
    make, build = FORMATS[fmt]
    events = [*build(), *second_response(fmt)]
    assemble = {
        "events": lambda: assemble_events(make(), events),
        "sse": lambda: assemble_sse(make(), [sse(events)]),
        "jsonl": lambda: assemble_jsonl(make(), [jsonl(events)]),
    }[framing]
    with pytest.raises(StreamError, match="its own assembler") as caught:
        assemble()
    assert caught.value.code == "several_responses"


def test_a_second_chat_response_after_done_is_refused():
    """Two Chat SSE bodies, each ending in data: [DONE], are refused, not cut at the first."""
    raw = sse(chat_two(), done=True) + sse(second_response("openai-chat"), done=True)
    with pytest.raises(StreamError) as caught:
        assemble_sse(ChatCompletionsAssembler(), [raw])
    assert caught.value.code == "several_responses"


def test_a_second_response_is_refused_after_a_failed_first_one_too():
    """A response stopped for max_tokens, then another: refused, not silently dropped."""
    first = [*anthropic_two()[:-2], ant_end("max_tokens")]
    with pytest.raises(StreamError):
        assemble_events(AnthropicAssembler(), [*first, *second_response("anthropic")])


def test_the_sdk_helpers_still_stop_at_the_terminal_event():
    """An SDK stream is one request's response: nothing after its end is pulled (R17)."""
    pulled = []

    def events():
        for event in [*responses_two(), *second_response("openai-responses")]:
            pulled.append(event)
            yield event

    outcome = assemble_openai_responses(events())
    assert outcome.complete
    assert len(pulled) == len(responses_two())


# -- the phase table and the public surface -------------------------------------------------


@pytest.mark.parametrize(
    ("src", "dst"),
    [(s, d) for s in PHASES for d in PHASES if d not in PHASES[s]],
)
def test_every_illegal_phase_edge_raises(src, dst):
    """Only the edges in PHASES exist; terminal phases have none, and state is unchanged."""
    assembler = ChatCompletionsAssembler()
    assembler._phase = src
    with pytest.raises(IllegalTransition):
        assembler._enter(dst)
    assert assembler.phase == src


def test_streams_all_matches_exports():
    """toolbound.streams.__all__ lists exactly its public names."""
    public = {n for n in vars(toolbound.streams) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(toolbound.streams, n)).__name__ == "module"}
    assert set(toolbound.streams.__all__) == public - modules

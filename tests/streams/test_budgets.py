"""R15 under load: stream assembly holds a bounded number of bytes, whatever arrives.

The streams here are generated lazily, chunk by chunk, so the test itself never
holds them: tracemalloc's peak is what assembly held. Each stream is 20 MB, twenty
times the default budget per call and five times the default budget per stream.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import TYPE_CHECKING

import pytest

from toolbound._errors import ConfigurationError
from toolbound.gates.parse import DEFAULT_LIMITS
from toolbound.streams import (
    DEFAULT_STREAM_LIMITS,
    AnthropicAssembler,
    ChatCompletionsAssembler,
    JSONLinesDecoder,
    ResponsesAssembler,
    SSEDecoder,
    StreamError,
    StreamLimits,
    assemble_jsonl,
    assemble_sse,
)
from toolbound.streams.sdk import assemble_openai_responses

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

MiB = 1 << 20
TOTAL = 20_000_000  # bytes of arguments, or of one line
PIECE = "a" * 512  # one argument delta


def chat_events() -> Iterator[dict[str, object]]:
    def chunk(call: dict[str, object]) -> dict[str, object]:
        delta = {"tool_calls": [call]}
        return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta}]}

    yield chunk({"index": 0, "id": "call_1", "function": {"name": "save", "arguments": "{"}})
    for _ in range(TOTAL // len(PIECE)):
        yield chunk({"index": 0, "function": {"arguments": PIECE}})


def responses_events() -> Iterator[dict[str, object]]:
    yield {"type": "response.created", "response": {"id": "resp_1"}}
    item = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "save"}
    yield {"type": "response.output_item.added", "output_index": 0, "item": item}
    for _ in range(TOTAL // len(PIECE)):
        yield {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": PIECE}


def anthropic_events() -> Iterator[dict[str, object]]:
    yield {"type": "message_start", "message": {"id": "msg_1"}}
    block = {"type": "tool_use", "id": "call_1", "name": "save", "input": {}}
    yield {"type": "content_block_start", "index": 0, "content_block": block}
    delta = {"type": "input_json_delta", "partial_json": PIECE}
    for _ in range(TOTAL // len(PIECE)):
        yield {"type": "content_block_delta", "index": 0, "delta": delta}


FORMATS = {
    "openai-chat": (ChatCompletionsAssembler, chat_events),
    "openai-responses": (ResponsesAssembler, responses_events),
    "anthropic": (AnthropicAssembler, anthropic_events),
}


class Source:
    """Chunks of a lazily framed stream, counting the bytes handed out."""

    def __init__(self, frames: Iterator[bytes], size: int) -> None:
        self.frames, self.size, self.pulled = frames, size, 0

    def __iter__(self) -> Iterator[bytes]:
        pending = bytearray()
        for frame in self.frames:
            pending += frame
            while len(pending) >= self.size:
                yield self._out(bytes(pending[: self.size]))
                del pending[: self.size]
        if pending:
            yield self._out(bytes(pending))

    def _out(self, chunk: bytes) -> bytes:
        self.pulled += len(chunk)
        return chunk


def sse_frames(events: Iterator[dict[str, object]]) -> Iterator[bytes]:
    return (b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def feed_pieces(decoder, raw, size, fed, got=None):
    """Feed ``raw`` in ``size``-byte pieces, noting each piece fed and what came out."""
    for at in range(0, len(raw), size):
        fed.append(raw[at : at + size])
        out = decoder.feed(fed[-1])
        if got is not None:
            got += out


def peak_of(run: Callable[[], object]) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = run()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_default_budgets():
    """Per call: the parse gate's default max_bytes (1 MiB); per stream: four times that."""
    assert StreamLimits() == DEFAULT_STREAM_LIMITS
    assert DEFAULT_STREAM_LIMITS.max_call_bytes == DEFAULT_LIMITS.max_bytes == MiB
    assert DEFAULT_STREAM_LIMITS.max_stream_bytes == 4 * MiB
    assert ResponsesAssembler().limits == DEFAULT_STREAM_LIMITS


@pytest.mark.parametrize(
    "fields",
    [{"max_call_bytes": 1}, {"max_call_bytes": 100, "max_stream_bytes": 99}],
)
def test_budgets_that_cannot_hold_a_call_are_misuse(fields):
    """A call budget under 2 bytes, or a stream budget under the call's, is refused."""
    with pytest.raises(ConfigurationError):
        StreamLimits(**fields)


@pytest.mark.parametrize("decoder", [SSEDecoder, JSONLinesDecoder])
def test_a_decoder_budget_must_be_positive(decoder):
    """A decoder that may hold nothing is a configuration error."""
    with pytest.raises(ConfigurationError):
        decoder(max_buffered_bytes=0)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_twenty_mb_of_deltas_are_refused_at_the_call_budget_with_memory_bounded(fmt):
    """20 MB of deltas in 4 kB chunks: refused at 1 MiB, peak memory under budget + 2 MiB."""
    make, events = FORMATS[fmt]
    source = Source(sse_frames(events()), 4096)
    outcome, peak = peak_of(lambda: assemble_sse(make(), source))
    limit = DEFAULT_STREAM_LIMITS.max_call_bytes
    assert peak < limit + 2 * MiB
    assert source.pulled < 2 * limit  # refused while reading, not after
    assert (outcome.calls, outcome.complete, outcome.error_code) == ((), False, "too_large")
    (call,) = outcome.incomplete
    assert (call.call_id, call.reason) == ("call_1", "arguments_too_large")
    assert limit - len(PIECE) < len(call.received_arguments) <= limit


def test_a_tighter_call_budget_is_honoured_while_reading():
    """With max_call_bytes=64 kB the same stream is refused after about 64 kB of arguments."""
    limits = StreamLimits(max_call_bytes=64_000, max_stream_bytes=256_000)
    source = Source(sse_frames(responses_events()), 4096)
    outcome = assemble_sse(ResponsesAssembler(limits=limits), source)
    assert outcome.error_code == "too_large"
    assert outcome.incomplete[0].reason == "arguments_too_large"
    assert len(outcome.incomplete[0].received_arguments) <= 64_000
    assert source.pulled < 1.25 * 64_000 + 4096  # each 512-byte delta comes with ~100 of JSON


def test_the_sdk_helpers_take_the_budget_too():
    """assemble_openai_responses(limits=...) refuses a call over its budget."""
    limits = StreamLimits(max_call_bytes=10_000, max_stream_bytes=10_000)
    outcome = assemble_openai_responses(responses_events(), limits=limits)
    assert outcome.error_code == "too_large"
    assert outcome.incomplete[0].reason == "arguments_too_large"


def _endless_line() -> Iterator[bytes]:
    yield b"data: "
    block = b"a" * 65536
    for _ in range(TOTAL // len(block)):
        yield block


@pytest.mark.parametrize("assemble", [assemble_sse, assemble_jsonl], ids=["sse", "jsonl"])
def test_a_twenty_mb_line_without_a_line_end_is_refused_without_being_held(assemble):
    """A 20 MB line with no LF fails with stream_too_large; memory stays near 4 MiB."""
    source = Source(_endless_line(), 65536)
    outcome, peak = peak_of(lambda: assemble(ResponsesAssembler(), source))
    budget = DEFAULT_STREAM_LIMITS.max_stream_bytes
    assert outcome.error_code == "stream_too_large"
    assert not outcome.complete
    assert source.pulled <= budget + 65536  # the budget plus one chunk
    assert peak < budget + MiB


@pytest.mark.parametrize("decoder", [SSEDecoder, JSONLinesDecoder])
def test_a_decoder_alone_refuses_a_line_over_its_budget(decoder):
    """Fed 10 bytes at a time, the line is refused by the chunk that takes it past 100 bytes."""
    dec = decoder(max_buffered_bytes=100)
    line = b"data: " + b"a" * 200
    fed: list[bytes] = []
    with pytest.raises(StreamError) as caught:
        feed_pieces(dec, line, 10, fed)
    assert caught.value.code == "stream_too_large"
    assert len(b"".join(fed)) == 110  # the chunk that crossed 100 bytes was the last
    assert dec.pending_bytes == 110


@pytest.mark.parametrize("decoder", [SSEDecoder, JSONLinesDecoder])
def test_a_long_line_is_refused_alike_whole_or_in_pieces(decoder):
    """A complete line over the budget inside one chunk is refused as it is byte by byte."""
    ok = b'{"type": "ping"}\n\n' if decoder is JSONLinesDecoder else b"data: {}\n\n"
    raw = ok + b"data: " + b"a" * 200 + b"\n\n"
    whole = decoder(max_buffered_bytes=100)
    first = whole.feed(raw)  # what came before the long line is delivered first
    with pytest.raises(StreamError, match="more than 100 bytes"):
        whole.feed(b"")
    split = decoder(max_buffered_bytes=100)
    got: list[object] = []
    with pytest.raises(StreamError, match="more than 100 bytes"):
        feed_pieces(split, raw, 1, [], got)
    assert got == first
    assert len(first) == 1


def test_sse_counts_a_long_comment_line_like_any_other():
    """A heartbeat comment longer than the budget is refused too: it was held while it came."""
    with pytest.raises(StreamError) as caught:
        SSEDecoder(max_buffered_bytes=100).feed(b":" + b"x" * 200 + b"\n\ndata: {}\n\n")
    assert caught.value.code == "stream_too_large"

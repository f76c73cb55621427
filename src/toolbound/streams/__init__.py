"""Streams: provider byte streams → complete tool calls, never earlier (R15).

Three layers, each sans-IO (feed bytes or events in, get values out)::

    bytes ──SSEDecoder / JSONLinesDecoder──→ events ──assembler──→ Proposals
           (UTF-8, WHATWG SSE framing)              (one per provider format)

* :class:`SSEDecoder` and :class:`JSONLinesDecoder` turn bytes into events.
* :class:`ChatCompletionsAssembler`, :class:`ResponsesAssembler` and
  :class:`AnthropicAssembler` turn events into :class:`StreamOutcome`.
* :func:`assemble_sse`, :func:`assemble_jsonl` and :func:`assemble_events` drive an
  assembler from an iterable of chunks or events.
* :class:`StreamLimits` bounds the bytes held: per call and per stream.

See ``docs/streaming.md`` for the guarantees and the readiness policy.
"""

from toolbound.streams.anthropic import AnthropicAssembler
from toolbound.streams.assemble import (
    EarlyStart,
    IncompleteCall,
    IncompleteReason,
    OtherItem,
    Phase,
    Ready,
    StreamAssembler,
    StreamOutcome,
    assemble_events,
    assemble_jsonl,
    assemble_sse,
)
from toolbound.streams.jsonl import JSONLinesDecoder, parse_event
from toolbound.streams.limits import DEFAULT_STREAM_LIMITS, StreamLimits
from toolbound.streams.openai_chat import ChatCompletionsAssembler
from toolbound.streams.openai_responses import ResponsesAssembler
from toolbound.streams.sse import SSEDecoder, SSEEvent, StreamError, StreamErrorCode

__all__ = [
    "DEFAULT_STREAM_LIMITS",
    "AnthropicAssembler",
    "ChatCompletionsAssembler",
    "EarlyStart",
    "IncompleteCall",
    "IncompleteReason",
    "JSONLinesDecoder",
    "OtherItem",
    "Phase",
    "Ready",
    "ResponsesAssembler",
    "SSEDecoder",
    "SSEEvent",
    "StreamAssembler",
    "StreamError",
    "StreamErrorCode",
    "StreamLimits",
    "StreamOutcome",
    "assemble_events",
    "assemble_jsonl",
    "assemble_sse",
    "parse_event",
]

"""Provider SDK stream objects → tool calls, through toolbound's own assemblers (R15, R18).

The official SDKs, called with ``stream=True``, yield one pydantic object per
server-sent event: ``openai`` gives ``ChatCompletionChunk`` objects for
``client.chat.completions.create`` and ``ResponseStreamEvent`` objects for
``client.responses.create``; ``anthropic`` gives ``RawMessageStreamEvent`` objects for
``client.messages.create``. The helpers here turn each object back into the JSON
the event carried on the wire, at this boundary, and feed it to the same assembler
the raw bytes would reach (:func:`event_mapping` says how). The SDK path and the
bytes path therefore give the same :class:`~toolbound.streams.StreamOutcome`.

The SDKs' *accumulated* final messages are deliberately not used: an accumulator
may fill in what never arrived (the Anthropic SDK parses a cut-off tool input
leniently into a complete-looking object), and only the assembler decides when a
call is complete (R15).

Nothing here imports an SDK: any object with pydantic's ``model_dump``, or a plain
mapping, is an event. An SDK stream is the answer to one request, so it holds one
response: unlike :func:`~toolbound.streams.assemble_events`, which reads a
recording to its end, the helpers stop at the response's terminal event and pull
nothing after it (R17); the caller owns the SDK stream and closes it (use it as a
context manager). The byte budgets of ``limits`` apply to what the assembler holds.

What the SDK has already done before an event reaches these helpers:

* **Error events raise.** The SDKs raise their own ``APIError`` (``openai``) or
  ``APIStatusError`` (``anthropic``) while being iterated, for an ``error`` event or
  a chunk carrying ``error``. The exception propagates out of these helpers: no
  outcome, and no call released except those already handed to ``on_ready`` early.
  On the bytes path the same stream gives a failed outcome instead.
* **Some events never arrive.** The Anthropic SDK drops ``ping`` and any event
  without an ``event:`` field; the OpenAI SDK stops at ``data: [DONE]``.
* **JSON is the SDK's.** Payloads were decoded by ``json.loads``, which accepts
  ``NaN`` and ``Infinity`` (pydantic dumps them as ``null``); the bytes path rejects
  them. Values of an unexpected type pass through unchanged (the SDK's serializer
  warns), so the assembler rejects them as it would on the bytes path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, TypeAlias

from toolbound._errors import ConfigurationError
from toolbound.streams.anthropic import AnthropicAssembler
from toolbound.streams.limits import DEFAULT_STREAM_LIMITS
from toolbound.streams.openai_chat import ChatCompletionsAssembler
from toolbound.streams.openai_responses import ResponsesAssembler
from toolbound.streams.sse import StreamError

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, Callable, Iterable

    from toolbound.streams.assemble import EarlyStart, Ready, StreamAssembler, StreamOutcome
    from toolbound.streams.limits import StreamLimits

__all__ = [
    "SDKEvent",
    "SupportsModelDump",
    "assemble_anthropic",
    "assemble_anthropic_async",
    "assemble_openai_chat",
    "assemble_openai_chat_async",
    "assemble_openai_responses",
    "assemble_openai_responses_async",
    "event_mapping",
]


class SupportsModelDump(Protocol):
    """Anything with pydantic's ``model_dump``: every event object the SDKs yield."""

    def model_dump(self, *, mode: str, by_alias: bool, exclude_unset: bool) -> Mapping[str, object]:
        """The object as a mapping (see :func:`event_mapping` for the arguments)."""
        ...


SDKEvent: TypeAlias = "SupportsModelDump | Mapping[str, object]"
"""One stream event: an SDK's pydantic object, or the event's JSON as a mapping."""


def event_mapping(event: SDKEvent) -> Mapping[str, object]:
    """The JSON object ``event`` carried on the wire.

    A mapping is returned as it is. An SDK object is dumped with
    ``model_dump(mode="json", by_alias=True, exclude_unset=True)``: JSON values only,
    under their wire names, and only the fields the event carried. By default the
    SDKs build their objects from the wire JSON without validation, so for them that
    is the event's JSON again, key for key.

    A dump that is not an object, or that fails, raises :class:`StreamError`
    (``not_an_object``, ``invalid_json``); the helpers report it in the outcome as
    the bytes path would. Something that is neither raises
    :class:`~toolbound.ConfigurationError`.
    """
    if isinstance(event, Mapping):
        return event
    dump = getattr(event, "model_dump", None)
    if not callable(dump):
        msg = (
            f"a {type(event).__name__} is not a stream event: pass the objects an SDK "
            "yields with stream=True, or mappings"
        )
        raise ConfigurationError(msg, code="not_a_stream_event")
    try:
        value = dump(mode="json", by_alias=True, exclude_unset=True)
    except ValueError as exc:  # pydantic's serialization errors are ValueErrors
        msg = f"a {type(event).__name__} has no JSON form: {exc}"
        raise StreamError(msg, code="invalid_json") from exc
    if not isinstance(value, Mapping):
        msg = f"a {type(event).__name__} dumps to {type(value).__name__}, not an object"
        raise StreamError(msg, code="not_an_object")
    return value


# -- drivers -------------------------------------------------------------------------


def _assemble(
    assembler: StreamAssembler,
    events: Iterable[SDKEvent],
    on_ready: Callable[[Ready], None] | None,
) -> StreamOutcome:
    # A StreamError from event_mapping fails the assembler with it, as for a bad
    # event on the bytes path.
    try:
        for event in events:
            for ready in assembler.feed(event_mapping(event)):
                if on_ready is not None:
                    on_ready(ready)
            if assembler.terminal:
                break  # R17: nothing after a terminal state is even read
    except StreamError as exc:
        assembler.fail(exc)
    return assembler.finish()


async def _assemble_async(
    assembler: StreamAssembler,
    events: AsyncIterable[SDKEvent],
    on_ready: Callable[[Ready], None] | None,
) -> StreamOutcome:
    # The async twin of _assemble: the same loop, over an async iterable.
    try:
        async for event in events:
            for ready in assembler.feed(event_mapping(event)):
                if on_ready is not None:
                    on_ready(ready)
            if assembler.terminal:
                break  # R17: nothing after a terminal state is even read
    except StreamError as exc:
        assembler.fail(exc)
    return assembler.finish()


# -- one helper per provider format, sync and async ------------------------------------


def assemble_openai_chat(
    chunks: Iterable[SDKEvent],
    *,
    may_start_early: EarlyStart | None = None,
    on_ready: Callable[[Ready], None] | None = None,
    limits: StreamLimits = DEFAULT_STREAM_LIMITS,
) -> StreamOutcome:
    """Assemble the chunks of ``client.chat.completions.create(..., stream=True)``.

    ``may_start_early`` is accepted for a uniform interface; Chat Completions never
    says a call is complete before the response is, so it never applies.
    ``on_ready`` sees each call as it is released; ``limits`` bounds what is held.
    """
    assembler = ChatCompletionsAssembler(may_start_early=may_start_early, limits=limits)
    return _assemble(assembler, chunks, on_ready)


def assemble_openai_responses(
    events: Iterable[SDKEvent],
    *,
    may_start_early: EarlyStart | None = None,
    on_ready: Callable[[Ready], None] | None = None,
    limits: StreamLimits = DEFAULT_STREAM_LIMITS,
) -> StreamOutcome:
    """Assemble the events of ``client.responses.create(..., stream=True)`` (one response).

    ``may_start_early`` may release a call at its item's completion (see
    :class:`~toolbound.streams.ResponsesAssembler`); ``on_ready`` sees each call as it
    is released; ``limits`` bounds what is held.
    """
    assembler = ResponsesAssembler(may_start_early=may_start_early, limits=limits)
    return _assemble(assembler, events, on_ready)


def assemble_anthropic(
    events: Iterable[SDKEvent],
    *,
    may_start_early: EarlyStart | None = None,
    on_ready: Callable[[Ready], None] | None = None,
    limits: StreamLimits = DEFAULT_STREAM_LIMITS,
) -> StreamOutcome:
    """Assemble the events of Anthropic's ``client.messages.create(..., stream=True)``.

    ``may_start_early`` may release a call at its block's ``content_block_stop``;
    ``on_ready`` sees each call as it is released; ``limits`` bounds what is held.
    """
    assembler = AnthropicAssembler(may_start_early=may_start_early, limits=limits)
    return _assemble(assembler, events, on_ready)


async def assemble_openai_chat_async(
    chunks: AsyncIterable[SDKEvent],
    *,
    may_start_early: EarlyStart | None = None,
    on_ready: Callable[[Ready], None] | None = None,
    limits: StreamLimits = DEFAULT_STREAM_LIMITS,
) -> StreamOutcome:
    """:func:`assemble_openai_chat` for the stream of ``AsyncOpenAI``."""
    assembler = ChatCompletionsAssembler(may_start_early=may_start_early, limits=limits)
    return await _assemble_async(assembler, chunks, on_ready)


async def assemble_openai_responses_async(
    events: AsyncIterable[SDKEvent],
    *,
    may_start_early: EarlyStart | None = None,
    on_ready: Callable[[Ready], None] | None = None,
    limits: StreamLimits = DEFAULT_STREAM_LIMITS,
) -> StreamOutcome:
    """:func:`assemble_openai_responses` for the stream of ``AsyncOpenAI``."""
    assembler = ResponsesAssembler(may_start_early=may_start_early, limits=limits)
    return await _assemble_async(assembler, events, on_ready)


async def assemble_anthropic_async(
    events: AsyncIterable[SDKEvent],
    *,
    may_start_early: EarlyStart | None = None,
    on_ready: Callable[[Ready], None] | None = None,
    limits: StreamLimits = DEFAULT_STREAM_LIMITS,
) -> StreamOutcome:
    """:func:`assemble_anthropic` for the stream of ``AsyncAnthropic``."""
    assembler = AnthropicAssembler(may_start_early=may_start_early, limits=limits)
    return await _assemble_async(assembler, events, on_ready)

"""Anthropic Messages stream → tool calls (R15).

A tool call is one content block, keyed here by its block ``index``:
``content_block_start`` with a ``tool_use`` block opens it (``id``, ``name``),
``content_block_delta`` with ``input_json_delta`` appends ``partial_json``, and
``content_block_stop`` completes it. A tool use whose deltas are all empty has the
``input`` its start event gave, serialised compactly — ``{}`` in every stream the
API sends.

The response is over when ``message_delta`` states a ``stop_reason``: ``end_turn``,
``tool_use`` and ``stop_sequence`` end it normally and release the calls;
``max_tokens``, ``refusal``, ``model_context_window_exceeded``, ``pause_turn`` or any
reason this module does not know release nothing (conservative: each may mean the
output was cut short or is to be continued). ``message_stop`` only confirms; a
``message_stop`` with no stop reason before it ends the response *unsuccessfully*.
Taking ``message_delta`` as the end matters in practice: streams recorded without a
final blank line lose ``message_stop`` at the SSE layer (WHATWG discards an event
without its blank line), yet their ``stop_reason`` was already stated.

``ping`` is a heartbeat and ignored; ``error`` fails the response. The format has no
sequence numbers, so only structural duplicates (a second ``message_start``, a
second start or stop of one block) are recognised and dropped; a delta for a block
never started or already stopped is a :class:`~toolbound.streams.StreamError`.
Server and MCP tool uses (``server_tool_use``, ``mcp_tool_use``) run at Anthropic;
they are reported as :class:`~toolbound.streams.assemble.OtherItem`, never proposed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from toolbound.streams.assemble import (
    Ready,
    StreamAssembler,
    int_field,
    map_field,
    str_field,
)
from toolbound.streams.limits import DEFAULT_STREAM_LIMITS, StreamLimits, utf8_size
from toolbound.streams.sse import StreamError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from toolbound.streams.assemble import EarlyStart

__all__ = ["AnthropicAssembler"]

COMPLETE_REASONS: Final = frozenset({"end_turn", "tool_use", "stop_sequence"})


class AnthropicAssembler(StreamAssembler):
    """Assembles tool calls from an Anthropic Messages stream."""

    provider = "anthropic"

    def __init__(
        self,
        *,
        may_start_early: EarlyStart | None = None,
        limits: StreamLimits = DEFAULT_STREAM_LIMITS,
    ) -> None:
        super().__init__(may_start_early=may_start_early, limits=limits)
        self._blocks: dict[int, str] = {}  # index → block type, for every block started
        self._stopped: set[int] = set()
        self._start_input: dict[int, str] = {}
        self._handlers: dict[str, Callable[[Mapping[str, object]], list[Ready]]] = {
            "content_block_delta": self._block_delta,
            "content_block_start": self._block_start,
            "content_block_stop": self._block_stop,
            "message_start": self._message_start,
            "message_delta": self._message_delta,
            "message_stop": self._message_stop,
            "error": self._error_event,
        }

    def _handle(self, event: Mapping[str, object]) -> list[Ready]:
        handler = self._handlers.get(str_field(event, "type") or "")
        # ping (a heartbeat) and event types added later carry nothing to assemble
        return handler(event) if handler is not None else []

    def _response_id(self, event: Mapping[str, object]) -> str | None:
        message = event.get("message") if event.get("type") == "message_start" else None
        message_id = message.get("id") if isinstance(message, dict) else None
        return message_id if isinstance(message_id, str) and message_id else None

    def _message_start(self, event: Mapping[str, object]) -> list[Ready]:
        message = map_field(event, "message") or {}
        self._set_model_call_id(str_field(message, "id"))
        return []

    def _block_start(self, event: Mapping[str, object]) -> list[Ready]:
        index = _index(event)
        block = map_field(event, "content_block") or {}
        kind = str_field(block, "type") or ""
        block_id = str_field(block, "id") or ""
        if index in self._blocks:
            known = self._calls.get(index)
            if self._blocks[index] == kind and (known is None or known.call_id == block_id):
                return []  # a structural duplicate
            msg = f"anthropic: content block {index} started twice as different blocks"
            raise StreamError(msg, code="call_id_conflict")
        self._blocks[index] = kind
        if kind.endswith("tool_use"):
            self._open(
                index,
                order=index,
                call_id=block_id,
                name=str_field(block, "name") or "",
                kind=None if kind == "tool_use" else kind,
                item_id=block_id or None,
            )
            start_input = map_field(block, "input") or {}
            start_json = json.dumps(start_input, ensure_ascii=False, separators=(",", ":"))
            self._count(utf8_size(start_json))  # held until the block stops
            self._start_input[index] = start_json
        return []

    def _block_delta(self, event: Mapping[str, object]) -> list[Ready]:
        index = _index(event)
        if index not in self._blocks or index in self._stopped:
            state = "stopped" if index in self._stopped else "never started"
            msg = f"anthropic: a delta for content block {index}, which is {state}"
            raise StreamError(msg, code="protocol")
        delta = map_field(event, "delta") or {}
        kind = str_field(delta, "type")
        if kind == "input_json_delta":
            call = self._calls.get(index)
            if call is None:
                msg = f"anthropic: input_json_delta for block {index}, not a tool use"
                raise StreamError(msg, code="protocol")
            piece = str_field(delta, "partial_json")
            if piece:
                self._append(call, piece)
        elif kind == "text_delta":
            text = str_field(delta, "text")
            if text:
                self._add_text(text)
        # thinking, signature and citations deltas carry no call
        return []

    def _block_stop(self, event: Mapping[str, object]) -> list[Ready]:
        index = _index(event)
        if index not in self._blocks:
            msg = f"anthropic: content block {index} stopped but never started"
            raise StreamError(msg, code="protocol")
        if index in self._stopped:
            return []  # a structural duplicate
        self._stopped.add(index)
        call = self._calls.get(index)
        if call is None:
            return []
        if not call.buffer:
            self._append(call, self._start_input[index])
        return self._call_complete(call)

    def _message_delta(self, event: Mapping[str, object]) -> list[Ready]:
        delta = map_field(event, "delta") or {}
        stop_reason = str_field(delta, "stop_reason")
        if stop_reason is None:
            return []  # a usage update
        if stop_reason in COMPLETE_REASONS:
            return self._complete(stop_reason)
        return self._stop(stop_reason)

    def _message_stop(self, _event: Mapping[str, object]) -> list[Ready]:
        # Reached only when no message_delta stated a stop reason: nothing says
        # the message ended normally, so nothing is released.
        return self._stop(None)

    def _error_event(self, event: Mapping[str, object]) -> list[Ready]:
        error = map_field(event, "error") or {}
        return self._provider_error(str_field(error, "type"), str_field(error, "message"))


def _index(event: Mapping[str, object]) -> int:
    index = int_field(event, "index")
    if index is None:
        msg = f"anthropic: {event.get('type')} without a content block index"
        raise StreamError(msg, code="protocol")
    return index

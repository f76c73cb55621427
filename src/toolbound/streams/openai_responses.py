"""OpenAI Responses stream → tool calls (R15).

A function call is one output item, keyed here by its item id:
``response.output_item.added`` opens it (with ``call_id`` and ``name``),
``response.function_call_arguments.delta`` appends to it,
``response.function_call_arguments.done`` states the whole arguments, and
``response.output_item.done`` closes the item. The response ends with
``response.completed`` (release), ``response.incomplete`` (release nothing, e.g.
``max_output_tokens``), ``response.failed`` or ``error``.

Checks that turn silent corruption into a :class:`~toolbound.streams.StreamError`:

* the concatenated deltas must equal the ``.done`` arguments, the arguments restated
  by ``output_item.done``, and those listed by ``response.completed``
  (``arguments_mismatch``);
* a delta for an item never added, or after its ``.done`` (``protocol``).

``sequence_number`` (when present) drops duplicates: an event whose number is not
above the highest seen is a replay and is ignored. Without sequence numbers only
structural duplicates (a second ``added``/``.done``/``output_item.done`` for one
item) can be recognised and dropped.

Call-like items other than ``function_call`` (types ending in ``_call`` or
``_request``: custom tool calls with free-text input, MCP approval requests, hosted
tool calls) are never proposals; they are reported as
:class:`~toolbound.streams.assemble.OtherItem`. Messages, reasoning and MCP tool
listings are not calls and are passed over (output text is collected).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from toolbound.streams.assemble import (
    Ready,
    StreamAssembler,
    _Call,
    int_field,
    list_field,
    map_field,
    str_field,
)
from toolbound.streams.limits import DEFAULT_STREAM_LIMITS, StreamLimits
from toolbound.streams.sse import StreamError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from toolbound.streams.assemble import EarlyStart

__all__ = ["ResponsesAssembler"]

_CALL_SUFFIXES: Final = ("_call", "_request")  # the item types that ask for an action
_COMPLETED_ITEM: Final = frozenset({None, "completed"})
_STARTS: Final = frozenset({"response.created", "response.in_progress", "response.queued"})


class ResponsesAssembler(StreamAssembler):
    """Assembles tool calls from an OpenAI Responses stream (one response)."""

    provider = "openai-responses"

    def __init__(
        self,
        *,
        may_start_early: EarlyStart | None = None,
        limits: StreamLimits = DEFAULT_STREAM_LIMITS,
    ) -> None:
        super().__init__(may_start_early=may_start_early, limits=limits)
        self._last_sequence = -1
        self._handlers: dict[str, Callable[[Mapping[str, object]], list[Ready]]] = {
            "response.function_call_arguments.delta": self._arguments_delta,
            "response.output_text.delta": self._text_delta,
            "response.function_call_arguments.done": self._arguments_done,
            "response.output_item.added": self._item_added,
            "response.output_item.done": self._item_done,
            "response.created": self._response_started,
            "response.in_progress": self._response_started,
            "response.queued": self._response_started,
            "response.completed": self._response_completed,
            "response.incomplete": self._response_incomplete,
            "response.failed": self._response_failed,
            "error": self._error_event,
        }

    def _response_id(self, event: Mapping[str, object]) -> str | None:
        response = event.get("response") if event.get("type") in _STARTS else None
        response_id = response.get("id") if isinstance(response, dict) else None
        return response_id if isinstance(response_id, str) and response_id else None

    def _handle(self, event: Mapping[str, object]) -> list[Ready]:
        sequence = int_field(event, "sequence_number")
        if sequence is not None:
            if sequence <= self._last_sequence:
                return []  # R15: a duplicate or a replay
            self._last_sequence = sequence
        kind = str_field(event, "type") or ""
        handler = self._handlers.get(kind)
        if handler is not None:
            return handler(event)
        if kind.endswith(".delta"):
            self._other_delta(event)
        return []  # reasoning, content parts, annotations, …: nothing to assemble

    # -- the response ----------------------------------------------------------

    def _response_started(self, event: Mapping[str, object]) -> list[Ready]:
        response = map_field(event, "response") or {}
        self._set_model_call_id(str_field(response, "id"))
        return []

    def _response_completed(self, event: Mapping[str, object]) -> list[Ready]:
        response = map_field(event, "response") or {}
        self._set_model_call_id(str_field(response, "id"))
        # The final response restates every output item: hold the streamed calls
        # to it, so a lost or doubled delta cannot slip through.
        for item in list_field(response, "output") or ():
            if isinstance(item, dict) and item.get("type") == "function_call":
                self._check_restated(item)
        status = str_field(response, "status") or "completed"
        if status != "completed":
            return self._stop(status)  # a "completed" event that says otherwise
        return self._complete(status)

    def _response_incomplete(self, event: Mapping[str, object]) -> list[Ready]:
        response = map_field(event, "response") or {}
        self._set_model_call_id(str_field(response, "id"))
        details = map_field(response, "incomplete_details") or {}
        return self._stop(str_field(details, "reason") or "incomplete")

    def _response_failed(self, event: Mapping[str, object]) -> list[Ready]:
        response = map_field(event, "response") or {}
        self._set_model_call_id(str_field(response, "id"))
        error = map_field(response, "error") or {}
        self._stop_reason = "failed"
        return self._provider_error(str_field(error, "code"), str_field(error, "message"))

    def _error_event(self, event: Mapping[str, object]) -> list[Ready]:
        # The documented shape has code/message at the top; some carry an object.
        error = map_field(event, "error") or event
        code = str_field(error, "code") or str_field(error, "type")
        if code == "error":
            code = None
        return self._provider_error(code, str_field(error, "message"))

    # -- items -----------------------------------------------------------------

    def _item_added(self, event: Mapping[str, object]) -> list[Ready]:
        item = map_field(event, "item") or {}
        kind = str_field(item, "type")
        if kind is None or not kind.endswith(_CALL_SUFFIXES):
            return []  # message, reasoning, mcp_list_tools, …: not calls
        item_id = _item_id(item)
        known = self._calls.get(item_id)
        if known is not None:
            if known.call_id != (str_field(item, "call_id") or "") or known.name != (
                str_field(item, "name") or ""
            ):
                msg = f"openai-responses: item {item_id!r} added twice as different calls"
                raise StreamError(msg, code="call_id_conflict")
            return []  # a structural duplicate
        index = int_field(event, "output_index")
        call = self._open(
            item_id,
            order=index if index is not None else len(self._calls),
            call_id=str_field(item, "call_id") or "",
            name=str_field(item, "name") or "",
            kind=None if kind == "function_call" else kind,
            item_id=item_id,
        )
        initial = str_field(item, "arguments")
        if initial and call.kind is None:
            self._append(call, initial)
        return []

    def _item_done(self, event: Mapping[str, object]) -> list[Ready]:
        item = map_field(event, "item") or {}
        kind = str_field(item, "type")
        if kind is None or not kind.endswith(_CALL_SUFFIXES):
            return []
        call = self._calls.get(_item_id(item))
        if call is None:
            msg = f"openai-responses: {kind} item done but never added"
            raise StreamError(msg, code="protocol")
        if call.item_done:
            return []  # a structural duplicate
        if call.kind is not None:
            final = str_field(item, "input") if kind == "custom_tool_call" else None
            if final is None:
                final = _maybe_str(item.get("arguments"))
            if final is not None:
                self._replace(call, final)  # the item's input as the provider restated it
            call.item_done = True
            return []
        if (str_field(item, "call_id") or "") != call.call_id or (
            str_field(item, "name") or ""
        ) != call.name:
            msg = f"openai-responses: item {call.item_id!r} changed its call id or name"
            raise StreamError(msg, code="call_id_conflict")
        self._check_arguments(call, str_field(item, "arguments"))
        if item.get("status") not in _COMPLETED_ITEM:
            return []  # an item the provider did not complete is never released
        return self._call_complete(call)

    def _arguments_delta(self, event: Mapping[str, object]) -> list[Ready]:
        call = self._function_call(event)
        if call.args_done:
            msg = f"openai-responses: argument delta after .done for {call.call_id!r}"
            raise StreamError(msg, code="protocol")
        delta = str_field(event, "delta")
        if delta:
            self._append(call, delta)
        return []

    def _arguments_done(self, event: Mapping[str, object]) -> list[Ready]:
        call = self._function_call(event)
        arguments = str_field(event, "arguments")
        if arguments is None:
            msg = "openai-responses: function_call_arguments.done without arguments"
            raise StreamError(msg, code="protocol")
        self._check_arguments(call, arguments)
        return []

    def _text_delta(self, event: Mapping[str, object]) -> list[Ready]:
        delta = str_field(event, "delta")
        if delta:
            self._add_text(delta)
        return []

    def _other_delta(self, event: Mapping[str, object]) -> None:
        # Custom tool input, MCP arguments, …: kept apart per item, never executed.
        call = self._calls.get(str_field(event, "item_id"))
        delta = event.get("delta")
        if call is not None and call.kind is not None and isinstance(delta, str):
            self._append(call, delta)

    # -- checks ----------------------------------------------------------------

    def _function_call(self, event: Mapping[str, object]) -> _Call:
        call = self._calls.get(str_field(event, "item_id"))
        if call is None or call.kind is not None:
            msg = "openai-responses: function call arguments for an item never added"
            raise StreamError(msg, code="protocol")
        return call

    def _check_arguments(self, call: _Call, stated: str | None) -> None:
        """Hold the streamed deltas to the arguments the provider states as final."""
        if stated is None:
            if not call.args_done:
                msg = f"openai-responses: {call.call_id!r} done without its arguments"
                raise StreamError(msg, code="protocol")
            return
        # Compared as bytes (a surrogate as its 3 bytes, as the buffer holds it): no
        # second copy of the arguments is kept.
        final = stated.encode("utf-8", "surrogatepass")
        if call.buffer != final:
            msg = (
                f"openai-responses: deltas for {call.call_id!r} differ from the final "
                f"arguments ({len(call.buffer)} vs {len(final)} bytes)"
            )
            raise StreamError(msg, code="arguments_mismatch")
        call.args_done = True

    def _check_restated(self, item: Mapping[str, object]) -> None:
        call_id = str_field(item, "call_id") or ""
        call = self._by_call_id.get(call_id)
        if call is None:
            msg = f"openai-responses: the completed response lists {call_id!r}, never streamed"
            raise StreamError(msg, code="protocol")
        self._check_arguments(call, str_field(item, "arguments"))


def _item_id(item: Mapping[str, object]) -> str:
    item_id = str_field(item, "id")
    if not item_id:
        msg = "openai-responses: an output item has no id"
        raise StreamError(msg, code="protocol")
    return item_id


def _maybe_str(value: object) -> str | None:
    return value if isinstance(value, str) else None

"""OpenAI Chat Completions stream → tool calls (R15).

Each ``chat.completion.chunk`` carries ``choices[].delta``. Tool calls arrive as
``delta.tool_calls[]`` fragments keyed by ``index``: the first fragment of a call
carries its ``id`` and ``function.name``, later ones only ``function.arguments``
pieces. ``choices[].finish_reason`` ends the response.

The format has no per-call completion event, so a call is complete only when the
response is: ``finish_reason`` ``tool_calls`` or ``stop`` (the latter when the
request forced a tool choice) releases every call; ``length``, ``content_filter``
or anything else releases none. A readiness policy therefore never releases a
Chat Completions call early, and nothing infers "call 0 is done because call 1
began": that would be a guess (R15).

Refused rather than guessed at: choices other than ``index`` 0 (``n > 1`` asks for
alternative answers; executing calls from several would run alternatives side by
side) and the legacy ``delta.function_call`` (it carries no call id, and R16 pairs
results by id). Custom-tool fragments (``type: "custom"``) are reported as
:class:`~toolbound.streams.assemble.OtherItem`, never as proposals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from toolbound.streams.assemble import (
    Ready,
    StreamAssembler,
    int_field,
    list_field,
    map_field,
    str_field,
)
from toolbound.streams.sse import StreamError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ChatCompletionsAssembler"]

COMPLETE_REASONS: Final = frozenset({"tool_calls", "stop"})


class ChatCompletionsAssembler(StreamAssembler):
    """Assembles tool calls from an OpenAI Chat Completions stream.

    ``may_start_early`` is accepted for a uniform interface but cannot apply: this
    format never says a single call is complete before the response is.
    """

    provider = "openai-chat"

    def _handle(self, event: Mapping[str, object]) -> list[Ready]:
        if "error" in event:
            error = map_field(event, "error") or {}
            code = str_field(error, "code") or str_field(error, "type")
            return self._provider_error(code, str_field(error, "message"))
        self._set_model_call_id(str_field(event, "id"))
        for choice in list_field(event, "choices") or ():
            if not isinstance(choice, dict):
                msg = "openai-chat: a choice is not an object"
                raise StreamError(msg, code="protocol")
            if int_field(choice, "index") not in {0, None}:
                msg = "openai-chat: more than one choice (n > 1) is not assembled"
                raise StreamError(msg, code="unsupported")
            delta = map_field(choice, "delta")
            if delta:
                self._delta(delta)
            finish = str_field(choice, "finish_reason")
            if finish is not None:
                return self._end(finish)
        return []

    def _response_id(self, event: Mapping[str, object]) -> str | None:
        # Every chunk names its completion; another name is another response.
        response_id = event.get("id")
        return response_id if isinstance(response_id, str) and response_id else None

    def _delta(self, delta: Mapping[str, object]) -> None:
        content = str_field(delta, "content")
        if content:
            self._add_text(content)
        if delta.get("function_call") is not None:
            msg = "openai-chat: legacy function_call deltas carry no call id"
            raise StreamError(msg, code="unsupported")
        for fragment in list_field(delta, "tool_calls") or ():
            if not isinstance(fragment, dict):
                msg = "openai-chat: a tool_calls fragment is not an object"
                raise StreamError(msg, code="protocol")
            self._fragment(fragment)

    def _fragment(self, fragment: Mapping[str, object]) -> None:
        index = int_field(fragment, "index")
        if index is None:
            msg = "openai-chat: a tool_calls fragment has no index"
            raise StreamError(msg, code="protocol")
        call_id = str_field(fragment, "id")
        custom = map_field(fragment, "custom")
        kind = "custom" if custom is not None or fragment.get("type") == "custom" else None
        body = (custom if kind else map_field(fragment, "function")) or {}
        name = str_field(body, "name")
        piece = str_field(body, "input" if kind else "arguments")
        call = self._calls.get(index)
        if call is None:
            call = self._open(index, order=index, call_id=call_id or "", name=name or "", kind=kind)
        elif (call_id and call_id != call.call_id) or (name and name != call.name):
            # R15: a fragment naming another call must never extend this buffer.
            msg = f"openai-chat: fragment for index {index} names another call"
            raise StreamError(msg, code="call_id_conflict")
        if piece:
            self._append(call, piece)

    def _end(self, finish: str) -> list[Ready]:
        if finish not in COMPLETE_REASONS:
            return self._stop(finish)  # length, content_filter, …: arguments may be cut
        for call in self._calls.values():
            call.args_done = call.item_done = True
        return self._complete(finish)

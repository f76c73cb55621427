"""OpenAI Chat Completions ↔ toolbound: pure mapping functions (R11, R18).

* :func:`read_completion` — a whole ``chat.completion`` → :class:`ToolCalls`,
  honouring ``finish_reason`` (a ``length``-truncated completion runs nothing).
* :func:`proposals_from_message` — an assistant message's ``tool_calls`` →
  Proposals, ``function.arguments`` kept byte for byte.
* :func:`tool_message` / :func:`tool_messages` — outcomes → ``role: "tool"``
  messages carrying the call's own ``tool_call_id`` and the exact model projection.
* :func:`tool_definitions` — ToolSpecs → ``tools`` entries, ``strict`` where the
  schema allows it.

Legacy ``function_call`` (the pre-tools API) is not read. Custom tool calls
(``type: "custom"``, free-text input) are never Proposals; :func:`read_completion`
reports them as :class:`~toolbound.adapters.OtherItem`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

from toolbound._model import Proposal
from toolbound.adapters import (
    NameMap,
    OtherItem,
    ResponseError,
    Shape,
    ToolCalls,
    _field,
    _items,
    _loose,
    _name_of,
    _optional,
    _paired,
    _parameters,
    _plain,
    _projection,
    _provider_name,
    _strict_flag,
    _unique,
    _utf8,
    _withheld,
    describe,
)
from toolbound.streams.openai_chat import COMPLETE_REASONS

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from toolbound._model import ToolSpec
    from toolbound._outcome import Outcome
    from toolbound.results.encode import ModelProjection

__all__ = [
    "FunctionDefinition",
    "ToolDefinition",
    "ToolMessage",
    "proposals_from_message",
    "read_completion",
    "tool_definitions",
    "tool_message",
    "tool_messages",
]


class ToolMessage(TypedDict):
    """A ``role: "tool"`` message answering one call."""

    role: Literal["tool"]
    tool_call_id: str
    content: str


class FunctionDefinition(TypedDict):
    """The ``function`` member of a tool definition."""

    name: str
    description: str
    parameters: dict[str, object]
    strict: bool


class ToolDefinition(TypedDict):
    """One entry of a request's ``tools``."""

    type: Literal["function"]
    function: FunctionDefinition


def proposals_from_message(
    message: Shape, *, model_call_id: str | None = None, names: NameMap | None = None
) -> list[Proposal]:
    """The function calls in an assistant ``message``, as Proposals in the model's order.

    ``function.arguments`` becomes the Proposal's bytes exactly as received (UTF-8;
    nothing parsed, repaired or re-serialized: the runtime's strict parser sees what
    the model wrote, R3); ``id`` becomes ``proposal_id``. ``names`` maps provider
    names back to tool names. This sees one message only, not ``finish_reason``:
    prefer :func:`read_completion`, which withholds the calls of a truncated
    completion. Raises :class:`~toolbound.adapters.ResponseError` for a call
    without an id, name or string arguments, or two calls with one id.
    """
    msg = _plain(message, "chat message")
    proposals = [
        _proposal(call, model_call_id, names)
        for call in _items(msg.get("tool_calls"), "chat message tool_calls")
        if call.get("type", "function") == "function"
    ]
    _unique(proposals, "chat message")
    return proposals


def read_completion(
    completion: Shape, *, choice: int = 0, names: NameMap | None = None
) -> ToolCalls:
    """Everything one ``chat.completion`` asks for, from its choice ``choice``.

    The calls run only when ``finish_reason`` says the model finished
    (``tool_calls``, or ``stop`` when a tool was forced); otherwise (``length``,
    ``content_filter``, none) every call is withheld as incomplete, the last one as
    possibly cut off (R15). The completion ``id`` becomes each Proposal's
    ``model_call_id``. A completion without that choice is a
    :class:`~toolbound.adapters.ResponseError`.
    """
    comp = _plain(completion, "chat completion")
    choices = _items(comp.get("choices"), "chat completion choices")
    chosen = next((c for c in choices if c.get("index") == choice), None)
    if chosen is None:
        chosen = choices[choice] if 0 <= choice < len(choices) else None
    if chosen is None:
        msg = f"chat completion: there is no choice {choice}"
        raise ResponseError(msg, code="malformed")
    finish = _optional(chosen, "finish_reason")
    model_call_id = _optional(comp, "id")
    message = _plain(chosen.get("message") or {}, "chat message")
    proposals = proposals_from_message(message, model_call_id=model_call_id, names=names)
    others = tuple(
        _other(call)
        for call in _items(message.get("tool_calls"), "chat message tool_calls")
        if call.get("type", "function") != "function"
    )
    if finish in COMPLETE_REASONS:
        return ToolCalls(
            proposals=tuple(proposals),
            other_items=others,
            complete=True,
            stop_reason=finish,
            model_call_id=model_call_id,
        )
    # Calls arrive one after another: only the last can have been cut mid-arguments.
    cut = {proposals[-1].proposal_id} if proposals else set()
    return ToolCalls(
        proposals=(),
        incomplete=_withheld(proposals, cut=cut),
        other_items=others,
        complete=False,
        stop_reason=finish,
        model_call_id=model_call_id,
    )


def tool_message(result: Outcome | ModelProjection) -> ToolMessage:
    """The ``role: "tool"`` message for one outcome (or its model projection).

    ``content`` is the projection's text exactly: the bytes the trace records as
    sent back (R14); ``tool_call_id`` is the call's own id (R11).
    """
    projection = _projection(result)
    return {"role": "tool", "tool_call_id": projection.proposal_id, "content": projection.text}


def tool_messages(
    results: Iterable[Outcome | ModelProjection],
    *,
    proposals: Iterable[Proposal] | None = None,
) -> list[ToolMessage]:
    """One tool message per outcome, each paired to its call by id, never by order.

    With ``proposals`` (the calls the model made) every call must have exactly one
    result and no result may answer another call (R11, R16); the messages then
    follow the model's order. Raises :class:`~toolbound.ConfigurationError` otherwise.
    """
    return [tool_message(p) for p in _paired(results, proposals)]


def tool_definitions(
    specs: Iterable[ToolSpec], *, strict: bool = True, names: NameMap | None = None
) -> list[ToolDefinition]:
    """The ``tools`` entries for ``specs`` (e.g. ``ToolSet.specs``).

    ``parameters`` is the input schema as written. ``strict`` is ``True`` only when
    asked for and :func:`~toolbound.adapters.strict_compatible` finds nothing;
    otherwise ``False``, with a logged note of why (the schema is never rewritten).
    Names go through ``names``; without a map every name must already be a valid
    provider name, else :class:`~toolbound.ConfigurationError`.
    """
    return [
        {
            "type": "function",
            "function": {
                "name": _provider_name(spec, names),
                "description": describe(spec),
                "parameters": _parameters(spec),
                "strict": _strict_flag(spec, strict=strict),
            },
        }
        for spec in specs
    ]


def _proposal(
    call: Mapping[str, object], model_call_id: str | None, names: NameMap | None
) -> Proposal:
    function = _plain(call.get("function"), "chat tool call function")
    return Proposal(
        name=_name_of(_field(function, "name", "chat tool call"), names),
        # Exactly as received: the runtime's parser, not the adapter, judges them.
        arguments=_utf8(_field(function, "arguments", "chat tool call")),
        proposal_id=_field(call, "id", "chat tool call"),
        model_call_id=model_call_id,
    )


def _other(call: Mapping[str, object]) -> OtherItem:
    kind = _optional(call, "type") or "unknown"
    body = _loose(call.get(kind))  # {"type": "custom", "custom": {"name", "input"}}
    content = _optional(body, "input")
    return OtherItem(
        kind=kind,
        item_id=None,
        call_id=_optional(call, "id"),
        name=_optional(body, "name"),
        content=None if content is None else _utf8(content),
        done=True,
    )

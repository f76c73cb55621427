r"""Anthropic Messages ↔ toolbound: pure mapping functions (R11, R18).

* :func:`read_message` — a whole ``message`` → :class:`ToolCalls`, honouring
  ``stop_reason`` (a ``max_tokens``-truncated message runs nothing).
* :func:`proposals_from_content` — ``tool_use`` content blocks → Proposals.
* :func:`tool_result_block` / :func:`tool_result_blocks` /
  :func:`tool_results_message` — outcomes → ``tool_result`` blocks with the call's
  own ``tool_use_id`` and ``is_error``, and the ``user`` message that carries them.
* :func:`tool_definitions` — ToolSpecs → ``tools`` entries.

**Argument bytes.** Anthropic hands over ``tool_use.input`` already parsed, so the
model's own bytes are gone by the time a non-streamed message (or an SDK's
accumulated stream) arrives. The Proposal's bytes are a deterministic
serialization of that object: compact JSON (``,`` and ``:`` without spaces), keys in
the order received, non-ASCII characters as UTF-8 (not ``\u`` escapes). The same
object always gives the same bytes. What this cannot do: the strict parser's
duplicate-key check (R3) cannot see duplicates that were already collapsed when the
object was parsed, and the trace records these bytes, not the model's. Where the
exact bytes matter, assemble the raw stream with
:class:`toolbound.streams.AnthropicAssembler`, which keeps the ``input_json_delta``
text as sent.

Other call-like blocks (``server_tool_use``, ``mcp_tool_use``: tools the provider
runs itself) are never Proposals; :func:`read_message` reports them in
:attr:`ToolCalls.other_items`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final, Literal, TypedDict

from toolbound._model import Proposal
from toolbound.adapters import (
    NameMap,
    OtherItem,
    ResponseError,
    Shape,
    ToolCalls,
    _field,
    _items,
    _name_of,
    _optional,
    _paired,
    _parameters,
    _plain,
    _projection,
    _provider_name,
    _unique,
    _utf8,
    _withheld,
    describe,
)
from toolbound.streams.anthropic import COMPLETE_REASONS

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from toolbound._model import ToolSpec
    from toolbound._outcome import Outcome
    from toolbound.results.encode import ModelProjection

__all__ = [
    "ToolDefinition",
    "ToolResultBlock",
    "ToolResultsMessage",
    "input_bytes",
    "proposals_from_content",
    "read_message",
    "tool_definitions",
    "tool_result_block",
    "tool_result_blocks",
    "tool_results_message",
]

# Built once. Unlike results.encode.dumps it lets NaN and Infinity through as the
# tokens Python writes, so the strict parser rejects them (R3) rather than this
# adapter raising on what the model sent.
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=True)


class ToolResultBlock(TypedDict):
    """A ``tool_result`` content block answering one ``tool_use``."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: str
    is_error: bool


class ToolResultsMessage(TypedDict):
    """The ``user`` message that answers a turn's ``tool_use`` blocks."""

    role: Literal["user"]
    content: list[ToolResultBlock]


class ToolDefinition(TypedDict):
    """One entry of a request's ``tools``."""

    name: str
    description: str
    input_schema: dict[str, object]


def input_bytes(value: object) -> bytes:
    r"""The deterministic bytes toolbound uses for an already-parsed ``input``.

    Compact JSON, keys in the order given, UTF-8 without ``\u`` escapes for
    non-ASCII text; see the module docstring for what this cannot preserve.
    """
    try:
        return _utf8(_ENCODER.encode(value))
    except (TypeError, ValueError) as exc:
        msg = f"tool_use input is not JSON: {exc}"
        raise ResponseError(msg, code="malformed") from exc


def proposals_from_content(
    content_blocks: Iterable[Shape],
    *,
    model_call_id: str | None = None,
    names: NameMap | None = None,
) -> list[Proposal]:
    """The ``tool_use`` blocks of a message's ``content``, as Proposals in order.

    ``id`` becomes ``proposal_id``; ``input`` (a parsed object) becomes bytes by
    :func:`input_bytes`: deterministic, but not the model's own bytes, so the
    duplicate-key check cannot apply to it. This sees the blocks only, not
    ``stop_reason``: prefer :func:`read_message`, which withholds the calls of a
    truncated message. Raises :class:`~toolbound.adapters.ResponseError` for a
    block without ``id``, ``name`` or ``input``, or two blocks with one id.
    """
    proposals = [
        _proposal(block, model_call_id, names)
        for block in _items(content_blocks, "message content")
        if block.get("type") == "tool_use"
    ]
    _unique(proposals, "message content")
    return proposals


def read_message(message: Shape, *, names: NameMap | None = None) -> ToolCalls:
    """Everything one assistant ``message`` asks for.

    The calls run only when ``stop_reason`` says the model finished (``tool_use``,
    ``end_turn``, ``stop_sequence``). Otherwise (``max_tokens``, ``refusal``,
    ``pause_turn``, none) every call is withheld as incomplete (R15): the final
    block, if it is a ``tool_use``, as possibly cut off — an SDK's stream helper
    fills such an ``input`` by lenient partial-JSON parsing, so it can look whole
    when it is not. The message ``id`` becomes each Proposal's ``model_call_id``.
    """
    msg = _plain(message, "message")
    stop = _optional(msg, "stop_reason")
    model_call_id = _optional(msg, "id")
    blocks = _items(msg.get("content"), "message content")
    proposals = proposals_from_content(blocks, model_call_id=model_call_id, names=names)
    others = tuple(
        _other(block)
        for block in blocks
        if (_optional(block, "type") or "").endswith("tool_use") and block.get("type") != "tool_use"
    )
    if stop in COMPLETE_REASONS:
        return ToolCalls(
            proposals=tuple(proposals),
            other_items=others,
            complete=True,
            stop_reason=stop,
            model_call_id=model_call_id,
        )
    last = blocks[-1] if blocks else {}
    cut = {str(last.get("id"))} if last.get("type") == "tool_use" else set()
    return ToolCalls(
        proposals=(),
        incomplete=_withheld(proposals, cut=cut),
        other_items=others,
        complete=False,
        stop_reason=stop,
        model_call_id=model_call_id,
    )


def tool_result_block(result: Outcome | ModelProjection) -> ToolResultBlock:
    """The ``tool_result`` block for one outcome (or its model projection).

    ``content`` is the projection's text exactly: the bytes the trace records as sent
    back (R14); ``tool_use_id`` is the call's own id (R11); ``is_error`` is set for
    every error envelope (rejected, failed, unknown outcome, …).
    """
    projection = _projection(result)
    return {
        "type": "tool_result",
        "tool_use_id": projection.proposal_id,
        "content": projection.text,
        "is_error": projection.is_error,
    }


def tool_result_blocks(
    results: Iterable[Outcome | ModelProjection],
    *,
    proposals: Iterable[Proposal] | None = None,
) -> list[ToolResultBlock]:
    """One ``tool_result`` block per outcome, paired to its call by id, never by order.

    With ``proposals`` every call must have exactly one result and no result may
    answer another call (R11, R16); the blocks then follow the model's order.
    Raises :class:`~toolbound.ConfigurationError` otherwise.
    """
    return [tool_result_block(p) for p in _paired(results, proposals)]


def tool_results_message(
    results: Iterable[Outcome | ModelProjection],
    *,
    proposals: Iterable[Proposal] | None = None,
) -> ToolResultsMessage:
    """The ``user`` message answering a turn: its ``tool_result`` blocks, nothing else."""
    return {"role": "user", "content": tool_result_blocks(results, proposals=proposals)}


def tool_definitions(
    specs: Iterable[ToolSpec], *, names: NameMap | None = None
) -> list[ToolDefinition]:
    """The ``tools`` entries for ``specs`` (e.g. ``ToolSet.specs``).

    ``input_schema`` is the input schema as written. Names go through ``names``;
    without a map every name must already be a valid provider name, else
    :class:`~toolbound.ConfigurationError`.
    """
    return [
        {
            "name": _provider_name(spec, names),
            "description": describe(spec),
            "input_schema": _parameters(spec),
        }
        for spec in specs
    ]


def _proposal(
    block: Mapping[str, object], model_call_id: str | None, names: NameMap | None
) -> Proposal:
    if "input" not in block:
        msg = "tool_use block: 'input' is missing"
        raise ResponseError(msg, code="malformed")
    return Proposal(
        name=_name_of(_field(block, "name", "tool_use block"), names),
        arguments=input_bytes(block["input"]),
        proposal_id=_field(block, "id", "tool_use block"),
        model_call_id=model_call_id,
    )


def _other(block: Mapping[str, object]) -> OtherItem:
    content = input_bytes(block["input"]) if "input" in block else None
    return OtherItem(
        kind=_optional(block, "type") or "unknown",
        item_id=_optional(block, "id"),
        call_id=_optional(block, "id"),
        name=_optional(block, "name"),
        content=content,
        done=True,
    )

"""OpenAI Responses ↔ toolbound: pure mapping functions (R11, R18).

* :func:`read_response` — a whole ``response`` → :class:`ToolCalls`, honouring the
  response's and each item's ``status``.
* :func:`proposals_from_output` — ``function_call`` output items → Proposals,
  ``arguments`` kept byte for byte, ``call_id`` as ``proposal_id``.
* :func:`function_call_output` / :func:`function_call_outputs` — outcomes →
  ``function_call_output`` input items with the call's own ``call_id``.
* :func:`tool_definitions` — ToolSpecs → ``tools`` entries, ``strict`` where the
  schema allows it.

Only ``function_call`` items ever become Proposals. Other call-like items — types
ending in ``_call`` or ``_request``: custom tool calls (free-text input), MCP
approval requests, hosted tool calls — are never executed: :func:`read_response`
reports them in :attr:`ToolCalls.other_items` and :func:`proposals_from_output`
ignores them. Messages, reasoning and MCP tool listings are not calls and are
passed over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal, TypedDict

from toolbound._model import Proposal
from toolbound.adapters import (
    NameMap,
    OtherItem,
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
    _strict_flag,
    _unique,
    _utf8,
    _withheld,
    describe,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from toolbound._model import ToolSpec
    from toolbound._outcome import Outcome
    from toolbound.results.encode import ModelProjection

__all__ = [
    "FunctionCallOutput",
    "ToolDefinition",
    "function_call_output",
    "function_call_outputs",
    "proposals_from_output",
    "read_response",
    "tool_definitions",
]

_CALL_SUFFIXES: Final = ("_call", "_request")  # item types that ask for an action
# An item without a status is one the caller built; the API always states one.
_COMPLETED_ITEM: Final = frozenset({None, "completed"})


class FunctionCallOutput(TypedDict):
    """A ``function_call_output`` input item answering one call."""

    type: Literal["function_call_output"]
    call_id: str
    output: str


class ToolDefinition(TypedDict):
    """One entry of a request's ``tools``."""

    type: Literal["function"]
    name: str
    description: str
    parameters: dict[str, object]
    strict: bool


def proposals_from_output(
    output_items: Iterable[Shape],
    *,
    model_call_id: str | None = None,
    names: NameMap | None = None,
) -> list[Proposal]:
    """The completed ``function_call`` items of a response's ``output``, as Proposals.

    ``arguments`` becomes the bytes exactly as received (UTF-8, never re-serialized,
    R3); ``call_id`` (not the item ``id``) becomes ``proposal_id``, since results
    answer by ``call_id``. An item whose ``status`` is not ``completed`` is not a
    Proposal, and every non-function item is ignored; :func:`read_response` reports
    both. Raises :class:`~toolbound.adapters.ResponseError` for a call missing its
    ``call_id``, ``name`` or string ``arguments``, or two calls with one ``call_id``.
    """
    proposals = [
        _proposal(item, model_call_id, names)
        for item in _items(output_items, "responses output")
        if item.get("type") == "function_call" and item.get("status") in _COMPLETED_ITEM
    ]
    _unique(proposals, "responses output")
    return proposals


def read_response(response: Shape, *, names: NameMap | None = None) -> ToolCalls:
    """Everything one ``response`` asks for.

    The calls run only when the response's ``status`` is ``completed``; otherwise
    (``incomplete``, ``failed``, ``in_progress``, …) every function call is withheld
    as incomplete (R15). A function call whose own item did not complete is withheld
    in any case. Non-function call-like items are listed in ``other_items``, never
    run. The response ``id`` becomes each Proposal's ``model_call_id``.
    """
    resp = _plain(response, "response")
    status = _optional(resp, "status")
    model_call_id = _optional(resp, "id")
    calls: list[Proposal] = []
    unfinished: set[str] = set()
    others: list[OtherItem] = []
    for item in _items(resp.get("output"), "responses output"):
        kind = _optional(item, "type") or ""
        if kind == "function_call":
            proposal = _proposal(item, model_call_id, names)
            calls.append(proposal)
            if item.get("status") not in _COMPLETED_ITEM:
                unfinished.add(proposal.proposal_id)
        elif kind.endswith(_CALL_SUFFIXES):
            others.append(_other(kind, item))
    _unique(calls, "responses output")
    complete = status == "completed"
    # A completed response runs its finished calls; an item that did not finish
    # never runs. A response that did not complete runs nothing (R15).
    runs = {p.proposal_id for p in calls if complete and p.proposal_id not in unfinished}
    runnable = [p for p in calls if p.proposal_id in runs]
    withheld = [p for p in calls if p.proposal_id not in runs]
    return ToolCalls(
        proposals=tuple(runnable),
        incomplete=_withheld(withheld, cut=unfinished),
        other_items=tuple(others),
        complete=complete,
        stop_reason=status,
        model_call_id=model_call_id,
    )


def function_call_output(result: Outcome | ModelProjection) -> FunctionCallOutput:
    """The ``function_call_output`` item for one outcome (or its model projection).

    ``output`` is the projection's text exactly: the bytes the trace records as sent
    back (R14); ``call_id`` is the call's own id (R11).
    """
    projection = _projection(result)
    return {
        "type": "function_call_output",
        "call_id": projection.proposal_id,
        "output": projection.text,
    }


def function_call_outputs(
    results: Iterable[Outcome | ModelProjection],
    *,
    proposals: Iterable[Proposal] | None = None,
) -> list[FunctionCallOutput]:
    """One ``function_call_output`` per outcome, paired to its call by id, never by order.

    With ``proposals`` every call must have exactly one result and no result may
    answer another call (R11, R16); the items then follow the model's order.
    Raises :class:`~toolbound.ConfigurationError` otherwise.
    """
    return [function_call_output(p) for p in _paired(results, proposals)]


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
            "name": _provider_name(spec, names),
            "description": describe(spec),
            "parameters": _parameters(spec),
            "strict": _strict_flag(spec, strict=strict),
        }
        for spec in specs
    ]


def _proposal(
    item: Mapping[str, object], model_call_id: str | None, names: NameMap | None
) -> Proposal:
    return Proposal(
        name=_name_of(_field(item, "name", "function_call item"), names),
        # Exactly as received: the runtime's parser, not the adapter, judges them.
        arguments=_utf8(_field(item, "arguments", "function_call item")),
        proposal_id=_field(item, "call_id", "function_call item"),
        model_call_id=model_call_id,
    )


def _other(kind: str, item: Mapping[str, object]) -> OtherItem:
    # Custom tools carry free text in ``input``; MCP and hosted calls JSON in
    # ``arguments``. Kept for the caller to see, never parsed or run.
    content = _optional(item, "input") if kind == "custom_tool_call" else None
    if content is None:
        content = _optional(item, "arguments")
    return OtherItem(
        kind=kind,
        item_id=_optional(item, "id"),
        call_id=_optional(item, "call_id"),
        name=_optional(item, "name"),
        content=None if content is None else _utf8(content),
        done=item.get("status") in _COMPLETED_ITEM,
    )

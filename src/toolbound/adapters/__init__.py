"""Adapters: pure mappings between toolbound's neutral model and provider shapes (R18).

One module per provider wire format, each a set of pure functions over the
providers' own JSON shapes (plain dicts), so they work with or without the SDKs::

    toolbound.adapters.openai_chat        Chat Completions: tool_calls → Proposals,
                                          outcomes → role "tool" messages
    toolbound.adapters.openai_responses   Responses: function_call items → Proposals,
                                          outcomes → function_call_output items
    toolbound.adapters.anthropic          Messages: tool_use blocks → Proposals,
                                          outcomes → tool_result blocks
    toolbound.adapters.http               toolbound's own HTTP answers: outcomes → JSON,
                                          errors → problem+json

Every provider module offers the same three directions: a response → :class:`ToolCalls` (or
just the Proposals), outcomes → the provider's tool-result shape, and ToolSpecs →
the provider's tool definitions. An SDK object (a pydantic model) is accepted
wherever a dict is: it is turned into its JSON shape at the boundary and never
imported here. The SDKs themselves are optional extras (``toolbound[openai]``,
``toolbound[anthropic]``).

This module holds what the three share: the reversible :class:`NameMap` for tool
names, the :class:`ToolCalls` a whole response maps to, the OpenAI strict-mode check
:func:`strict_compatible`, and :class:`ResponseError` for a response that cannot be
mapped without guessing. Its place in the exception tree::

    ToolboundError
    └── ResponseError        a provider response that is malformed or ambiguous
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, Literal, Protocol

from toolbound._errors import ConfigurationError, ToolboundError
from toolbound._model import Proposal, ToolSpec
from toolbound.results.encode import ModelProjection
from toolbound.streams.assemble import IncompleteCall, OtherItem

if TYPE_CHECKING:
    from toolbound._outcome import Outcome

__all__ = [
    "MAX_STRICT_DEPTH",
    "MAX_STRICT_PROPERTIES",
    "PROVIDER_NAME",
    "IncompleteCall",
    "NameMap",
    "OtherItem",
    "ResponseError",
    "ResponseErrorCode",
    "SDKModel",
    "Shape",
    "ToolCalls",
    "describe",
    "strict_compatible",
]

logger = logging.getLogger("toolbound.adapters")

PROVIDER_NAME: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""The tool names OpenAI and Anthropic accept. toolbound names may also hold dots."""


class SDKModel(Protocol):
    """A provider SDK object: a pydantic model that can dump its JSON shape."""

    def model_dump(
        self, *, mode: Literal["json"], by_alias: bool, warnings: bool
    ) -> Mapping[str, object]:
        """The object as the provider's JSON, field names as on the wire."""
        ...


Shape = Mapping[str, object] | SDKModel
"""A provider JSON object, as a dict or as the SDK's model of it."""


ResponseErrorCode = Literal["malformed", "duplicate_call_id"]


class ResponseError(ToolboundError):
    """A provider response that cannot be mapped without guessing; run nothing from it.

    ``malformed``: a field the provider always sends is missing or of the wrong type.
    ``duplicate_call_id``: two calls share one id, so results could not be paired
    with calls by id (R11).
    """

    code = "malformed_response"
    recoverable = False

    def __init__(self, message: str, *, code: ResponseErrorCode) -> None:
        super().__init__(message, code=code)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCalls:
    """What one whole provider response asks for, split by what may run (R15, R18).

    ``proposals`` are the calls to run, in the model's order. ``incomplete`` are calls
    withheld because the response did not end normally (stopped for ``length`` /
    ``max_tokens``, refused, incomplete, failed) or the call's own item did not
    complete: a truncated response is not the model's final word, so none of its
    calls run (the same rule as the stream assemblers). ``other_items`` are call-like
    items toolbound never executes (custom tool calls, MCP approval requests, hosted
    tool calls, server tool uses). ``complete`` says whether the provider reported a
    normal end; ``stop_reason`` is its own word for how the response ended.
    """

    proposals: tuple[Proposal, ...]
    incomplete: tuple[IncompleteCall, ...] = ()
    other_items: tuple[OtherItem, ...] = ()
    complete: bool
    stop_reason: str | None
    model_call_id: str | None = None


class NameMap:
    """A reversible, collision-checked mapping of tool names to provider names (R18).

    Providers accept names matching :data:`PROVIDER_NAME`; toolbound names may
    contain dots (``calendar.create_event``). Each dot becomes ``dot`` (``"__"`` by
    default: ``calendar__create_event``); other names map to themselves. The map is
    built once from the specs the model will see and raises
    :class:`~toolbound.ConfigurationError` when two names would map to one provider
    name or a mapped name is not a valid provider name (too long, say): nothing is
    truncated or guessed.

    Reading back, :meth:`tool_name` maps only names this map emitted; any other
    name comes back unchanged and the runtime's exact lookup decides: a name that
    is no visible tool is rejected as unknown (R17 row 1). Nothing is fuzzy-matched.
    """

    __slots__ = ("_to_provider", "_to_tool", "dot")

    def __init__(self, tools: Iterable[ToolSpec | str], *, dot: str = "__") -> None:
        if not PROVIDER_NAME.fullmatch(dot):
            msg = f"NameMap dot replacement {dot!r} must itself match {PROVIDER_NAME.pattern}"
            raise ConfigurationError(msg)
        self.dot = dot
        self._to_provider: dict[str, str] = {}
        self._to_tool: dict[str, str] = {}
        for tool in tools:
            name = tool.name if isinstance(tool, ToolSpec) else tool
            if name in self._to_provider:
                continue  # another version of a name already mapped
            provider = name.replace(".", dot)
            if not PROVIDER_NAME.fullmatch(provider):
                msg = (
                    f"tool name {name!r} maps to {provider!r}, which providers refuse "
                    f"(must match {PROVIDER_NAME.pattern}); rename the tool"
                )
                raise ConfigurationError(msg, code="invalid_provider_name")
            taken = self._to_tool.get(provider)
            if taken is not None:
                msg = (
                    f"tool names {taken!r} and {name!r} both map to {provider!r}; "
                    "rename one or choose another dot replacement"
                )
                raise ConfigurationError(msg, code="provider_name_collision")
            self._to_provider[name] = provider
            self._to_tool[provider] = name

    def provider_name(self, name: str) -> str:
        """The name the provider is shown for the toolbound tool ``name``."""
        try:
            return self._to_provider[name]
        except KeyError:
            msg = f"tool {name!r} is not in this NameMap; build it from the same specs"
            raise ConfigurationError(msg) from None

    def tool_name(self, provider_name: str) -> str:
        """The toolbound name behind ``provider_name``; an unmapped name unchanged."""
        return self._to_tool.get(provider_name, provider_name)

    def restore(self, proposal: Proposal) -> Proposal:
        """``proposal`` with its provider name mapped back (e.g. one a stream assembled)."""
        name = self.tool_name(proposal.name)
        return proposal if name == proposal.name else replace(proposal, name=name)

    def items(self) -> list[tuple[str, str]]:
        """``(toolbound name, provider name)`` pairs, in the order given."""
        return list(self._to_provider.items())

    def __contains__(self, name: object) -> bool:
        return name in self._to_provider

    def __len__(self) -> int:
        return len(self._to_provider)

    def __repr__(self) -> str:
        return f"NameMap({dict(self._to_provider)!r})"


def describe(spec: ToolSpec) -> str:
    """The description a model is shown for ``spec``.

    ``description``, then ``Purpose: …`` and ``Not for: …; ….`` when the spec has a
    purpose or non-goals. The same text for every provider.
    """
    parts = [spec.description.strip()]
    if spec.purpose.strip():
        parts.append(f"Purpose: {spec.purpose.strip()}")
    if spec.non_goals:
        parts.append("Not for: " + "; ".join(g.strip() for g in spec.non_goals) + ".")
    return "\n\n".join(parts)


# -- OpenAI strict mode ----------------------------------------------------------

MAX_STRICT_DEPTH: Final = 10
"""Object nesting OpenAI documents as the strict-mode limit."""
MAX_STRICT_PROPERTIES: Final = 5000
"""Total object properties OpenAI documents as the strict-mode limit."""

# The subset of JSON Schema OpenAI's strict mode (Structured Outputs) documents as
# supported. Anything else (allOf, oneOf, not, if/then/else, default, minLength,
# patternProperties, …) makes the schema non-strict: reported, never rewritten.
_STRICT_KEYWORDS: Final = frozenset(
    {
        "$defs",
        "$ref",
        "additionalProperties",
        "anyOf",
        "const",
        "definitions",
        "description",
        "enum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
        "items",
        "maxItems",
        "maximum",
        "minItems",
        "minimum",
        "multipleOf",
        "pattern",
        "properties",
        "required",
        "title",
        "type",
    }
)
_STRICT_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_STRICT_TYPES: Final = frozenset(
    {"string", "number", "integer", "boolean", "object", "array", "null"}
)


def strict_compatible(schema: Mapping[str, object]) -> list[str]:
    """Why ``schema`` cannot be sent with OpenAI ``strict: true``; empty when it can.

    Strict mode needs: an object at the root (not ``anyOf``); every object with
    ``additionalProperties: false`` and all its properties in ``required``; only
    the keywords and formats strict mode supports; at most
    :data:`MAX_STRICT_DEPTH` levels of objects and :data:`MAX_STRICT_PROPERTIES`
    properties. Each reason names its place with a JSON Pointer. The schema is only
    read: making it compatible would change its meaning (an optional field becomes
    required), so that stays the tool author's decision.
    """
    reasons: list[str] = []
    if schema.get("type") != "object":
        reasons.append('/: the root must be {"type": "object"}')
    if "anyOf" in schema:
        reasons.append("/: the root must not be anyOf")
    count = [0]
    _strict_walk(_undeclared(schema), "", 0, reasons, count)
    if count[0] > MAX_STRICT_PROPERTIES:
        reasons.append(f"/: {count[0]} properties, more than {MAX_STRICT_PROPERTIES}")
    return reasons


def _strict_walk(  # noqa: C901, PLR0912 - one check per keyword reads best
    schema: object, pointer: str, depth: int, reasons: list[str], count: list[int]
) -> None:
    where = pointer or "/"
    if not isinstance(schema, Mapping):
        what = "a boolean schema" if isinstance(schema, bool) else "a non-object schema"
        reasons.append(f"{where}: {what} is not supported")
        return
    reasons.extend(
        f"{where}: keyword {key!r} is not supported"
        for key in schema
        if key not in _STRICT_KEYWORDS
    )
    types = schema.get("type")
    listed = types if isinstance(types, list) else [types] if types is not None else []
    reasons.extend(
        f"{where}: type {t!r} is not supported" for t in listed if t not in _STRICT_TYPES
    )
    fmt = schema.get("format")
    if fmt is not None and fmt not in _STRICT_FORMATS:
        reasons.append(f"{where}: format {fmt!r} is not supported")
    properties = schema.get("properties")
    if "object" in listed or properties is not None:
        if depth + 1 > MAX_STRICT_DEPTH:
            reasons.append(f"{where}: objects nested deeper than {MAX_STRICT_DEPTH}")
        if schema.get("additionalProperties") is not False:
            reasons.append(f"{where}: an object must set additionalProperties: false")
        props = properties if isinstance(properties, Mapping) else {}
        count[0] += len(props)
        required = schema.get("required")
        listed_required = set(required) if isinstance(required, list) else set()
        missing = [name for name in props if name not in listed_required]
        if missing:
            reasons.append(f"{where}: properties not in required: {', '.join(missing)}")
        for name, sub in props.items():
            _strict_walk(sub, f"{pointer}/properties/{_escape(name)}", depth + 1, reasons, count)
    items = schema.get("items")
    if items is not None:
        _strict_walk(items, f"{pointer}/items", depth, reasons, count)
    any_of = schema.get("anyOf")
    if isinstance(any_of, list):
        for i, sub in enumerate(any_of):
            _strict_walk(sub, f"{pointer}/anyOf/{i}", depth, reasons, count)
    for defs in ("$defs", "definitions"):
        table = schema.get(defs)
        if isinstance(table, Mapping):
            for name, sub in table.items():
                _strict_walk(sub, f"{pointer}/{defs}/{_escape(name)}", depth, reasons, count)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


# -- shared plumbing for the provider modules ------------------------------------


def _plain(value: object, what: str) -> Mapping[str, object]:
    """At the boundary: a dict stays, an SDK model becomes its wire-format JSON.

    Anything else is not a provider object: :class:`ResponseError` ``malformed``.
    """
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        # by_alias: wire names (``async``, not ``async_``); warnings off: SDK models
        # hold unions pydantic would warn about while serializing, harmlessly.
        out = dump(mode="json", by_alias=True, warnings=False)
        if isinstance(out, Mapping):
            return out
    msg = f"{what}: expected a JSON object or a provider SDK model, got {type(value).__name__}"
    raise ResponseError(msg, code="malformed")


def _loose(value: object) -> Mapping[str, object]:
    """Like :func:`_plain` for optional detail: anything not an object reads as ``{}``."""
    try:
        return _plain(value, "")
    except ResponseError:
        return {}


def _items(value: object, what: str) -> list[Mapping[str, object]]:
    """A list of provider objects (``None`` is an empty list), each made plain."""
    if value is None:
        return []
    if isinstance(value, Mapping | str | bytes) or not isinstance(value, Iterable):
        msg = f"{what}: expected a list, got {type(value).__name__}"
        raise ResponseError(msg, code="malformed")
    return [_plain(v, what) for v in value]


def _field(obj: Mapping[str, object], key: str, what: str) -> str:
    """A string field the provider always sends; its absence is a malformed response."""
    value = obj.get(key)
    if not isinstance(value, str):
        msg = f"{what}: {key!r} must be a string, got {type(value).__name__}"
        raise ResponseError(msg, code="malformed")
    return value


def _optional(obj: Mapping[str, object], key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) else None


def _utf8(text: str) -> bytes:
    r"""Text as UTF-8 bytes, faithfully even when it is not valid Unicode.

    A lone surrogate (which a JSON ``\uD83D`` escape can decode to) has no UTF-8
    form; it is kept as its surrogate code unit bytes, which the strict parser then
    rejects (R3) instead of the adapter raising on model output.
    """
    return text.encode("utf-8", "surrogatepass")


def _unique(proposals: list[Proposal], what: str) -> None:
    seen: set[str] = set()
    for p in proposals:
        if p.proposal_id in seen:
            # R11: ids map 1:1 to calls; a shared id would pair results by guesswork.
            msg = f"{what}: two calls share the id {p.proposal_id!r}"
            raise ResponseError(msg, code="duplicate_call_id")
        seen.add(p.proposal_id)


def _withheld(proposals: list[Proposal], *, cut: set[str]) -> tuple[IncompleteCall, ...]:
    """Calls of a response that did not end normally: none runs (R15).

    Those in ``cut`` may have lost part of their arguments; the rest were complete
    but belong to a response that is not the model's final word.
    """
    return tuple(
        IncompleteCall(
            call_id=p.proposal_id,
            name=p.name,
            received_arguments=p.arguments,
            reason="arguments_incomplete" if p.proposal_id in cut else "response_incomplete",
        )
        for p in proposals
    )


def _name_of(name: str, names: NameMap | None) -> str:
    return name if names is None else names.tool_name(name)


def _provider_name(spec: ToolSpec, names: NameMap | None) -> str:
    if names is not None:
        return names.provider_name(spec.name)
    if not PROVIDER_NAME.fullmatch(spec.name):
        msg = (
            f"tool name {spec.name!r} is not a valid provider name "
            f"({PROVIDER_NAME.pattern}); pass names=NameMap(specs) and use the same "
            "map when reading the response"
        )
        raise ConfigurationError(msg, code="invalid_provider_name")
    return spec.name


def _schema(value: object) -> object:
    """A plain, JSON-shaped deep copy of a schema (mappings → dicts, tuples → lists)."""
    if isinstance(value, Mapping):
        return {str(k): _schema(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_schema(v) for v in value]
    return value


def _undeclared(schema: Mapping[str, object]) -> Mapping[str, object]:
    """``schema`` without its root ``$schema``.

    The dialect is the validation gate's to apply (R4); a provider reads its own
    subset of JSON Schema, where ``$schema`` is no constraint, and is not sent it.
    """
    return (
        schema if "$schema" not in schema else {k: v for k, v in schema.items() if k != "$schema"}
    )


def _parameters(spec: ToolSpec) -> dict[str, object]:
    out = _schema(_undeclared(spec.input_schema))
    assert isinstance(out, dict)  # noqa: S101 - a Mapping always copies to a dict
    return out


def _strict_flag(spec: ToolSpec, *, strict: bool) -> bool:
    if not strict:
        return False
    reasons = strict_compatible(spec.input_schema)
    if reasons:
        # Sent with strict: false as written; rewriting the schema would change
        # what the tool accepts.
        _note_not_strict(spec.ref, tuple(reasons))
        return False
    return True


@functools.cache
def _note_not_strict(ref: str, reasons: tuple[str, ...]) -> None:
    """Log once per spec and reasons, not on every request that sends the tools."""
    logger.warning(
        "%s: input_schema is not strict-compatible, sent with strict: false (%s)",
        ref,
        "; ".join(reasons),
    )


def _projection(result: Outcome | ModelProjection) -> ModelProjection:
    return result if isinstance(result, ModelProjection) else result.message


def _paired(
    results: Iterable[Outcome | ModelProjection], proposals: Iterable[Proposal] | None
) -> list[ModelProjection]:
    """The projections to send back, checked 1:1 against the calls by id (R11, R16).

    Never paired by position: each projection carries the id of the proposal it
    answers. With ``proposals``, every call must have exactly one result and every
    result a call; the results are then given in the model's order.
    """
    projections = [_projection(r) for r in results]
    by_id: dict[str, ModelProjection] = {}
    for p in projections:
        if p.proposal_id in by_id:
            msg = f"two results for the call {p.proposal_id!r}; send one per call"
            raise ConfigurationError(msg, code="unpaired_results")
        by_id[p.proposal_id] = p
    if proposals is None:
        return projections
    wanted = [p.proposal_id for p in proposals]
    missing = [i for i in wanted if i not in by_id]
    extra = [i for i in by_id if i not in set(wanted)]
    if missing or extra:
        msg = (
            f"results do not pair 1:1 with the calls: no result for {missing}, no call for {extra}"
        )
        raise ConfigurationError(msg, code="unpaired_results")
    return [by_id[i] for i in wanted]

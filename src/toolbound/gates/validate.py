"""The validation gate: JSON Schema through jsonschema-rs, in the schema's own dialect (R4).

A schema is validated in the dialect its ``$schema`` names — draft-04, draft-06,
draft-07, 2019-09 or 2020-12 — and in 2020-12 when it names none (R4; MCP's SEP-1613
makes 2020-12 the default and lets a tool's schema declare another dialect). Any other
``$schema`` is refused. A schema is checked and compiled once, when its tool is registered
(:meth:`CompiledSchema.compile`); every proposal is then checked against the compiled
form (:meth:`CompiledSchema.validate`). Why jsonschema-rs and not ``jsonschema``: it
passes every required and ``format`` test of the official suite and follows ECMA-262
in ``pattern``, where ``jsonschema`` does not, and it is about a hundred times faster;
the figures and how to re-run them are in ``docs/validation.md``.

Two kinds of failure, kept apart as ``_errors`` requires:

* a schema the program registers that is not usable raises :class:`SchemaError`
  (developer misuse, at registration);
* arguments the model proposed that the schema refuses raise :class:`Rejection`
  carrying a ``validation`` :class:`Problem` (a runtime outcome, recoverable).

:meth:`CompiledSchema.validated` also hands integral numbers on as ``int`` wherever the
schema makes a position integer-only (``1.0`` → ``1``); where those positions are is
worked out at compile time, so a schema without any costs nothing per call.

Schema-valid is not authorized: semantic checks and authorization follow (R4, R6).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import TYPE_CHECKING, Final, TypeAlias
from urllib.parse import unquote, urldefrag, urljoin

import jsonschema_rs
from jsonschema_rs import ValidationError, ValidationErrorKind

from toolbound._errors import Problem, Rejection, SchemaError
from toolbound.problems import make_problem

if TYPE_CHECKING:
    from toolbound._model import JSONObject, JSONValue

__all__ = ["DIALECT", "DIALECTS", "CompiledSchema", "ValidatorInfo"]

DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
"""The default dialect (R4): a schema without ``$schema`` is read as 2020-12."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Dialect:
    """One JSON Schema dialect the gate validates, with the validator for it."""

    name: str
    """Its short name in messages: ``draft-07``, ``2020-12``, …"""
    uri: str
    """Its meta-schema's URI as published, recorded in the trace."""
    validator: type[jsonschema_rs.Validator]


_KNOWN: Final = (
    _Dialect(
        name="draft-04",
        uri="http://json-schema.org/draft-04/schema#",
        validator=jsonschema_rs.Draft4Validator,
    ),
    _Dialect(
        name="draft-06",
        uri="http://json-schema.org/draft-06/schema#",
        validator=jsonschema_rs.Draft6Validator,
    ),
    _Dialect(
        name="draft-07",
        uri="http://json-schema.org/draft-07/schema#",
        validator=jsonschema_rs.Draft7Validator,
    ),
    _Dialect(
        name="2019-09",
        uri="https://json-schema.org/draft/2019-09/schema",
        validator=jsonschema_rs.Draft201909Validator,
    ),
    _Dialect(name="2020-12", uri=DIALECT, validator=jsonschema_rs.Draft202012Validator),
)

DIALECTS: Final[Mapping[str, str]] = {d.name: d.uri for d in _KNOWN}
"""Every dialect the gate validates: short name → the meta-schema URI recorded (R4)."""


def _spellings(uri: str) -> Iterator[str]:
    """The ways schemas in the wild write one meta-schema URI.

    With or without the empty fragment, over http or https: each names the same
    meta-schema, and jsonschema-rs reads each as that dialect.
    """
    bare = uri.removesuffix("#").split("://", 1)[1]
    for scheme in ("http", "https"):
        yield f"{scheme}://{bare}"
        yield f"{scheme}://{bare}#"


_BY_URI: Final[Mapping[str, _Dialect]] = {
    spelling: d for d in _KNOWN for spelling in _spellings(d.uri)
}
_DEFAULT: Final = _KNOWN[-1]


def _dialect(schema: Mapping[str, object]) -> _Dialect | None:
    """The dialect ``schema`` declares (2020-12 when none), or None for an unknown one."""
    if "$schema" not in schema:
        return _DEFAULT
    declared = schema["$schema"]
    return _BY_URI.get(declared) if isinstance(declared, str) else None


_VALIDATOR_NAME: Final = "jsonschema-rs"
_VALIDATOR_VERSION: Final = version(_VALIDATOR_NAME)

# Failing keyword (jsonschema-rs error kind name) → stable Problem code, written out so
# that every code can be read here and in the catalogue (toolbound.problems). A kind not
# listed here becomes ``schema_violation`` so that codes never change with the library.
_CODES: Final[Mapping[str, str]] = {
    "additionalItems": "additional_items",
    "additionalProperties": "additional_properties",
    "const": "const",
    "contains": "contains",
    "enum": "enum",
    "exclusiveMaximum": "exclusive_maximum",
    "exclusiveMinimum": "exclusive_minimum",
    "falseSchema": "false_schema",
    "format": "format",
    "maxContains": "max_contains",
    "maxItems": "max_items",
    "maxLength": "max_length",
    "maxProperties": "max_properties",
    "maximum": "maximum",
    "minContains": "min_contains",
    "minItems": "min_items",
    "minLength": "min_length",
    "minProperties": "min_properties",
    "minimum": "minimum",
    "multipleOf": "multiple_of",
    "not": "not",
    "anyOf": "any_of",
    "oneOf": "one_of",
    "pattern": "pattern",
    "propertyNames": "property_names",
    "required": "required",
    "type": "type",
    "unevaluatedItems": "unevaluated_items",
    "unevaluatedProperties": "unevaluated_properties",
    "uniqueItems": "unique_items",
}
_FALLBACK_CODE: Final = "schema_violation"

# Messages quote values the model sent; a long string must not flood the outcome.
_MAX_QUOTE: Final = 80
_MAX_MESSAGE: Final = 240
_MAX_OPTIONS: Final = 10

_JSONValue: TypeAlias = "bool | int | float | str | list[_JSONValue] | dict[str, _JSONValue] | None"


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidatorInfo:
    """What validated a call: recorded in the trace for every validation (R4)."""

    dialect: str
    name: str
    version: str
    format_assertion: bool

    def as_json(self) -> dict[str, object]:
        """Return the record as a JSON object, for the trace."""
        return {
            "dialect": self.dialect,
            "name": self.name,
            "version": self.version,
            "format_assertion": self.format_assertion,
        }


class CompiledSchema:
    """A JSON Schema checked against its dialect's meta-schema and compiled once (R4).

    Build one with :meth:`compile` when the tool is registered, and reuse it for every
    call.
    """

    __slots__ = ("_integers", "_validator", "_where", "info", "schema")

    info: ValidatorInfo
    """Dialect, validator and format assertion, for the trace (R4)."""
    schema: Mapping[str, object]
    """A private copy of the schema as compiled; later edits to the caller's copy do not
    reach it."""

    def __init__(
        self,
        *,
        schema: Mapping[str, object],
        validator: jsonschema_rs.Validator,
        info: ValidatorInfo,
        where: str,
    ) -> None:
        """Wrap an already compiled validator; use :meth:`compile` instead."""
        self.schema = schema
        self.info = info
        self._validator = validator
        self._where = where
        # Worked out once here, so that a schema without integer positions costs one
        # ``is None`` per call (see :meth:`validated`).
        self._integers = _integer_plan(schema) if isinstance(schema, dict) else None

    @classmethod
    def compile(
        cls,
        schema: Mapping[str, object],
        *,
        assert_format: bool = True,
        where: str = "schema",
    ) -> CompiledSchema:
        """Check ``schema`` and compile it, or raise :class:`SchemaError`.

        The schema must be a JSON object in a dialect of :data:`DIALECTS` (no
        ``$schema`` means 2020-12), valid against that dialect's meta-schema, and
        self-contained:
        nothing is ever retrieved, so a ``$ref`` to a resource the document does not
        embed is refused. ``where`` names the schema in error messages (for example
        ``"orders.get@v1 input_schema"``), and every message names the schema location
        at fault. With ``assert_format`` (the default) ``format`` is an assertion, not
        an annotation.
        """
        snapshot = _snapshot(schema, where)
        dialect = _dialect(snapshot)
        if dialect is None:
            msg = (
                f"{where}: $schema {_quote(snapshot['$schema'])} is not a JSON Schema "
                f"dialect toolbound validates ({', '.join(DIALECTS)}; none means 2020-12) (R4)"
            )
            raise SchemaError(msg)
        # R4: checked against its dialect's meta-schema at registration, before anything
        # else (jsonschema-rs picks the meta-schema by the same $schema).
        try:
            jsonschema_rs.meta.validate(snapshot)
        except ValidationError as exc:
            at = _location(exc.instance_path)
            msg = f"{where} is not valid JSON Schema {dialect.name} at {at}: {_meta_detail(exc)}"
            raise SchemaError(msg) from exc
        try:
            validator = dialect.validator(
                snapshot,
                validate_formats=assert_format,
                # R4: no retrieval at all; a tool's contract never depends on a fetch.
                offline=True,
            )
        except ValidationError as exc:
            raise SchemaError(_compile_failure(exc, snapshot, where)) from exc
        except (ValueError, jsonschema_rs.ReferencingError) as exc:
            msg = f"{where} cannot be compiled: {exc}"
            raise SchemaError(msg) from exc
        info = ValidatorInfo(
            dialect=dialect.uri,
            name=_VALIDATOR_NAME,
            version=_VALIDATOR_VERSION,
            format_assertion=assert_format,
        )
        return cls(schema=snapshot, validator=validator, info=info, where=where)

    def is_valid(self, instance: object) -> bool:
        """Whether ``instance`` satisfies the schema; never raises for JSON values."""
        return self._validator.is_valid(instance)

    def validate(self, instance: object) -> None:
        """Return if ``instance`` satisfies the schema, else raise :class:`Rejection`.

        The problem has kind ``validation``, a snake_case ``code`` named after the
        failing keyword (``additional_properties``, ``required``, ``type``, ``enum``,
        ``pattern``, ``format``, ``minimum``, …, else ``schema_violation``), the JSON
        Pointer of the failing instance location (``""`` for the root) and a hint for
        a corrected proposal.
        """
        # Hot path: the yes/no check stops at the first failure and builds no error.
        if self._validator.is_valid(instance):
            return
        error = next(self._validator.iter_errors(instance), None)
        if error is None:  # pragma: no cover - is_valid and iter_errors agree
            return
        raise Rejection(_problem(error))

    def validated(self, instance: JSONObject) -> JSONObject:
        """Validate ``instance`` (as :meth:`validate`) and return it with integers as ``int``.

        JSON Schema counts ``1.0`` and ``2e2`` as integers, but the parser reads any
        numeral with a fraction or an exponent as a float. Where the schema makes a
        position integer-only — its ``type`` there, through ``properties``,
        ``additionalProperties``, ``prefixItems``, ``items``, ``$ref`` and ``allOf``,
        or every branch of an ``anyOf``/``oneOf`` — an integral float becomes the
        equal ``int``, so the tool receives ``1`` for ``1.0``. RFC 8785 writes both
        the same, so the canonical form and the digest do not change (R5). Returns
        ``instance`` itself when nothing changed, else a copy made only along the
        changed paths; ``instance`` is never mutated.
        """
        self.validate(instance)
        plan = self._integers
        if plan is None:  # no integer positions: the common case costs nothing more
            return instance
        return _object_with_ints(instance, plan)

    def __repr__(self) -> str:
        """Name the schema and the validator, not the whole schema."""
        return f"<CompiledSchema {self._where!r} {self.info.name} {self.info.version}>"


# --- compile-time helpers ------------------------------------------------------------


def _snapshot(schema: Mapping[str, object], where: str) -> dict[str, _JSONValue]:
    """Copy ``schema`` into plain JSON containers, refusing what JSON cannot carry."""
    if not isinstance(schema, Mapping):
        msg = f"{where} must be a JSON object, not {type(schema).__name__}"
        raise SchemaError(msg)
    return _copy_object(schema, [], where)


def _copy_object(
    value: Mapping[str, object], path: list[str | int], where: str
) -> dict[str, _JSONValue]:
    out: dict[str, _JSONValue] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            msg = f"{where} at {_location(path)}: object key {key!r} is not a string"
            raise SchemaError(msg)
        out[key] = _copy_json(item, [*path, key], where)
    return out


def _copy_json(value: object, path: list[str | int], where: str) -> _JSONValue:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
    elif isinstance(value, Mapping):
        return _copy_object(value, path, where)
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [_copy_json(item, [*path, index], where) for index, item in enumerate(value)]
    msg = f"{where} at {_location(path)}: {value!r} is not a JSON value"
    raise SchemaError(msg)


def _meta_detail(error: ValidationError) -> str:
    """Pick the most specific meta-schema complaint.

    Inside ``anyOf`` the branch that was about the right shape says more: for
    ``"type": 12`` that is "not one of the simple types", not "not an array".
    """
    kind = error.kind
    if isinstance(kind, ValidationErrorKind.AnyOf | ValidationErrorKind.OneOfNotValid):
        for branch in kind.context:
            if branch and branch[0].kind.name != "type":
                return branch[0].message
    return error.message


def _compile_failure(error: ValidationError, schema: _JSONValue, where: str) -> str:
    """Explain why jsonschema-rs would not compile a meta-schema-valid schema."""
    if error.kind.name not in {"$ref", "$dynamicRef"}:
        return f"{where} cannot be compiled at {_location(error.instance_path)}: {error.message}"
    # jsonschema-rs decides what does not resolve; its message names the reference,
    # which is all we use it for: to point at the $ref in the schema.
    refs = list(_refs(schema, []))
    external = ((path, value) for path, value in refs if not value.startswith("#"))
    at, target = next(
        ((path, value) for path, value in refs if _ref_key(value) in error.message),
        next(external, ([], "")),
    )
    location = f" at {_location(at)}" if at else ""
    if target and not target.startswith("#"):
        # R4: no retrieval at all; only resources the document embeds resolve.
        return (
            f"{where} has a $ref{location} to {_quote(target)}, outside the document; "
            "toolbound never retrieves schemas, so embed it under $defs with its $id"
        )
    return f"{where} has a $ref{location} that does not resolve: {error.message}"


# Keywords whose values are data, not schemas: a "$ref" inside them is not a reference.
_DATA_KEYWORDS: Final = frozenset({"const", "default", "enum", "examples"})


def _refs(node: _JSONValue, path: list[str | int]) -> Iterator[tuple[list[str | int], str]]:
    """Yield the location and value of every ``$ref`` and ``$dynamicRef``."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in {"$ref", "$dynamicRef"} and isinstance(value, str):
                yield [*path, key], value
            elif key not in _DATA_KEYWORDS:
                yield from _refs(value, [*path, key])
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _refs(item, [*path, index])


def _ref_key(reference: str) -> str:
    """Return the part of a reference an error message quotes: resource, else fragment."""
    resource, _, fragment = reference.partition("#")
    # "\0" never occurs in a message, so an empty reference matches nothing.
    return resource or fragment or "\0"


# --- run-time helpers ----------------------------------------------------------------


def _problem(error: ValidationError) -> Problem:
    """Turn the first validation error into the Problem the model sees."""
    pointer = _pointer(error.instance_path)
    match error.kind:
        case ValidationErrorKind.AnyOf(context) | ValidationErrorKind.OneOfNotValid(context):
            return _alternatives_problem(error, context, pointer)
        case ValidationErrorKind.Type(types):
            return _type_problem(types, error.instance, pointer)
        case ValidationErrorKind.AdditionalProperties(
            unexpected
        ) | ValidationErrorKind.UnevaluatedProperties(unexpected):
            # R4: additionalProperties: false rejects invented fields — name them all.
            names = ", ".join(_quote(name) for name in unexpected)
            noun = "field" if len(unexpected) == 1 else "fields"
            message = f"unexpected {noun} {names}: not in the schema"
            hint = f"Remove fields not in the schema ({names}); send only the fields it lists."
        case ValidationErrorKind.Required(missing):
            message = f"missing required field {_quote(missing)}"
            hint = f"Add the required field {_quote(missing)}."
        case ValidationErrorKind.Enum(options):
            message = f"{_quote(error.instance)} is not one of the allowed values"
            hint = f"Use one of: {_options(options)}."
        case ValidationErrorKind.Constant(expected):
            message = f"{_quote(error.instance)} is not the required value {_quote(expected)}"
            hint = f"Use exactly {_quote(expected)}."
        case ValidationErrorKind.Pattern(pattern):
            message = f"{_quote(error.instance)} does not match the pattern {_quote(pattern)}"
            hint = f"Send a string matching the ECMA-262 pattern {_quote(pattern)}."
        case ValidationErrorKind.Format(fmt):
            message = f"{_quote(error.instance)} is not a valid {fmt}"
            hint = f"Send a valid {fmt} string."
        case _:
            keyword = _keyword(error)
            message = _clip(error.message, _MAX_MESSAGE)
            hint = (
                f"Change the value so that it satisfies the schema's {keyword!r} rule."
                if keyword in _CODES
                else "Change the arguments so that they satisfy the tool's input schema."
            )
    return _rejection_problem(error, pointer, message, hint)


def _alternatives_problem(
    error: ValidationError, branches: list[list[ValidationError]], pointer: str
) -> Problem:
    """Report the branch of a failed anyOf/oneOf that the value was meant for.

    A branch whose first error is a type mismatch at the same location was about a
    different shape; if exactly one branch is left, its error is the useful one, and
    if none is left the value simply has the wrong type (``Optional[str]`` schemas).
    """
    shaped = [
        branch
        for branch in branches
        if branch
        and not (branch[0].kind.name == "type" and branch[0].instance_path == error.instance_path)
    ]
    if len(shaped) == 1:
        return _problem(shaped[0][0])
    if not shaped:
        types: list[str] = []
        for branch in branches:
            if branch and isinstance(branch[0].kind, ValidationErrorKind.Type):
                types.extend(t for t in branch[0].kind.types if t not in types)
        if types:
            return _type_problem(types, error.instance, pointer)
    return _rejection_problem(
        error,
        pointer,
        "the value matches none of the alternatives the schema allows",
        "Make the value match one of the alternatives in the schema.",
    )


def _type_problem(types: Sequence[str], instance: object, pointer: str) -> Problem:
    expected = " or ".join(types)
    return make_problem(
        "type",
        f"expected {expected}, got {_json_type(instance)}",
        pointer=pointer,
        hint=f"Send a value of type {expected}.",
    )


def _rejection_problem(error: ValidationError, pointer: str, message: str, hint: str) -> Problem:
    return make_problem(
        _CODES.get(_keyword(error), _FALLBACK_CODE), message, pointer=pointer, hint=hint
    )


def _keyword(error: ValidationError) -> str:
    """Name the failing keyword; jsonschema-rs reports minContains/maxContains as contains."""
    name = error.kind.name
    if name == "contains" and error.schema_path:
        last = error.schema_path[-1]
        if last in {"minContains", "maxContains"}:
            return str(last)
    return name


_JSON_TYPES: Final[Mapping[type, str]] = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    tuple: "array",
    dict: "object",
}


def _json_type(value: object) -> str:
    return _JSON_TYPES.get(type(value), "object")


def _pointer(path: Sequence[str | int]) -> str:
    """Build the RFC 6901 JSON Pointer of a path of keys and indexes; ``""`` is the root."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def _location(path: Sequence[str | int]) -> str:
    pointer = _pointer(path)
    return f"'{pointer}'" if pointer else "the root"


def _quote(value: object) -> str:
    """Render a value as JSON for a message, clipped to a readable length."""
    return _clip(json.dumps(value, ensure_ascii=False, default=repr))


def _options(options: Sequence[object]) -> str:
    shown = ", ".join(_quote(option) for option in options[:_MAX_OPTIONS])
    more = len(options) - _MAX_OPTIONS
    return f"{shown} (and {more} more)" if more > 0 else shown


def _clip(text: str, limit: int = _MAX_QUOTE) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- integer positions ---------------------------------------------------------------
#
# Where the schema says that any number valid at a position is integral, the integral
# floats there are handed on as ints. Found once, when the schema is compiled: the
# plan is a graph (cyclic for recursive schemas) that mirrors the instance's shape.
# Only keywords whose subschemas *always* apply at a position are followed: the
# position's own schema, its $ref and allOf (the "conjuncts"), and for a member or an
# element the matching properties / additionalProperties / prefixItems / items.
# Conditional applicators (if/then/else, dependentSchemas, not, contains,
# patternProperties, unevaluated*, $dynamicRef) are not followed, and anyOf/oneOf
# only for the type at the position itself: leaving a position out only means a
# float is not turned into an int, never that a value changes.


@dataclass(slots=True, eq=False)
class _Ints:
    """Where numbers are integral, for one position: a node of the plan graph.

    Mutable only while the plan is built (a recursive schema makes it cyclic).
    """

    here: bool = False
    """Any number valid at this position is integral."""
    members: dict[str, _Ints | None] = field(default_factory=dict)
    """Object members by name; ``None`` keeps ``others`` from applying to the name."""
    others: _Ints | None = None
    """Object members not in ``members``."""
    prefix: list[_Ints | None] = field(default_factory=list)
    """Array elements by index; ``None`` keeps ``items`` from applying there."""
    items: _Ints | None = None
    """Array elements past ``prefix``."""

    def children(self) -> Iterator[_Ints]:
        yield from (c for c in self.members.values() if c is not None)
        yield from (c for c in self.prefix if c is not None)
        if self.others is not None:
            yield self.others
        if self.items is not None:
            yield self.items


_Schema: TypeAlias = dict[str, object]

# Keywords holding subschemas (2020-12, and those of the earlier dialects), for
# indexing $id and anchors.
_SCHEMA_MAPS: Final = frozenset(
    {"$defs", "definitions", "properties", "patternProperties", "dependentSchemas"}
)
_SCHEMA_LISTS: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_VALUES: Final = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
# Relative references resolve as in jsonschema-rs's default base, json-schema:///;
# urljoin resolves paths only for schemes it knows, hence a stand-in with http's rules.
_DEFAULT_BASE: Final = "https://toolbound.invalid/"
# A schema whose plan would need more positions than this gets none (never seen in
# practice: each position is a distinct set of subschemas applying together).
_MAX_PLAN_NODES: Final = 10_000


class _TooComplexError(Exception):
    pass


def _integer_plan(schema: _Schema) -> _Ints | None:
    """Return the plan for ``schema``, or ``None`` if it has no integer position."""
    try:
        planner = _Planner(schema)
        root = planner.plan(planner.closure([schema]))
    except (_TooComplexError, RecursionError):
        return None
    return _prune(root, planner.nodes())


def _types(schema: _Schema) -> tuple[object, ...] | None:
    declared = schema.get("type")
    if isinstance(declared, str):
        return (declared,)
    return tuple(declared) if isinstance(declared, list) else None


def _integer_only(schema: _Schema) -> bool:
    """Whether ``schema``'s ``type`` admits integers and no other numbers."""
    types = _types(schema)
    return types is not None and "integer" in types and "number" not in types


class _Planner:
    """Builds the plan graph: one node per set of subschemas applying together."""

    def __init__(self, root: _Schema) -> None:
        self._schemas: dict[int, _Schema] = {}
        self._bases: dict[int, str] = {}
        self._resources: dict[str, _Schema] = {}
        self._anchors: dict[str, _Schema] = {}
        self._plans: dict[frozenset[int], _Ints] = {}
        self._index(root, _DEFAULT_BASE)

    def nodes(self) -> list[_Ints]:
        return list(self._plans.values())

    def _index(self, schema: object, base: str) -> None:
        """Record each subschema's base URI, each resource ($id) and anchor."""
        if not isinstance(schema, dict):
            return
        if isinstance(identifier := schema.get("$id"), str):
            base = urldefrag(urljoin(base, identifier)).url
            self._resources[base] = schema
        elif not self._bases:  # the document root is a resource too
            self._resources[base] = schema
        self._bases[id(schema)] = base
        for keyword in ("$anchor", "$dynamicAnchor"):
            if isinstance(name := schema.get(keyword), str):
                self._anchors[f"{base}#{name}"] = schema
        for subschema in _subschemas(schema):
            self._index(subschema, base)

    def _target(self, schema: _Schema, reference: str) -> _Schema | None:
        """Resolve a ``$ref`` as jsonschema-rs did when it compiled; None if unsure."""
        uri, fragment = urldefrag(urljoin(self._bases[id(schema)], reference))
        if not fragment:
            return self._resources.get(uri)
        if not fragment.startswith("/"):
            return self._anchors.get(f"{uri}#{fragment}")
        node: object = self._resources.get(uri)
        for token in fragment[1:].split("/"):
            key = unquote(token).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict):
                node = node.get(key)
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                return None
        # Only a subschema indexed above has a known base for its own references.
        return node if isinstance(node, dict) and id(node) in self._bases else None

    def closure(self, schemas: Iterable[object]) -> frozenset[int]:
        """The subschemas that apply wherever ``schemas`` do: with each $ref and allOf."""
        seen: dict[int, _Schema] = {}
        stack = list(schemas)
        while stack:
            schema = stack.pop()
            if not isinstance(schema, dict) or id(schema) in seen:
                continue  # true/false hold no type; false admits nothing at all
            seen[id(schema)] = schema
            if isinstance(reference := schema.get("$ref"), str):
                stack.append(self._target(schema, reference))
            if isinstance(conjuncts := schema.get("allOf"), list):
                stack.extend(conjuncts)
        self._schemas.update(seen)
        return frozenset(seen)

    def plan(self, applying: frozenset[int]) -> _Ints:
        """The plan node for a position where exactly the ``applying`` subschemas apply."""
        if (known := self._plans.get(applying)) is not None:
            return known  # possibly still being built: a recursive schema's cycle
        if len(self._plans) >= _MAX_PLAN_NODES:
            raise _TooComplexError
        node = self._plans[applying] = _Ints()
        schemas = [self._schemas[key] for key in applying]
        node.here = any(_integer_only(s) or self._integer_choice(s) for s in schemas)
        names = {name for s in schemas for name in _properties(s)}
        node.members = {name: self._child(_member(s, name) for s in schemas) for name in names}
        node.others = self._child(_others(s) for s in schemas)
        width = max((len(_prefix(s)) for s in schemas), default=0)
        node.prefix = [self._child(_element(s, i) for s in schemas) for i in range(width)]
        node.items = self._child(_rest(s) for s in schemas)
        return node

    def _child(self, schemas: Iterable[object]) -> _Ints | None:
        found = [s for s in schemas if s is not None]
        return self.plan(self.closure(found)) if found else None

    def _integer_choice(self, schema: _Schema) -> bool:
        """Whether every anyOf (or oneOf) branch excludes non-integral numbers here."""
        for keyword in ("anyOf", "oneOf"):
            branches = schema.get(keyword)
            if not isinstance(branches, list) or not branches:
                continue
            typed = [
                [_types(self._schemas[key]) for key in self.closure([branch])]
                for branch in branches
            ]
            # Each branch has a type without "number" (integer, or no number at all),
            # and some branch admits integers.
            if all(
                any(types is not None and "number" not in types for types in branch)
                for branch in typed
            ) and any("integer" in (types or ()) for branch in typed for types in branch):
                return True
        return False


def _subschemas(schema: _Schema) -> Iterator[object]:
    for keyword, value in schema.items():
        if keyword in _SCHEMA_MAPS and isinstance(value, dict):
            yield from value.values()
        elif keyword in _SCHEMA_LISTS and isinstance(value, list):
            yield from value
        elif keyword in _SCHEMA_VALUES:
            # "items" holds a list of schemas before 2020-12.
            yield from value if isinstance(value, list) else (value,)


def _properties(schema: _Schema) -> Mapping[str, object]:
    found = schema.get("properties")
    return found if isinstance(found, dict) else {}


def _member(schema: _Schema, name: str) -> object:
    """The subschema ``schema`` applies to member ``name``, if it is certain which."""
    properties = _properties(schema)
    if name in properties:
        return properties[name]
    return _others(schema)


def _others(schema: _Schema) -> object:
    # With patternProperties, whether additionalProperties applies depends on a regex.
    return None if "patternProperties" in schema else schema.get("additionalProperties")


def _prefix(schema: _Schema) -> list[object]:
    # Before 2020-12 an array of schemas under "items" was the prefix (never valid in
    # 2020-12, whose meta-schema refuses it), and "additionalItems" the rest.
    found = schema.get("prefixItems", schema.get("items"))
    return found if isinstance(found, list) else []


def _rest(schema: _Schema) -> object:
    """The subschema for the elements past the prefix."""
    items = schema.get("items")
    return schema.get("additionalItems") if isinstance(items, list) else items


def _element(schema: _Schema, index: int) -> object:
    prefix = _prefix(schema)
    return prefix[index] if index < len(prefix) else _rest(schema)


def _prune(root: _Ints, nodes: list[_Ints]) -> _Ints | None:
    """Drop every branch of the plan that leads to no integer position."""
    # Walk up from the integer positions: every node that reaches one is useful. The
    # graph may be cyclic (recursive schemas), so each node is entered once.
    parents: dict[int, list[_Ints]] = {}
    for n in nodes:
        for child in n.children():
            parents.setdefault(id(child), []).append(n)
    todo = [n for n in nodes if n.here]
    useful = {id(n) for n in todo}
    while todo:
        for parent in parents.get(id(todo.pop()), ()):
            if id(parent) not in useful:
                useful.add(id(parent))
                todo.append(parent)
    if id(root) not in useful:
        return None

    def keep(child: _Ints | None) -> _Ints | None:
        return child if child is not None and id(child) in useful else None

    for n in nodes:
        n.others, n.items = keep(n.others), keep(n.items)
        # A name (an index) whose plan is pruned must still block others (items).
        n.members = {
            name: keep(child)
            for name, child in n.members.items()
            if keep(child) is not None or n.others is not None
        }
        n.prefix = [keep(child) for child in n.prefix]
        while n.prefix and n.prefix[-1] is None and n.items is None:
            n.prefix.pop()
    return root


def _with_ints(value: JSONValue, plan: _Ints) -> JSONValue:
    """Return ``value`` with the integral floats at the plan's integer positions as ints."""
    if type(value) is float:
        return _as_int(value, plan)
    if type(value) is dict:
        return _object_with_ints(value, plan)
    if type(value) is list:
        return _array_with_ints(value, plan)
    return value


def _as_int(value: float, plan: _Ints) -> JSONValue:
    return int(value) if plan.here and value.is_integer() else value


# The two walks below run on every call of a tool with integer positions, so each
# member is tested inline: only floats, objects and arrays cost a call.


def _object_with_ints(value: JSONObject, plan: _Ints) -> JSONObject:
    members, others = plan.members, plan.others
    # Without a plan for other members, visit only the planned names.
    pairs: Iterable[tuple[str, _Ints | None]] = (
        members.items() if others is None else ((name, members.get(name, others)) for name in value)
    )
    copy: JSONObject | None = None
    for name, sub in pairs:
        if sub is None:
            continue
        item = value.get(name)
        if type(item) is float:
            new = _as_int(item, sub)
        elif type(item) is dict:
            new = _object_with_ints(item, sub)
        elif type(item) is list:
            new = _array_with_ints(item, sub)
        else:
            continue
        if new is not item:
            if copy is None:
                copy = dict(value)  # same key order as the caller's
            copy[name] = new
    return value if copy is None else copy


def _array_with_ints(value: list[JSONValue], plan: _Ints) -> list[JSONValue]:
    prefix, items = plan.prefix, plan.items
    copy: list[JSONValue] | None = None
    for index, item in enumerate(value):
        sub = prefix[index] if index < len(prefix) else items
        if sub is None:
            if index >= len(prefix):
                break  # no plan for the rest of the array
            continue
        if type(item) is float:
            new = _as_int(item, sub)
        elif type(item) is dict:
            new = _object_with_ints(item, sub)
        elif type(item) is list:
            new = _array_with_ints(item, sub)
        else:
            continue
        if new is not item:
            if copy is None:
                copy = list(value)
            copy[index] = new
    return value if copy is None else copy

"""The validation gate: JSON Schema 2020-12 through jsonschema-rs (R4).

A schema is checked and compiled once, when its tool is registered
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

Schema-valid is not authorized: semantic checks and authorization follow (R4, R6).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import Final, TypeAlias

import jsonschema_rs
from jsonschema_rs import ValidationError, ValidationErrorKind

from toolbound._errors import Problem, Rejection, SchemaError
from toolbound.problems import make_problem

__all__ = ["DIALECT", "CompiledSchema", "ValidatorInfo"]

DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
"""The one dialect toolbound validates (R4). A schema without ``$schema`` is read as it."""

# An empty fragment names the same resource, and many schemas in the wild carry it.
_ACCEPTED_DIALECTS: Final = frozenset({DIALECT, DIALECT + "#"})

_VALIDATOR_NAME: Final = "jsonschema-rs"
_VALIDATOR_VERSION: Final = version(_VALIDATOR_NAME)

# Failing keyword (jsonschema-rs error kind name) → stable Problem code, written out so
# that every code can be read here and in the catalogue (toolbound.problems). A kind not
# listed here becomes ``schema_violation`` so that codes never change with the library.
_CODES: Final[Mapping[str, str]] = {
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
    """A JSON Schema 2020-12 checked against the meta-schema and compiled once (R4).

    Build one with :meth:`compile` when the tool is registered, and reuse it for every
    call.
    """

    __slots__ = ("_validator", "_where", "info", "schema")

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

    @classmethod
    def compile(
        cls,
        schema: Mapping[str, object],
        *,
        assert_format: bool = True,
        where: str = "schema",
    ) -> CompiledSchema:
        """Check ``schema`` and compile it, or raise :class:`SchemaError`.

        The schema must be a JSON object in the 2020-12 dialect (no ``$schema``, or
        :data:`DIALECT`), valid against the 2020-12 meta-schema, and self-contained:
        nothing is ever retrieved, so a ``$ref`` to a resource the document does not
        embed is refused. ``where`` names the schema in error messages (for example
        ``"orders.get@v1 input_schema"``), and every message names the schema location
        at fault. With ``assert_format`` (the default) ``format`` is an assertion, not
        an annotation.
        """
        snapshot = _snapshot(schema, where)
        dialect = snapshot.get("$schema", DIALECT)
        if dialect not in _ACCEPTED_DIALECTS:
            msg = (
                f"{where}: $schema {_quote(dialect)} is not JSON Schema 2020-12; "
                f"toolbound validates {DIALECT} only (R4)"
            )
            raise SchemaError(msg)
        # R4: checked against the meta-schema at registration, before anything else.
        try:
            jsonschema_rs.meta.validate(snapshot)
        except ValidationError as exc:
            at = _location(exc.instance_path)
            msg = f"{where} is not valid JSON Schema 2020-12 at {at}: {_meta_detail(exc)}"
            raise SchemaError(msg) from exc
        try:
            validator = jsonschema_rs.Draft202012Validator(
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
            dialect=DIALECT,
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

"""Tools from typed Python functions.

:func:`tool` (a decorator) and :func:`define` (the same as a plain call) turn a typed
function into a :class:`DefinedTool`: a :class:`~toolbound.ToolSpec` whose input and
output JSON Schemas (2020-12, saying so in ``$schema``) are generated from the type
hints, and an adapted
``(arguments, ctx)`` implementation the :class:`~toolbound.Registry` accepts::

    @tool(effect="read", capabilities=("weather:read",))
    def forecast(city: str, days: Annotated[int, Ge(1), Le(7)] = 3) -> Forecast:
        '''The forecast for a city.

Args:
            city: The city, as its English name.
            days: How many days ahead.
        '''

Generated schemas are strict: every object closes with ``additionalProperties:
false`` and lists every field without a default in ``required``; defaults are
recorded as ``default``. A named type (a dataclass, TypedDict or pydantic model) is
described once under ``$defs``, by its class name, and each use is a ``$ref`` to it;
only the return type itself is written at the output schema's root, which MCP wants
to be an object. Each schema is checked against the 2020-12 meta-schema when
the tool is defined, so a type that cannot be described fails there, as a
:class:`~toolbound.SpecError` naming the function, never at call time.

Values the runtime supplies never appear in the schema the model sees. A parameter
annotated :class:`~toolbound.ToolContext` receives the context, :class:`~toolbound.Subject`
the caller, :class:`~toolbound.Invocation` the invocation, ``Annotated[str,
Secret("name")]`` the credential ``name`` (added to the spec's ``secrets``), and
``Annotated[T, Transaction()]`` the ledger's open transaction (the spec becomes
``transactional``).

``Annotated[str, Role("destination")]`` declares what a parameter does in a write
(:mod:`toolbound.provenance.roles`): it lands in the spec's ``roles`` as
``{"/name": "destination"}``, beside any ``roles=`` passed explicitly (which win).
Parameters without one have their role inferred from the schema when a flow rule
needs it.

"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    TypedDict,
    Union,
    Unpack,
    get_args,
    get_origin,
)

from toolbound._errors import SpecError
from toolbound._model import Invocation, Subject, ToolSpec
from toolbound.adapters import strict_compatible
from toolbound.execution.tool import ToolContext, ToolOutput
from toolbound.gates.validate import DIALECT, CompiledSchema
from toolbound.provenance.roles import Role
from toolbound.provenance.roles import plan as plan_roles
from toolbound.registry import check_spec
from toolbound.results.content import Content

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from pydantic import BaseModel

    from toolbound._model import (
        EffectClass,
        IdempotencySupport,
        JSONObject,
        JSONValue,
        Normalizer,
        QueryHook,
        ReadBackHook,
        ResourceExtractor,
        SemanticCheck,
        TargetCheck,
        TaskSupport,
    )
    from toolbound.execution.tool import AsyncToolFunction, ToolFunction
    from toolbound.provenance.classes import DataClassName
    from toolbound.provenance.roles import RoleName
    from toolbound.registry import RegisteredTool, Registry

__all__ = [
    "DefinedTool",
    "Role",
    "Secret",
    "SpecOptions",
    "Transaction",
    "define",
    "docstring_params",
    "tool",
]


Schema = dict[str, object]
_Convert = Callable[[object], object]


@dataclass(frozen=True, slots=True)
class Secret:
    """Marks a parameter as a credential: ``key: Annotated[str, Secret("api_key")]``.

    The runtime passes ``ctx.secrets[name]``; ``name`` is added to the spec's
    ``secrets`` so the runtime fetches it from its secret provider.
    """

    name: str


@dataclass(frozen=True, slots=True)
class Transaction:
    """Marks a parameter as the ledger's open transaction: ``Annotated[T, Transaction()]``.

    The runtime passes ``ctx.transaction`` and the spec is made ``transactional``,
    so the tool's writes commit with the ledger record or not at all (R8).
    """


class SpecOptions(TypedDict, total=False):
    """The :class:`~toolbound.ToolSpec` fields that can be declared beside a function."""

    resources: ResourceExtractor | None
    purpose: str
    non_goals: tuple[str, ...]
    normalizers: tuple[Normalizer, ...]
    semantic_check: SemanticCheck | None
    target_check: TargetCheck | None
    timeout: float
    max_attempts: int
    idempotency: IdempotencySupport
    secrets: tuple[str, ...]
    marks_commit: bool
    result_budget: int
    empty_result: str | None
    query: QueryHook | None
    read_back: ReadBackHook | None
    transactional: bool
    output_schema: Mapping[str, object] | None
    reads_untrusted: bool
    reads_private: bool
    roles: Mapping[str, RoleName]
    intents: tuple[str, ...]
    data_classes: Mapping[str, DataClassName]
    task_support: TaskSupport


@dataclass(frozen=True, slots=True, kw_only=True)
class DefinedTool:
    """A typed function made into a tool: its spec and its adapted implementation.

    ``function`` takes ``(arguments, ctx)`` as the runtime calls tools, converts the
    validated JSON arguments to the annotated types, injects runtime values and
    turns the return value into JSON; it is async exactly when ``original`` is.
    ``strict_issues`` are the reasons, if any, the input schema cannot be sent with
    a provider's strict mode (see :func:`toolbound.adapters.strict_compatible`).
    """

    spec: ToolSpec
    function: ToolFunction | AsyncToolFunction
    original: Callable[..., object]
    strict_issues: tuple[str, ...] = ()

    def register(self, registry: Registry, *, inline: bool = False) -> RegisteredTool:
        """Register this tool in ``registry`` (see :meth:`toolbound.Registry.register`)."""
        return registry.register(self.spec, self.function, inline=inline)


def tool(
    *,
    name: str | None = None,
    version: str = "v1",
    effect: EffectClass,
    capabilities: tuple[str, ...] = (),
    description: str | None = None,
    **spec_fields: Unpack[SpecOptions],
) -> Callable[[Callable[..., object]], DefinedTool]:
    """Decorate a typed function to make it a :class:`DefinedTool`; see :func:`define`."""

    def decorate(fn: Callable[..., object]) -> DefinedTool:
        return define(
            fn,
            name=name,
            version=version,
            effect=effect,
            capabilities=capabilities,
            description=description,
            **spec_fields,
        )

    return decorate


def define(
    fn: Callable[..., object],
    *,
    name: str | None = None,
    version: str = "v1",
    effect: EffectClass,
    capabilities: tuple[str, ...] = (),
    description: str | None = None,
    **spec_fields: Unpack[SpecOptions],
) -> DefinedTool:
    """Make ``fn`` a tool: generate its schemas, adapt it to ``(arguments, ctx)``.

    ``name`` defaults to the function's name and ``description`` to the summary
    paragraph of its docstring; parameter descriptions come from a Google-style
    ``Args:`` section or reST ``:param x:`` fields. Other :class:`ToolSpec` fields
    (timeout, normalizers, resources, retry settings…) are passed through. Raises
    :class:`~toolbound.SpecError` for anything that cannot be described exactly.
    """
    where = getattr(fn, "__qualname__", repr(fn))
    signature, hints = _introspect(fn, where)
    doc = _Docstring.parse(inspect.getdoc(fn) or "")
    summary = description if description is not None else doc.summary
    if not summary.strip():
        msg = f"{where}: no description: write a docstring or pass description="
        raise SpecError(msg)
    builder = _Builder(where)
    params, properties, required, secrets, transactional, roles = _plan(
        signature, hints, doc, builder, where
    )
    input_schema: Schema = {
        "$schema": DIALECT,
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    output_schema: Schema | None = None
    returns = hints.get("return", inspect.Signature.empty)
    if returns is inspect.Signature.empty:
        msg = f"{where}: the return type is not annotated (use -> None for no output)"
        raise SpecError(msg)
    # Content blocks are checked as blocks when made; they declare no output schema.
    if returns is not None and returns is not type(None) and returns is not Content:
        out_builder = _Builder(where, output=True)
        output_schema = out_builder.root(out_builder.schema(returns, "return value")[0])
        out_builder.attach_defs(output_schema)
    builder.attach_defs(input_schema)
    tool_name = name if name is not None else getattr(fn, "__name__", "")
    ref = f"{where} ({tool_name}@{version})"
    _check(input_schema, f"{ref} input_schema")
    if output_schema is not None:
        _check(output_schema, f"{ref} output_schema")
    options: SpecOptions = dict(spec_fields)  # type: ignore[assignment]
    declared = tuple(options.pop("secrets", ()))
    options["secrets"] = declared + tuple(s for s in secrets if s not in declared)
    if transactional:
        if options.get("transactional") is False:
            msg = f"{where}: a Transaction parameter needs a transactional tool"
            raise SpecError(msg)
        options["transactional"] = True
    if "output_schema" not in options:
        options["output_schema"] = output_schema
    if roles:
        options["roles"] = {**roles, **options.get("roles", {})}
    spec = ToolSpec(
        name=tool_name,
        version=version,
        description=summary.strip(),
        input_schema=input_schema,
        effect=effect,
        capabilities=tuple(capabilities),
        **options,
    )
    # The registry's own checks (name, limits, capabilities), now rather than later.
    check_spec(spec)
    plan_roles(spec)  # declared roles are checked here too, not at the first call
    return DefinedTool(
        spec=spec,
        function=_adapt(fn, params),
        original=fn,
        strict_issues=tuple(strict_compatible(input_schema)),
    )


# -- introspection -------------------------------------------------------------------


def _introspect(
    fn: Callable[..., object], where: str
) -> tuple[inspect.Signature, dict[str, object]]:
    if not callable(fn):
        msg = f"{where}: not a function"
        raise SpecError(msg)
    try:
        signature = inspect.signature(fn)
        hints: dict[str, object] = typing.get_type_hints(fn, include_extras=True)
    except (NameError, TypeError, ValueError) as exc:
        msg = f"{where}: its type hints cannot be resolved: {exc}"
        raise SpecError(msg) from exc
    return signature, hints


_ABSENT: Any = object()  # a parameter with no default the schema alone declares


@dataclass(frozen=True, slots=True)
class _Param:
    name: str
    convert: _Convert | None = None
    inject: Callable[[ToolContext], object] | None = None
    fallback: object = _ABSENT
    """A default only the schema knows (``Field(default=…)``), as JSON."""


def _plan(
    signature: inspect.Signature,
    hints: Mapping[str, object],
    doc: _Docstring,
    builder: _Builder,
    where: str,
) -> tuple[list[_Param], Schema, list[str], list[str], bool, dict[str, RoleName]]:
    plan: list[_Param] = []
    properties: Schema = {}
    required: list[str] = []
    secrets: list[str] = []
    roles: dict[str, RoleName] = {}
    transactional = False
    for param in signature.parameters.values():
        at = f"parameter {param.name!r}"
        if param.kind in {param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY}:
            msg = f"{where}: {at}: *args, **kwargs and positional-only parameters are not supported"
            raise SpecError(msg)
        if param.name not in hints:
            msg = f"{where}: {at} has no type annotation"
            raise SpecError(msg)
        hint = hints[param.name]
        injected = _injection(hint, where, at)
        if injected is not None:
            inject, marker = injected
            if isinstance(marker, Secret):
                secrets.append(marker.name)
            elif isinstance(marker, Transaction):
                transactional = True
            plan.append(_Param(param.name, inject=inject))
            continue
        schema, convert = builder.schema(hint, at)
        schema = dict(schema)
        roles.update(_role(param.name, hint))
        described = doc.params.get(param.name)
        if described and "description" not in schema:
            schema["description"] = described
        if param.default is not param.empty:
            schema["default"] = _default(param.default, where, at)
        elif "default" not in schema:
            required.append(param.name)
        properties[param.name] = schema
        fallback = schema.get("default", _ABSENT) if param.default is param.empty else _ABSENT
        plan.append(_Param(param.name, convert=convert, fallback=fallback))
    return plan, properties, required, secrets, transactional, roles


def _role(name: str, hint: object) -> dict[str, RoleName]:
    """``{"/name": role}`` for an ``Annotated[..., Role(...)]`` parameter, else nothing."""
    if get_origin(hint) is not Annotated:
        return {}
    found = [m.name for m in get_args(hint)[1:] if isinstance(m, Role)]
    pointer = "/" + name.replace("~", "~0").replace("/", "~1")
    return {pointer: found[-1]} if found else {}


def _injection(
    hint: object, where: str, at: str
) -> tuple[Callable[[ToolContext], object], object] | None:
    """How a parameter the runtime fills is filled, or ``None`` for a model-facing one."""
    if hint is ToolContext:
        return (lambda ctx: ctx), hint
    if hint is Subject:
        return (lambda ctx: ctx.invocation.subject), hint
    if hint is Invocation:
        return (lambda ctx: ctx.invocation), hint
    if get_origin(hint) is Annotated:
        base, *meta = get_args(hint)
        for marker in meta:
            if isinstance(marker, Secret):
                if base is not str:
                    msg = f"{where}: {at}: a Secret parameter must be annotated str"
                    raise SpecError(msg)
                return _secret(marker.name), marker
            if marker is Transaction or isinstance(marker, Transaction):
                return (lambda ctx: ctx.transaction), Transaction()
    return None


def _secret(name: str) -> Callable[[ToolContext], object]:
    return lambda ctx: ctx.secrets[name]


def _default(value: object, where: str, at: str) -> object:
    try:
        encoded = _encode(value)
        json.dumps(encoded, allow_nan=False)
    except (TypeError, ValueError) as exc:
        msg = f"{where}: {at}: default {value!r} is not a JSON value"
        raise SpecError(msg) from exc
    return encoded


def _check(schema: Schema, where: str) -> None:
    # A SchemaError is a SpecError; ``where`` names the function.
    CompiledSchema.compile(schema, where=where)


# -- schema generation and argument conversion -----------------------------------------


def _same(value: object) -> object:
    return value


def _to_float(value: object) -> object:
    # JSON "number" admits 1 as well as 1.0; the function asked for a float.
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


_INJECTED: tuple[object, ...] = (ToolContext, Subject, Invocation)

_PRIMITIVES: Mapping[object, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
    None: "null",
}


class _Builder:
    """Generates one schema (and, for inputs, the matching converters)."""

    def __init__(self, where: str, *, output: bool = False) -> None:
        self.where = where
        self.output = output
        self.defs: dict[str, object] = {}
        self._stack: list[object] = []

    def fail(self, at: str, what: str) -> SpecError:
        return SpecError(f"{self.where}: {at}: {what}")

    def attach_defs(self, schema: Schema) -> None:
        if self.defs:
            schema["$defs"] = dict(sorted(self.defs.items()))

    def root(self, schema: Schema) -> Schema:
        """``schema`` as a document's root, saying its dialect.

        A root that is only a reference to a named type is that type written out,
        unless something else refers to it (a recursive pydantic model).
        """
        target = schema.get("$ref")
        name = target.removeprefix(_DEFS) if isinstance(target, str) else None
        if name is not None and name in self.defs:
            rest = {k: v for k, v in self.defs.items() if k != name}
            if f'"{target}"' not in json.dumps(rest):
                body = self.defs.pop(name)
                assert isinstance(body, dict)  # noqa: S101 - every def is an object schema
                schema = {**body, **{k: v for k, v in schema.items() if k != "$ref"}}
        return {"$schema": DIALECT, **schema}

    def named(
        self, cls: type, at: str, build: Callable[[type, str], tuple[Schema, _Convert]]
    ) -> tuple[Schema, _Convert]:
        """A reference to ``cls``'s schema, kept once under ``$defs`` by its class name."""
        schema, convert = build(cls, at)
        name = cls.__name__
        ref = _DEFS + name
        if schema == {"$ref": ref}:  # pydantic's own reference to a recursive model
            return schema, convert
        if name in self.defs and self.defs[name] != schema:
            raise self.fail(at, f"two different types are both called {name!r}")
        self.defs[name] = schema
        return {"$ref": ref}, convert

    def schema(self, hint: object, at: str) -> tuple[Schema, _Convert]:  # noqa: C901, PLR0911, PLR0912
        """The schema for ``hint`` and a converter from its JSON to the annotated type."""
        origin, args = get_origin(hint), get_args(hint)
        if origin is Annotated:
            return self._annotated(args[0], args[1:], at)
        if hint is Any or hint is object:
            raise self.fail(at, f"{_show(hint)} is not supported: name a concrete type")
        if hint in _INJECTED:
            raise self.fail(
                at,
                f"{_show(hint)} is injected by the runtime: annotate a top-level "
                f"parameter exactly {_show(hint)}",
            )
        if hint is ToolOutput:
            raise self.fail(at, "ToolOutput has no schema: annotate and return the value itself")
        primitive = next((t for k, t in _PRIMITIVES.items() if hint is k), None)
        if primitive is not None:
            return {"type": primitive}, _to_float if hint is float else _same
        if origin is Literal:
            return self._literal(args, at), _same
        if origin is Union or origin is types.UnionType:
            return self._union(args, at)
        if any(hint is bare for bare in (list, dict, tuple, set, frozenset)):
            raise self.fail(at, f"bare {_show(hint)} is not supported: say what it holds")
        if origin is list:
            items, convert = self.schema(args[0], at)
            return {"type": "array", "items": items}, _mapped(list, convert)
        if origin is tuple:
            return self._tuple(args, at)
        if origin is dict:
            if args[0] is not str:
                raise self.fail(at, "dict keys must be str (JSON object keys are strings)")
            values, convert = self.schema(args[1], at)
            return {"type": "object", "additionalProperties": values}, _dict_values(convert)
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return self._enum(hint, at)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return self.named(hint, at, self._dataclass)
        if _is_typeddict(hint):
            return self.named(typing.cast("type", hint), at, self._typeddict)
        model = _pydantic_model(hint)
        if model is not None:
            return self.named(model, at, self._pydantic_model)
        raise self.fail(at, f"type {_show(hint)} is not supported")

    def _annotated(
        self, base: object, meta: tuple[object, ...], at: str
    ) -> tuple[Schema, _Convert]:
        schema, convert = self.schema(base, at)
        schema = dict(schema)
        for item in meta:
            self._constrain(schema, item, at)
        return schema, convert

    def _constrain(self, schema: Schema, item: object, at: str) -> None:  # noqa: C901, PLR0912
        if isinstance(item, (Secret, Transaction)) or item is Transaction:
            raise self.fail(at, "Secret/Transaction markers belong on a top-level parameter")
        if isinstance(item, str):
            schema.setdefault("description", item)
            return
        field_info = _pydantic_field(item)
        if field_info is not None:
            if field_info.description:
                schema["description"] = field_info.description
            if not field_info.is_required() and field_info.default_factory is None:
                schema["default"] = _default(field_info.default, self.where, at)
            for sub in field_info.metadata:
                self._constrain(schema, sub, at)
            return
        if "annotated_types" not in sys.modules:
            return
        import annotated_types as at_  # noqa: PLC0415 - optional, and loaded if used

        kind = _kind(schema)
        if isinstance(item, at_.GroupedMetadata):
            for sub in item:
                self._constrain(schema, sub, at)
        elif isinstance(item, (at_.Ge, at_.Gt, at_.Le, at_.Lt, at_.MultipleOf)):
            if kind not in {"integer", "number"}:
                raise self.fail(at, f"{item!r} applies to numbers, not {kind}")
            keyword, value = {
                at_.Ge: ("minimum", "ge"),
                at_.Gt: ("exclusiveMinimum", "gt"),
                at_.Le: ("maximum", "le"),
                at_.Lt: ("exclusiveMaximum", "lt"),
                at_.MultipleOf: ("multipleOf", "multiple_of"),
            }[type(item)]
            schema[keyword] = getattr(item, value)
        elif isinstance(item, (at_.MinLen, at_.MaxLen)):
            low = isinstance(item, at_.MinLen)
            words = {
                "string": ("minLength", "maxLength"),
                "array": ("minItems", "maxItems"),
                "object": ("minProperties", "maxProperties"),
            }.get(kind or "")
            if words is None:
                raise self.fail(at, f"{item!r} applies to strings, lists and dicts, not {kind}")
            bound = item.min_length if isinstance(item, at_.MinLen) else item.max_length
            schema[words[0] if low else words[1]] = bound
        elif isinstance(getattr(item, "pattern", None), str):  # pydantic Field(pattern=…)
            if kind != "string":
                raise self.fail(at, f"a pattern applies to strings, not {kind}")
            schema["pattern"] = getattr(item, "pattern", "")

    def _literal(self, values: tuple[object, ...], at: str) -> Schema:
        for value in values:
            if not isinstance(value, (str, int, bool)) and value is not None:
                raise self.fail(at, f"Literal value {value!r} is not a JSON scalar")
        types_ = sorted({_PRIMITIVES[type(v)] for v in values})
        schema: Schema = {"enum": list(values)}
        if len(types_) == 1:
            schema = {"type": types_[0], **schema}
        return schema

    def _enum(self, cls: type[enum.Enum], at: str) -> tuple[Schema, _Convert]:
        values = [member.value for member in cls]
        schema = self._literal(tuple(values), at)

        def convert(value: object) -> object:
            return cls(value)

        return schema, convert

    def _union(self, members: tuple[object, ...], at: str) -> tuple[Schema, _Convert]:
        others = [m for m in members if m is not type(None)]
        nullable = len(others) < len(members)
        if len(others) == 1:
            inner, convert = self.schema(others[0], at)
            return _nullable(inner), _none_or(convert)
        built = [self.schema(m, at) for m in others]
        if not self.output and any(convert is not _same for _, convert in built):
            raise self.fail(
                at,
                f"{_show(members)}: a union may mix only types that need no conversion "
                "(str, int, bool, None, Literal); a value could not be told apart",
            )
        schemas: list[object] = [schema for schema, _ in built]
        if nullable:
            schemas.append({"type": "null"})
        return {"anyOf": schemas}, _same

    def _tuple(self, args: tuple[object, ...], at: str) -> tuple[Schema, _Convert]:
        if len(args) == 2 and args[1] is Ellipsis:  # noqa: PLR2004 - tuple[T, ...]
            items, convert = self.schema(args[0], at)
            return {"type": "array", "items": items}, _mapped(tuple, convert)
        if not args or args == ((),):
            raise self.fail(at, "an empty tuple is not supported")
        built = [self.schema(a, at) for a in args]
        converts = [c for _, c in built]

        def convert_fixed(value: object) -> object:
            assert isinstance(value, list)  # noqa: S101 - the schema admitted an array
            return tuple(c(v) for c, v in zip(converts, value, strict=True))

        schema: Schema = {
            "type": "array",
            "prefixItems": [s for s, _ in built],
            "items": False,
            "minItems": len(args),
            "maxItems": len(args),
        }
        return schema, convert_fixed

    def _guarded(
        self, cls: type, at: str, build: Callable[[type, str], tuple[Schema, _Convert]]
    ) -> tuple[Schema, _Convert]:
        if cls in self._stack:
            raise self.fail(
                at, f"{cls.__qualname__} refers to itself: recursive types are not supported"
            )
        self._stack.append(cls)
        try:
            return build(cls, f"{at} → {cls.__qualname__}")
        finally:
            self._stack.pop()

    def _fields_hints(self, cls: type, at: str) -> dict[str, object]:
        try:
            return typing.get_type_hints(cls, include_extras=True)
        except (NameError, TypeError) as exc:
            raise self.fail(at, f"type hints cannot be resolved: {exc}") from exc

    def _dataclass(self, cls: type, at: str) -> tuple[Schema, _Convert]:
        return self._guarded(cls, at, self._dataclass_fields)

    def _typeddict(self, cls: type, at: str) -> tuple[Schema, _Convert]:
        return self._guarded(cls, at, self._typeddict_keys)

    def _pydantic_model(self, cls: type, at: str) -> tuple[Schema, _Convert]:
        return self._pydantic(typing.cast("type[BaseModel]", cls), at)

    def _dataclass_fields(self, cls: type, at: str) -> tuple[Schema, _Convert]:
        hints = self._fields_hints(cls, at)
        doc = _Docstring.parse(inspect.getdoc(cls) or "")
        properties: Schema = {}
        required: list[str] = []
        converts: dict[str, _Convert] = {}
        fallbacks: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            if not field.init:
                continue
            schema, convert = self.schema(hints[field.name], f"{at}.{field.name}")
            schema = dict(schema)
            _describe(schema, doc.params.get(field.name) or field.metadata.get("description"))
            if field.default is not dataclasses.MISSING:
                schema["default"] = _default(field.default, self.where, f"{at}.{field.name}")
            elif "default" in schema:
                fallbacks[field.name] = schema["default"]
            elif field.default_factory is dataclasses.MISSING:
                required.append(field.name)
            properties[field.name] = schema
            converts[field.name] = convert

        def build(value: object) -> object:
            return cls(**_filled(value, fallbacks, converts))

        return _object(properties, required), build

    def _typeddict_keys(self, cls: type, at: str) -> tuple[Schema, _Convert]:
        hints = self._fields_hints(cls, at)
        doc = _Docstring.parse(inspect.getdoc(cls) or "")
        total = bool(getattr(cls, "__total__", True))
        required: list[str] = []
        properties: Schema = {}
        converts: dict[str, _Convert] = {}
        fallbacks: dict[str, object] = {}
        for key, hint in hints.items():
            # Read the wrappers here: under ``from __future__ import annotations`` a
            # 3.11 TypedDict does not see NotRequired in its __required_keys__.
            inner, needed = hint, total
            while get_origin(inner) in {Required, NotRequired}:
                needed = get_origin(inner) is Required
                inner = get_args(inner)[0]
            schema, convert = self.schema(inner, f"{at}.{key}")
            schema = dict(schema)
            if "default" in schema:
                fallbacks[key] = schema["default"]
            elif needed:
                required.append(key)
            _describe(schema, doc.params.get(key))
            properties[key] = schema
            converts[key] = convert

        def build(value: object) -> object:
            return _filled(value, fallbacks, converts)

        return _object(properties, required), build

    def _pydantic(self, model: type[BaseModel], at: str) -> tuple[Schema, _Convert]:
        mode: Literal["validation", "serialization"] = (
            "serialization" if self.output else "validation"
        )
        try:
            raw = model.model_json_schema(mode=mode, ref_template="#/$defs/{model}")
        except Exception as exc:
            raise self.fail(at, f"{model.__qualname__} has no JSON Schema: {exc}") from exc
        schema = _strict(raw)
        assert isinstance(schema, dict)  # noqa: S101 - a model's schema is an object
        for name, sub in dict(schema.pop("$defs", {})).items():
            if name in self.defs and self.defs[name] != sub:
                raise self.fail(at, f"two different models are both called {name!r}")
            self.defs[name] = sub

        def convert(value: object) -> object:
            return model.model_validate(value)

        return schema, convert


def _filled(
    value: object, fallbacks: Mapping[str, object], converts: Mapping[str, _Convert]
) -> dict[str, object]:
    """An object's fields converted, with defaults only its schema declared filled in."""
    assert isinstance(value, dict)  # noqa: S101 - the schema admitted an object
    out = {k: converts[k](v) for k, v in value.items()}
    for key, default in fallbacks.items():
        if key not in out:
            out[key] = converts[key](default)
    return out


def _object(properties: Schema, required: list[str]) -> Schema:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _describe(schema: Schema, text: object) -> None:
    if isinstance(text, str) and text and "description" not in schema:
        schema["description"] = text


def _kind(schema: Schema) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if isinstance(kind, str) else None


def _nullable(inner: Schema) -> Schema:
    kind = inner.get("type")
    if isinstance(kind, str) and kind not in {"object", "null"}:
        out = dict(inner)
        out["type"] = [kind, "null"]
        if isinstance(inner.get("enum"), list):
            out["enum"] = [*typing.cast("list[object]", inner["enum"]), None]
        return out
    if kind == "null":
        return inner
    return {"anyOf": [inner, {"type": "null"}]}


def _none_or(convert: _Convert) -> _Convert:
    if convert is _same:
        return _same
    return lambda value: None if value is None else convert(value)


def _mapped(kind: Callable[[list[object]], object], convert: _Convert) -> _Convert:
    def mapped(value: object) -> object:
        assert isinstance(value, list)  # noqa: S101 - the schema admitted an array
        return kind([convert(v) for v in value])

    if kind is list and convert is _same:
        return _same
    return mapped


def _dict_values(convert: _Convert) -> _Convert:
    if convert is _same:
        return _same

    def mapped(value: object) -> object:
        assert isinstance(value, dict)  # noqa: S101 - the schema admitted an object
        return {k: convert(v) for k, v in value.items()}

    return mapped


_DEFS = "#/$defs/"

_SUBSCHEMA_MAPS = ("properties", "$defs", "patternProperties")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMAS = ("items", "additionalProperties", "not")


def _strict(schema: object) -> object:
    """A pydantic schema made strict: closed objects, every non-defaulted field required."""
    if not isinstance(schema, dict):
        return schema
    out: Schema = {k: v for k, v in schema.items() if k != "title"}
    for key in _SUBSCHEMA_MAPS:
        table = out.get(key)
        if isinstance(table, dict):
            out[key] = {name: _strict(sub) for name, sub in table.items()}
    for key in _SUBSCHEMA_LISTS:
        items = out.get(key)
        if isinstance(items, list):
            out[key] = [_strict(sub) for sub in items]
    for key in _SUBSCHEMAS:
        if isinstance(out.get(key), dict):
            out[key] = _strict(out[key])
    properties = out.get("properties")
    if isinstance(properties, dict):
        out["additionalProperties"] = False
        out["required"] = [
            name
            for name, sub in properties.items()
            if not (isinstance(sub, dict) and "default" in sub)
        ]
    return out


def _pydantic_model(hint: object) -> type[BaseModel] | None:
    if "pydantic" not in sys.modules:  # nothing can be a model if pydantic never loaded
        return None
    from pydantic import BaseModel  # noqa: PLC0415 - optional dependency

    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return hint
    return None


def _pydantic_field(item: object) -> Any | None:  # noqa: ANN401 - FieldInfo when loaded
    if "pydantic" not in sys.modules:
        return None
    from pydantic.fields import FieldInfo  # noqa: PLC0415 - optional dependency

    return item if isinstance(item, FieldInfo) else None


def _show(hint: object) -> str:
    if isinstance(hint, type) and get_origin(hint) is None:
        return hint.__qualname__
    return repr(hint).replace("typing.", "")


# -- results -------------------------------------------------------------------------


_PLAIN_JSON: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def _encode(value: object) -> object:
    """A return value as JSON: dataclasses, models, tuples and enums included."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, enum.Enum):
        return _encode(value.value)
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        # The usual flat record of plain values is copied without walking it.
        return dict(value) if _flat(value) else {str(k): _encode(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if _pydantic_model(type(value)) is not None:
        dump = getattr(value, "model_dump")  # noqa: B009 - typed via the check above
        return dump(mode="json")
    msg = f"{type(value).__qualname__} is not a JSON value"
    raise TypeError(msg)


def _flat(value: dict[object, object]) -> bool:
    """Whether ``value`` is a plain dict of text keys and plain JSON scalars."""
    if type(value) is not dict:
        return False
    for k, v in value.items():  # noqa: SIM110 - a generator under all() costs more here
        if type(k) is not str or type(v) not in _PLAIN_JSON:
            return False
    return True


def _bind(plan: list[_Param], arguments: JSONObject, ctx: ToolContext) -> dict[str, object]:
    """The keyword arguments for one call: converted JSON, fallbacks, injected values."""
    kwargs: dict[str, object] = {}
    for param in plan:
        if param.inject is not None:
            kwargs[param.name] = param.inject(ctx)
        elif param.name in arguments:
            assert param.convert is not None  # noqa: S101 - every non-injected has one
            kwargs[param.name] = param.convert(arguments[param.name])
        elif param.fallback is not _ABSENT:
            assert param.convert is not None  # noqa: S101 - every non-injected has one
            kwargs[param.name] = param.convert(param.fallback)
    return kwargs


def _adapt(fn: Callable[..., object], plan: list[_Param]) -> ToolFunction | AsyncToolFunction:
    def result(value: object) -> JSONValue | ToolOutput:
        if isinstance(value, ToolOutput):
            return ToolOutput(
                typing.cast("JSONValue", _encode(value.value)), value.external_resource_id
            )
        return typing.cast("JSONValue", _encode(value))

    if inspect.iscoroutinefunction(fn):
        afn = typing.cast("Callable[..., Awaitable[object]]", fn)

        async def run_async(arguments: JSONObject, ctx: ToolContext) -> JSONValue | ToolOutput:
            return result(await afn(**_bind(plan, arguments, ctx)))

        return functools.update_wrapper(run_async, fn, updated=())

    def run(arguments: JSONObject, ctx: ToolContext) -> JSONValue | ToolOutput:
        return result(fn(**_bind(plan, arguments, ctx)))

    return functools.update_wrapper(run, fn, updated=())


# -- docstrings ----------------------------------------------------------------------

_GOOGLE_ARGS = re.compile(r"^(Args|Arguments|Parameters|Attributes|Keyword Args):\s*$")
_GOOGLE_SECTION = re.compile(r"^[A-Z][A-Za-z ]*:\s*$")
_GOOGLE_ENTRY = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^:(?:param|parameter|arg|argument)\s+(?:[^:]*\s)?(\w+):\s*(.*)$")
_REST_FIELD = re.compile(r"^:\w")


def docstring_params(text: str) -> dict[str, str]:
    """Each parameter's description in a docstring (Google ``Args:`` or reST ``:param:``)."""
    return _Docstring.parse(text).params


@dataclass(frozen=True, slots=True)
class _Docstring:
    summary: str
    params: dict[str, str]

    @classmethod
    def parse(cls, text: str) -> _Docstring:
        lines = inspect.cleandoc(text).splitlines()
        summary: list[str] = []
        for line in lines:
            stripped = line.strip()
            if not stripped or _GOOGLE_SECTION.match(stripped) or _REST_FIELD.match(stripped):
                break
            summary.append(stripped)
        return cls(" ".join(summary), _google(lines) | _rest(lines))


def _google(lines: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    in_section = False
    entry_indent: int | None = None
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if _GOOGLE_ARGS.match(line):
            in_section, entry_indent, current = True, None, None
            continue
        if not in_section:
            continue
        if stripped and indent == 0:
            in_section = False
            continue
        if not stripped:
            continue
        if entry_indent is None:
            entry_indent = indent
        match = _GOOGLE_ENTRY.match(stripped)
        if indent == entry_indent and match:
            current = match.group(1).lstrip("*")
            params[current] = match.group(3).strip()
        elif current is not None and indent > entry_indent:
            params[current] = f"{params[current]} {stripped}".strip()
    return params


def _rest(lines: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        match = _REST_PARAM.match(stripped)
        if match:
            current = match.group(1)
            params[current] = match.group(2).strip()
        elif _REST_FIELD.match(stripped) or not stripped:
            current = None
        elif current is not None and line[:1].isspace():
            params[current] = f"{params[current]} {stripped}".strip()
    return params


def _is_typeddict(hint: object) -> bool:
    """A TypedDict class, from ``typing`` or ``typing_extensions``.

    On Python 3.11 ``typing.is_typeddict`` does not recognise the
    ``typing_extensions`` form, which Pydantic requires before 3.12.
    """
    return typing.is_typeddict(hint) or (
        isinstance(hint, type)
        and issubclass(hint, dict)
        and hasattr(hint, "__required_keys__")
        and hasattr(hint, "__total__")
    )

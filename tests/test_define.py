"""Tools from typed Python functions: generated strict schemas, injection, conversion."""

from __future__ import annotations

import asyncio
import enum
import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, Required, TypedDict

import pytest
from annotated_types import Ge, Gt, Le, Len, Lt, MaxLen, MinLen
from pydantic import BaseModel, Field

from toolbound import (
    CallContext,
    Grant,
    GrantPolicy,
    Proposal,
    Registry,
    Runtime,
    Subject,
    ToolContext,
    ToolOutput,
)
from toolbound._errors import SpecError
from toolbound._model import Invocation  # noqa: TC001 - define reads the hints at run time
from toolbound.define import DefinedTool, Secret, Transaction, define, tool
from toolbound.execution.tool import StaticSecrets
from toolbound.gates.validate import DIALECT

MIRA = Subject(id="mira", tenant="acme", session="s-1")


# -- types the tables use ----------------------------------------------------------


@dataclass
class Point:
    """A point.

    Attributes:
        x: Across.
        y: Up.

    """

    x: int
    y: float = 0.0


@dataclass
class Pixel:
    """A pixel: every field required."""

    x: int
    y: int


@dataclass
class Segment:
    """Two points and optional tags."""

    start: Point
    end: Point
    tags: list[str] = field(default_factory=list)


class Window(TypedDict):
    """A total TypedDict with one NotRequired key."""

    start: str
    end: NotRequired[str]


class Slot(TypedDict, total=False):
    """A non-total TypedDict with one Required key."""

    day: Required[str]
    hour: int


class Color(enum.Enum):
    """A string enum."""

    RED = "red"
    BLUE = "blue"


class Order(BaseModel):
    """An order line."""

    sku: str
    quantity: int = 1
    note: str | None = None


class Basket(BaseModel):
    """Several order lines."""

    orders: list[Order]


@dataclass
class Node:
    """A type that refers to itself."""

    child: Node | None


OBJ = {"additionalProperties": False}


def one(hint: object) -> dict[str, object]:
    """The schema generated for a single required parameter ``v: hint``."""

    def fn(v: hint) -> None:  # type: ignore[valid-type]
        """Probe."""

    fn.__annotations__ = {"v": hint, "return": None}
    schema = define(fn, effect="read").spec.input_schema
    assert schema["required"] == ["v"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert isinstance(props, dict)
    out = inlined(props["v"], schema.get("$defs", {}))
    assert isinstance(out, dict)
    return out


def inlined(node: object, defs: dict[str, object]) -> object:
    """``node`` with each reference to a root ``$defs`` entry replaced by the entry."""
    if isinstance(node, list):
        return [inlined(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    target = node.get("$ref")
    if isinstance(target, str) and target.removeprefix("#/$defs/") in defs:
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return {**inlined(defs[target.removeprefix("#/$defs/")], defs), **rest}  # type: ignore[dict-item]
    return {key: inlined(value, defs) for key, value in node.items()}


POINT = {
    "type": "object",
    "properties": {
        "x": {"type": "integer", "description": "Across."},
        "y": {"type": "number", "description": "Up.", "default": 0.0},
    },
    "required": ["x"],
    **OBJ,
}

TYPE_FORMS = [
    (str, {"type": "string"}),
    (int, {"type": "integer"}),
    (float, {"type": "number"}),
    (bool, {"type": "boolean"}),
    (None, {"type": "null"}),
    (list[int], {"type": "array", "items": {"type": "integer"}}),
    (tuple[str, ...], {"type": "array", "items": {"type": "string"}}),
    (
        tuple[int, str],
        {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "items": False,
            "minItems": 2,
            "maxItems": 2,
        },
    ),
    (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
    (Literal[1, "x"], {"enum": [1, "x"]}),
    (Color, {"type": "string", "enum": ["red", "blue"]}),
    (str | None, {"type": ["string", "null"]}),
    (Literal["a"] | None, {"type": ["string", "null"], "enum": ["a", None]}),
    (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    (Annotated[int, Ge(1), Le(7)], {"type": "integer", "minimum": 1, "maximum": 7}),
    (
        Annotated[float, Gt(0), Lt(1)],
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    ),
    (Annotated[str, MinLen(1), MaxLen(5)], {"type": "string", "minLength": 1, "maxLength": 5}),
    (
        Annotated[list[int], Len(1, 3)],
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
    ),
    (
        Annotated[str, Field(pattern="^[a-z]+$", max_length=8, description="A slug.")],
        {"type": "string", "description": "A slug.", "maxLength": 8, "pattern": "^[a-z]+$"},
    ),
    (Annotated[str, "Free text."], {"type": "string", "description": "Free text."}),
    (Point, POINT),
    (Point | None, {"anyOf": [POINT, {"type": "null"}]}),
    (
        Window,
        {
            "type": "object",
            "properties": {"start": {"type": "string"}, "end": {"type": "string"}},
            "required": ["start"],
            **OBJ,
        },
    ),
    (
        Slot,
        {
            "type": "object",
            "properties": {"day": {"type": "string"}, "hour": {"type": "integer"}},
            "required": ["day"],
            **OBJ,
        },
    ),
    (
        Order,
        {
            "description": "An order line.",
            "type": "object",
            "properties": {
                "sku": {"type": "string"},
                "quantity": {"type": "integer", "default": 1},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            },
            "required": ["sku"],
            **OBJ,
        },
    ),
]


@pytest.mark.parametrize(
    ("hint", "expected"), TYPE_FORMS, ids=[str(i) for i, _ in enumerate(TYPE_FORMS)]
)
def test_each_type_form_generates_its_exact_schema(hint, expected):
    """Every supported annotation maps to one exact, strict JSON Schema."""
    assert one(hint) == expected


def test_nested_dataclasses_are_closed():
    """A dataclass inside a dataclass is a closed object; a default_factory field is optional."""
    schema = one(Segment)
    assert schema["required"] == ["start", "end"]
    assert schema["properties"]["start"] == POINT
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert schema["additionalProperties"] is False


def test_nested_pydantic_models_are_hoisted_to_root_defs_and_made_strict():
    """Pydantic $defs move to the root, every object in them closed, titles dropped."""

    def fn(v: Basket) -> None:
        """Probe."""

    schema = define(fn, effect="read").spec.input_schema
    assert schema["properties"]["v"] == {"$ref": "#/$defs/Basket"}
    basket = schema["$defs"]["Basket"]
    assert basket["properties"]["orders"] == {"type": "array", "items": {"$ref": "#/$defs/Order"}}
    order = schema["$defs"]["Order"]
    assert order["additionalProperties"] is False
    assert order["required"] == ["sku"]
    assert "title" not in json.dumps(schema)


def test_defaults_are_recorded_and_only_undefaulted_parameters_required():
    """A parameter with a default is optional and its default is in the schema as JSON."""

    def fn(a: str, b: int = 2, c: tuple[int, ...] = (1, 2), d: str | None = None) -> None:
        """Defaults."""

    schema = define(fn, effect="read").spec.input_schema
    assert schema["required"] == ["a"]
    assert schema["properties"]["b"] == {"type": "integer", "default": 2}
    assert schema["properties"]["c"]["default"] == [1, 2]
    assert schema["properties"]["d"] == {"type": ["string", "null"], "default": None}


DOCSTRINGS = [
    (
        """Find a flight.

        Longer text that is not the summary.

        Args:
            origin: Where from,
                as an IATA code.
            when (str): The day.

        Returns:
            The flights.
        """,
        "Find a flight.",
        {"origin": "Where from, as an IATA code.", "when": "The day."},
    ),
    (
        """Find a flight
        across two lines.

        :param origin: Where from.
        :param str when: The day,
            local time.
        :returns: The flights.
        """,
        "Find a flight across two lines.",
        {"origin": "Where from.", "when": "The day, local time."},
    ),
]


@pytest.mark.parametrize(("doc", "summary", "params"), DOCSTRINGS, ids=["google", "rest"])
def test_descriptions_come_from_the_docstring(doc, summary, params):
    """The summary paragraph describes the tool; Args or :param: describe parameters."""

    def find(origin: str, when: str) -> None:
        pass

    find.__doc__ = doc
    spec = define(find, effect="read").spec
    assert spec.description == summary
    props = spec.input_schema["properties"]
    assert {k: v["description"] for k, v in props.items()} == params


def test_decorator_declares_spec_fields_beside_the_function():
    """name, version, effect, capabilities and other ToolSpec fields pass through."""

    @tool(
        name="orders.cancel",
        version="v2",
        effect="reversible_write",
        capabilities=("orders:write",),
        timeout=3.0,
        max_attempts=2,
        description="Cancel it.",
    )
    def cancel(order_id: str) -> None:
        """Ignored: description= wins."""

    assert isinstance(cancel, DefinedTool)
    spec = cancel.spec
    assert (spec.ref, spec.effect, spec.capabilities) == (
        "orders.cancel@v2",
        "reversible_write",
        ("orders:write",),
    )
    assert (spec.timeout, spec.max_attempts, spec.description) == (3.0, 2, "Cancel it.")
    assert spec.output_schema is None
    assert cancel.strict_issues == ()


def test_typical_function_is_strict_compatible():
    """A function with required, well-typed parameters has no strict-mode issues."""

    def fn(a: str, b: Literal["x", "y"], c: list[Pixel], d: int | None) -> Point:
        """Typical."""
        return Point(x=1)

    defined = define(fn, effect="read")
    assert defined.strict_issues == ()
    assert defined.spec.output_schema == {"$schema": DIALECT, **POINT}


def test_schemas_say_their_dialect_and_keep_each_named_type_once_in_defs():
    """$schema names 2020-12; a dataclass used twice is one $defs entry and two $refs."""

    def fn(a: Point, b: list[Point], c: Point | None) -> Segment:
        """Typical."""
        return Segment(start=a, end=a)

    spec = define(fn, effect="read").spec
    inputs, outputs = spec.input_schema, spec.output_schema
    assert inputs["$schema"] == DIALECT
    assert inputs["$defs"] == {"Point": POINT}
    assert inputs["properties"] == {
        "a": {"$ref": "#/$defs/Point"},
        "b": {"type": "array", "items": {"$ref": "#/$defs/Point"}},
        "c": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]},
    }
    # The output's root is the returned type itself, an object as MCP wants it.
    assert outputs is not None
    assert outputs["$schema"] == DIALECT
    assert outputs["type"] == "object"
    assert outputs["properties"]["start"] == {"$ref": "#/$defs/Point"}
    assert outputs["$defs"] == {"Point": POINT}


def test_two_different_types_with_one_name_are_refused():
    """$defs are keyed by class name, so two different classes called alike fail at define."""

    def other() -> type:
        @dataclass
        class Point:
            z: str

        return Point

    twin = other()

    def fn(a: Point, b: twin) -> None:  # type: ignore[valid-type]
        """Probe."""

    fn.__annotations__ = {"a": Point, "b": twin, "return": None}
    with pytest.raises(SpecError, match="two different types are both called 'Point'"):
        define(fn, effect="read")


def test_defaulted_parameters_are_reported_as_strict_issues():
    """Optional parameters are legal 2020-12 but reported for providers' strict mode."""

    def fn(a: int = 1) -> None:
        """Optional."""

    assert any("not in required: a" in issue for issue in define(fn, effect="read").strict_issues)


UNSUPPORTED = [
    ("Any", Any, "Any is not supported"),
    ("object", object, "object is not supported"),
    ("bare dict", dict, "bare dict is not supported"),
    ("bare list", list, "bare list is not supported"),
    ("int keys", dict[int, str], "dict keys must be str"),
    ("set", set[int], r"type set\[int\] is not supported"),
    ("recursive", Node, "recursive types are not supported"),
    ("mixed union", Point | int, "a union may mix only"),
    ("Ge on str", Annotated[str, Ge(1)], "applies to numbers"),
    ("float literal", Literal[1.5], "not a JSON scalar"),
    ("optional Subject", Subject | None, "is injected by the runtime"),
    ("ToolContext in a list", list[ToolContext], "is injected by the runtime"),
    ("ToolOutput", ToolOutput, "ToolOutput has no schema"),
]


@pytest.mark.parametrize(
    ("hint", "message"), [(h, m) for _, h, m in UNSUPPORTED], ids=[i for i, _, _ in UNSUPPORTED]
)
def test_unsupported_annotations_are_refused_at_definition(hint, message):
    """An annotation with no exact schema is a SpecError naming the function and parameter."""
    with pytest.raises(SpecError, match=message) as info:
        one(hint)
    assert "fn" in str(info.value)
    assert "parameter 'v'" in str(info.value)


def missing_annotation(v) -> None:
    """No annotation."""


def missing_return(v: str):
    """No return annotation."""


def var_args(*v: str) -> None:
    """Variadic."""


def no_doc(v: str) -> None:
    pass


def bad_default(v: object = object()) -> None:
    """Unserializable default."""


def bad_secret(v: Annotated[int, Secret("k")]) -> None:
    """A secret that is not a string."""


BAD_FUNCTIONS = [
    (missing_annotation, "parameter 'v' has no type annotation"),
    (missing_return, "return type is not annotated"),
    (var_args, r"\*args"),
    (no_doc, "no description"),
    (bad_default, "object is not supported"),
    (bad_secret, "must be annotated str"),
]


@pytest.mark.parametrize(
    ("fn", "message"), BAD_FUNCTIONS, ids=[f.__name__ for f, _ in BAD_FUNCTIONS]
)
def test_bad_functions_are_refused_at_definition(fn, message):
    """Missing annotations, variadics, no description and bad secrets fail when defined."""
    with pytest.raises(SpecError, match=message) as info:
        define(fn, effect="read")
    assert fn.__name__ in str(info.value)


def test_spec_rules_are_checked_at_definition():
    """A bad name or a write without capabilities fails when defined, not when registered."""

    def fn(v: str) -> None:
        """Fine function."""

    with pytest.raises(SpecError, match="name 'no spaces'"):
        define(fn, name="no spaces", effect="read")
    with pytest.raises(SpecError, match="at least one capability"):
        define(fn, effect="irreversible_write")


def test_generated_schema_is_checked_against_the_meta_schema():
    """A constraint that breaks 2020-12 (negative maxLength) is a SpecError naming the function."""

    def fn(v: Annotated[str, MaxLen(-1)]) -> None:
        """Broken."""

    with pytest.raises(SpecError, match=r"fn .*input_schema is not valid JSON Schema 2020-12"):
        define(fn, effect="read")


# -- through a real runtime ------------------------------------------------------------


@pytest.fixture
def registry() -> Registry:
    return Registry()


@pytest.fixture
def runtime():
    grant = Grant(
        subject=MIRA.id,
        tenant=MIRA.tenant,
        capability="t:use",
        actions=frozenset({"read", "create", "modify", "delete"}),
    )
    rt = Runtime(policy=GrantPolicy([grant]), secrets=StaticSecrets({"api_key": "sk-123"}))
    yield rt
    rt.close()


def call(runtime: Runtime, registry: Registry, name: str, arguments: object):
    proposal = Proposal(name=name, arguments=json.dumps(arguments).encode(), proposal_id="call_1")
    return runtime.run(proposal, CallContext(subject=MIRA, tools=registry.toolset()))


def test_injected_values_are_absent_from_the_schema_and_delivered_at_call_time(runtime, registry):
    """Context, subject, invocation and secret reach the function; the model never sees them."""
    seen: dict[str, object] = {}

    @tool(effect="read", capabilities=("t:use",))
    def whoami(
        greeting: str,
        ctx: ToolContext,
        who: Subject,
        inv: Invocation,
        key: Annotated[str, Secret("api_key")],
    ) -> str:
        """Say hello."""
        seen.update(ctx=ctx, who=who, inv=inv, key=key)
        return f"{greeting} {who.id}"

    assert list(whoami.spec.input_schema["properties"]) == ["greeting"]
    assert whoami.spec.secrets == ("api_key",)
    whoami.register(registry)
    out = call(runtime, registry, "whoami", {"greeting": "hi"})
    assert out.kind == "observed", out
    assert out.result.value == "hi mira"
    assert seen["who"] == MIRA
    assert seen["key"] == "sk-123"
    assert isinstance(seen["ctx"], ToolContext)
    assert seen["inv"] is seen["ctx"].invocation


def test_transaction_marker_is_injected_and_makes_the_spec_transactional():
    """A Transaction parameter is hidden from the model and makes the tool transactional."""

    def book(seat: str, tx: Annotated[object, Transaction()]) -> None:
        """Book a seat."""

    spec = define(book, effect="reversible_write", capabilities=("t:use",)).spec
    assert list(spec.input_schema["properties"]) == ["seat"]
    assert spec.transactional is True
    with pytest.raises(SpecError, match="needs a transactional tool"):
        define(book, effect="reversible_write", capabilities=("t:use",), transactional=False)


def test_structured_arguments_are_converted_and_results_encoded(runtime, registry):
    """Dataclass, TypedDict, pydantic, tuple, enum, float params arrive typed; returns are JSON."""
    seen: dict[str, object] = {}

    @tool(effect="read", capabilities=("t:use",))
    def plan(
        *,
        seg: Segment,
        window: Window,
        order: Order,
        pair: tuple[int, str],
        color: Color,
        scale: float,
        maybe: Point | None = None,
    ) -> Segment:
        """Plan a route."""
        seen.update(
            seg=seg, window=window, order=order, pair=pair, color=color, scale=scale, maybe=maybe
        )
        return seg

    plan.register(registry)
    seg = {"start": {"x": 1}, "end": {"x": 2, "y": 0.5}}
    out = call(
        runtime,
        registry,
        "plan",
        {
            "seg": seg,
            "window": {"start": "9"},
            "order": {"sku": "A"},
            "pair": [1, "a"],
            "color": "red",
            "scale": 2,
        },
    )
    assert out.kind == "observed", out
    assert seen == {
        "seg": Segment(start=Point(x=1), end=Point(x=2, y=0.5)),
        "window": {"start": "9"},
        "order": Order(sku="A"),
        "pair": (1, "a"),
        "color": Color.RED,
        "scale": 2.0,
        "maybe": None,
    }
    assert isinstance(seen["scale"], float)
    assert out.result.value == {"start": {"x": 1, "y": 0.0}, "end": {"x": 2, "y": 0.5}, "tags": []}


@dataclass
class Paging:
    """A dataclass whose default only a pydantic Field declares."""

    size: Annotated[int, Field(default=10, ge=1)]


def test_field_defaults_reach_the_function_when_the_model_omits_them(runtime, registry):
    """A Field(default=...) makes a parameter optional and its default is passed when absent."""
    seen: list[object] = []

    @tool(effect="read", capabilities=("t:use",))
    def page(paging: Paging, limit: Annotated[int, Field(default=5, le=50)]) -> None:
        """Page through results."""
        seen.extend([paging, limit])

    schema = page.spec.input_schema
    assert schema["required"] == ["paging"]
    assert schema["properties"]["limit"] == {"type": "integer", "default": 5, "maximum": 50}
    assert schema["properties"]["paging"] == {"$ref": "#/$defs/Paging"}
    assert schema["$defs"]["Paging"]["required"] == []
    page.register(registry)
    out = call(runtime, registry, "page", {"paging": {}})
    assert out.kind == "observed", out
    assert seen == [Paging(size=10), 5]


def test_pydantic_return_value_is_dumped_as_json(runtime, registry):
    """A BaseModel return value becomes model_dump(mode="json") and passes its output schema."""

    @tool(effect="read", capabilities=("t:use",))
    def latest(sku: str) -> Order:
        """The latest order."""
        return Order(sku=sku, quantity=2)

    latest.register(registry)
    out = call(runtime, registry, "latest", {"sku": "B"})
    assert out.kind == "observed", out
    assert out.result.value == {"sku": "B", "quantity": 2, "note": None}


REJECTED = [
    ("extra top-level field", {"sku": "A", "admin": True}),
    ("extra nested field", {"sku": "A", "where": {"x": 1, "z": 3}}),
    ("missing required field", {}),
    ("wrong type", {"sku": 5}),
    ("out of range", {"sku": "A", "n": 0}),
]


@pytest.mark.parametrize("arguments", [a for _, a in REJECTED], ids=[i for i, _ in REJECTED])
def test_the_generated_schema_rejects_what_the_types_do_not_allow(runtime, registry, arguments):
    """Extra fields, missing fields, wrong types and broken constraints never reach the function."""
    calls: list[object] = []

    @tool(effect="read", capabilities=("t:use",))
    def lookup(sku: str, where: Point | None = None, n: Annotated[int, Ge(1)] = 1) -> None:
        """Look up."""
        calls.append(sku)

    lookup.register(registry)
    out = call(runtime, registry, "lookup", arguments)
    assert out.kind == "rejected"
    assert out.problem.kind == "validation"
    assert calls == []


def test_async_function_runs_through_arun(runtime, registry):
    """An async function yields an async tool that Runtime.arun awaits."""

    @tool(effect="read", capabilities=("t:use",))
    async def slow_echo(text: str, who: Subject) -> dict[str, str]:
        """Echo after a pause."""
        await asyncio.sleep(0)
        return {"text": text, "who": who.id}

    assert asyncio.iscoroutinefunction(slow_echo.function)
    registered = slow_echo.register(registry)
    assert registered.is_async
    proposal = Proposal(name="slow_echo", arguments=b'{"text":"hi"}', proposal_id="call_1")
    out = asyncio.run(runtime.arun(proposal, CallContext(subject=MIRA, tools=registry.toolset())))
    assert out.kind == "observed", out
    assert out.result.value == {"text": "hi", "who": "mira"}


def test_sync_function_can_run_inline(registry):
    """A sync read tool registers inline and the original stays reachable."""

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    defined = define(add, effect="pure")
    assert defined.register(registry, inline=True).inline
    assert defined.original is add
    assert not asyncio.iscoroutinefunction(defined.function)


def test_a_typing_extensions_typeddict_is_a_typeddict():
    """Pydantic needs typing_extensions.TypedDict before 3.12; it describes the same object."""
    import typing_extensions

    class Point(typing_extensions.TypedDict):
        x: int
        y: typing_extensions.NotRequired[int]

    @tool(effect="pure")
    def where(point: Point) -> str:
        """Say where a point is."""
        return f"{point['x']}"

    assert where.spec.input_schema["properties"]["point"] == {"$ref": "#/$defs/Point"}
    schema = where.spec.input_schema["$defs"]["Point"]
    assert schema["type"] == "object"
    assert schema["required"] == ["x"]
    assert schema["additionalProperties"] is False

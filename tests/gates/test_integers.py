"""Integer positions (R4, R5): an integral number where the schema says integer is an int.

JSON Schema counts ``1.0`` and ``2e2`` as integers; the parser reads them as floats.
``CompiledSchema.validated`` hands them on as ints wherever the schema makes the
position integer-only, and RFC 8785 writes both alike, so digests do not move.
"""

from __future__ import annotations

import json

import pytest

from harness import MIRA, SHARED_DATA, Harness, proposal, spec
from toolbound import CallContext, Grant, GrantPolicy, Registry, Runtime
from toolbound._errors import Rejection, SchemaError
from toolbound.gates.normalize import canonical_json
from toolbound.gates.parse import parse_arguments
from toolbound.gates.validate import CompiledSchema, _with_ints
from toolbound.packs import calendar, payments
from toolbound.testing import FakeTool


def obj(**properties: object) -> dict[str, object]:
    return {"type": "object", "properties": properties}


INT = {"type": "integer"}
LINE = {
    "type": "object",
    "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
}
TREE = {
    "type": "object",
    "$defs": {
        "node": {
            "type": "object",
            "properties": {"v": INT, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        }
    },
    "properties": {"root": {"$ref": "#/$defs/node"}},
}

# (schema, argument bytes, what the tool receives)
COERCED = [
    pytest.param(obj(n=INT), b'{"n":1.0}', {"n": 1}, id="top_level"),
    pytest.param(obj(n=INT), b'{"n":2e2}', {"n": 200}, id="exponent"),
    pytest.param(obj(n=INT), b'{"n":-0.0}', {"n": 0}, id="negative_zero"),
    pytest.param(obj(n=INT), b'{"n":-7E0}', {"n": -7}, id="negative"),
    pytest.param(
        obj(a=obj(b=obj(n=INT))), b'{"a":{"b":{"n":3.0}}}', {"a": {"b": {"n": 3}}}, id="nested"
    ),
    pytest.param(
        obj(xs={"type": "array", "items": INT}),
        b'{"xs":[1.0,2,3e0]}',
        {"xs": [1, 2, 3]},
        id="array_items",
    ),
    pytest.param(
        obj(
            t={
                "type": "array",
                "prefixItems": [{"type": "string"}, INT],
                "items": {"type": "number"},
            }
        ),
        b'{"t":["a",1.0,2.0]}',
        {"t": ["a", 1, 2.0]},
        id="prefix_items_then_numbers",
    ),
    pytest.param(
        obj(lines={"type": "array", "items": LINE}),
        b'{"lines":[{"sku":"tea","quantity":2.0},{"sku":"cup","quantity":1}]}',
        {"lines": [{"sku": "tea", "quantity": 2}, {"sku": "cup", "quantity": 1}]},
        id="array_of_objects",
    ),
    pytest.param(
        {
            "type": "object",
            "$defs": {"line": LINE},
            "properties": {"line": {"$ref": "#/$defs/line"}},
        },
        b'{"line":{"sku":"tea","quantity":4.0}}',
        {"line": {"sku": "tea", "quantity": 4}},
        id="ref",
    ),
    pytest.param(
        {
            "type": "object",
            "properties": {"line": {"$ref": "#qty"}},
            "$defs": {"q": {"$anchor": "qty", "type": "integer"}},
        },
        b'{"line":5.0}',
        {"line": 5},
        id="ref_to_anchor",
    ),
    pytest.param(
        {
            "type": "object",
            "properties": {"m": {"$ref": "money.json"}},
            "$defs": {
                "money": {"$id": "money.json", "$ref": "#/$defs/cents", "$defs": {"cents": INT}}
            },
        },
        b'{"m":99.0}',
        {"m": 99},
        id="ref_inside_embedded_resource",
    ),
    pytest.param(
        {
            "type": "object",
            "allOf": [obj(n={"type": "number"}), obj(n={"type": "integer", "minimum": 0})],
        },
        b'{"n":5.0}',
        {"n": 5},
        id="all_of",
    ),
    pytest.param(
        obj(n={"anyOf": [INT, {"type": "null"}]}),
        b'{"n":6.0}',
        {"n": 6},
        id="optional_integer_any_of",
    ),
    pytest.param(
        obj(n={"type": ["integer", "null"]}),
        b'{"n":6.0}',
        {"n": 6},
        id="integer_or_null",
    ),
    pytest.param(
        {"type": "object", "properties": {"s": {"type": "string"}}, "additionalProperties": INT},
        b'{"s":"1.0","x":1.0,"y":2}',
        {"s": "1.0", "x": 1, "y": 2},
        id="additional_properties",
    ),
    pytest.param(
        TREE,
        b'{"root":{"v":1.0,"kids":[{"v":2.0,"kids":[{"v":3.0}]}]}}',
        {"root": {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}},
        id="recursive",
    ),
]


@pytest.mark.parametrize(("schema", "data", "expected"), COERCED)
def test_integral_numbers_at_integer_positions_become_ints(schema, data, expected):
    """An integral float where the schema says integer is handed on as the equal int."""
    arguments = parse_arguments(data)
    result = CompiledSchema.compile(schema).validated(arguments)
    assert result == expected
    assert json.dumps(result) == json.dumps(expected)  # 1, not 1.0: the types match too
    # R5: RFC 8785 writes 1.0 as 1, so the canonical bytes (and the digest) are the same.
    assert canonical_json(result) == canonical_json(arguments)


LEFT_ALONE = [
    pytest.param(obj(n={"type": "number"}), b'{"n":1.0}', id="number"),
    pytest.param(obj(n={"type": ["integer", "number"]}), b'{"n":1.0}', id="integer_or_number"),
    pytest.param(obj(n={"anyOf": [INT, {"type": "number"}]}), b'{"n":1.0}', id="any_of_number"),
    pytest.param(obj(n={"minimum": 0}), b'{"n":1.0}', id="untyped"),
    pytest.param(
        {"type": "object", "patternProperties": {"^n": INT}, "additionalProperties": INT},
        b'{"n":1.0}',
        id="pattern_properties_decide",
    ),
    pytest.param(
        {"type": "object", "if": obj(k={"const": 1}), "then": obj(n=INT)},
        b'{"k":1,"n":1.0}',
        id="conditional",
    ),
    pytest.param(obj(s={"type": "string"}), b'{"s":"1.0","n":1.0}', id="unnamed_member"),
]


@pytest.mark.parametrize(("schema", "data"), LEFT_ALONE)
def test_positions_the_schema_leaves_open_keep_their_floats(schema, data):
    """Where the schema does not make a position integer-only, a float stays a float."""
    arguments = parse_arguments(data)
    result = CompiledSchema.compile(schema).validated(arguments)
    assert result is arguments
    assert type(result["n"]) is float


@pytest.mark.parametrize(
    ("data", "pointer"),
    [
        (b'{"n":1.5}', "/n"),
        (b'{"xs":[1,2.5]}', "/xs/1"),
        (b'{"lines":[{"sku":"a","quantity":1e-3}]}', "/lines/0/quantity"),
    ],
)
def test_a_number_that_is_not_integral_is_still_rejected(data, pointer):
    """Validation runs first: 1.5 at an integer position is a type error, never truncated."""
    schema = obj(n=INT, xs={"type": "array", "items": INT}, lines={"type": "array", "items": LINE})
    with pytest.raises(Rejection) as info:
        CompiledSchema.compile(schema).validated(parse_arguments(data))
    assert (info.value.problem.code, info.value.problem.pointer) == ("type", pointer)


def test_a_schema_without_integer_positions_has_no_plan_and_returns_its_input():
    """The plan is worked out at compile time; without integers validated() adds nothing."""
    compiled = CompiledSchema.compile(obj(s={"type": "string"}, x={"type": "number"}))
    assert compiled._integers is None
    arguments = {"s": "a", "x": 1.0}
    assert compiled.validated(arguments) is arguments


def test_only_the_changed_path_is_copied_and_the_input_is_not_mutated():
    """Untouched members keep their identity; the caller's object is never altered."""
    schema = obj(a=obj(n=INT), b=obj(s={"type": "string"}), c={"type": "array", "items": INT})
    arguments = parse_arguments(b'{"a":{"n":1.0},"b":{"s":"x"},"c":[1,2]}')
    result = CompiledSchema.compile(schema).validated(arguments)
    assert result == {"a": {"n": 1}, "b": {"s": "x"}, "c": [1, 2]}
    assert arguments["a"] == {"n": 1.0}
    assert type(arguments["a"]["n"]) is float  # type: ignore[index]
    assert result["b"] is arguments["b"]
    assert result["c"] is arguments["c"]
    assert list(result) == list(arguments)
    assert CompiledSchema.compile(schema).validated(result) is result  # already ints


def test_an_integral_float_beyond_the_exact_range_is_refused_like_the_integer_itself():
    """1e20 at an integer position becomes 10**20, which canonical JSON refuses (R5)."""
    compiled = CompiledSchema.compile(obj(n=INT))
    as_float = compiled.validated(parse_arguments(b'{"n":1e20}'))
    as_integer = compiled.validated(parse_arguments(b'{"n":100000000000000000000}'))
    assert as_float == as_integer == {"n": 10**20}
    for value in (as_float, as_integer):
        with pytest.raises(Rejection) as info:
            canonical_json(value)
        assert info.value.problem.code == "not_canonicalizable"


def test_the_tool_receives_ints_and_the_digest_is_that_of_the_integer_call(harness: Harness):
    """End to end: the tool gets int 2 for 2.0 and 200 for 2e2; the digest matches "2"."""
    tool = FakeTool(returns={"text": "ok"})
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "text": {"type": "string"},
            "count": {"type": "integer", "minimum": 1},
            "lines": {"type": "array", "items": LINE},
        },
        "required": ["text"],
    }
    harness.registry.register(spec(input_schema=schema), tool)
    as_floats = b'{"text":"a","count":2e2,"lines":[{"sku":"t","quantity":2.0}]}'
    as_ints = b'{"text":"a","count":200,"lines":[{"sku":"t","quantity":2}]}'
    first = harness.runtime.run(proposal("echo", as_floats), harness.context())
    second = harness.runtime.run(proposal("echo", as_ints, "call_2"), harness.context())
    assert first.kind == second.kind == "observed"
    assert tool.calls[0] == {"text": "a", "count": 200, "lines": [{"sku": "t", "quantity": 2}]}
    assert type(tool.calls[0]["count"]) is int
    assert type(tool.calls[0]["lines"][0]["quantity"]) is int
    assert first.invocation.canonical == second.invocation.canonical
    assert first.invocation.digest == second.invocation.digest


# --- soundness over the official suite -----------------------------------------------

SUITE = SHARED_DATA / "json-schema-test-suite" / "tests" / "draft2020-12"


def as_floats(value: object) -> object:
    """Every exactly representable integer in ``value`` written as a float (3 → 3.0)."""
    if type(value) is int and abs(value) < 2**53:
        return float(value)
    if isinstance(value, dict):
        return {key: as_floats(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_floats(item) for item in value]
    return value


def turned_to_int(before: object, after: object, path: tuple[str | int, ...] = ()):
    """Yield the path and value of every float ``after`` holds as an int."""
    if type(before) is float and type(after) is int:
        yield path, after
    elif isinstance(before, dict) and isinstance(after, dict):
        for key, item in before.items():
            yield from turned_to_int(item, after[key], (*path, key))
    elif isinstance(before, list) and isinstance(after, list):
        for index, item in enumerate(before):
            yield from turned_to_int(item, after[index], (*path, index))


def replaced(value: object, path: tuple[str | int, ...], new: object) -> object:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    node = copy
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = new
    return copy


@pytest.mark.skipif(
    not SUITE.is_dir(),
    reason=f"JSON Schema Test Suite not found at {SUITE}: the integer test did NOT run",
)
def test_every_position_turned_to_int_is_one_where_the_schema_requires_an_integer():
    """Over the suite's schemas: each coerced position rejects 0.5 more, so it is integer-only.

    Every valid instance is sent with its integers written as floats; a position the plan
    turns back into an int must be one where a non-integral number fails the schema,
    and the result stays valid with the same canonical bytes (R5).
    """
    coerced = 0
    for path in sorted(SUITE.glob("*.json")):
        for block in json.loads(path.read_text(encoding="utf-8")):
            schema = block["schema"]
            if not isinstance(schema, dict) or "localhost:1234" in json.dumps(schema):
                continue
            try:
                compiled = CompiledSchema.compile(schema, assert_format=False)
            except SchemaError:
                continue
            if compiled._integers is None:
                continue
            for test in block["tests"]:
                instance = as_floats(test["data"])
                if not compiled.is_valid(instance):
                    continue
                result = _with_ints(instance, compiled._integers)  # any JSON value
                assert compiled.is_valid(result)
                for where, value in turned_to_int(instance, result):
                    coerced += 1
                    if abs(value) < 2**52:  # beyond, value + 0.5 is not representable
                        probe = replaced(instance, where, value + 0.5)
                        assert not compiled.is_valid(probe), (path.name, block["description"])
    assert coerced > 20


# --- the example packs, which trust their schemas ------------------------------------


@pytest.fixture
def packs(clock):
    """Payments and calendar with enough authority to execute, no confirmation asked."""
    registry = Registry()
    cal = calendar.CalendarBackend()
    cal.create({"calendar_id": "work", "title": "Standup", "date": "2026-07-20", "start": "09:00"})
    calendar.register(registry, cal)
    payments.register(registry, payments.PaymentsBackend())
    policy = GrantPolicy(
        [
            Grant(
                subject=MIRA.id,
                tenant=MIRA.tenant,
                capability="calendar:write",
                actions=frozenset({"create", "modify"}),
            ),
            Grant(
                subject=MIRA.id,
                tenant=MIRA.tenant,
                capability="payments:send",
                actions=frozenset({"create"}),
            ),
        ]
    )
    runtime = Runtime(policy=policy, clock=clock)
    context = CallContext(subject=MIRA, tools=registry.toolset(), timezone="Asia/Shanghai")
    yield lambda name, data: runtime.run(proposal(name, data), context)
    runtime.close()


def test_a_payment_of_1e2_is_a_payment_of_100(packs):
    """payments.send reads its integer amount with int(str(...)): 1E+2 used to crash it."""
    outcome = packs("payments.send", b'{"amount":1E+2,"to":"leo"}')
    assert outcome.kind == "observed", outcome
    assert outcome.result.value["amount"] == 100


def test_an_expected_version_of_1_0_meets_version_1(packs):
    """update_event asserts its expected_version is an int: 1.0 used to fail that assert."""
    data = b'{"calendar_id":"work","event_id":"evt-1","expected_version":1.0,"title":"Moved"}'
    outcome = packs("calendar.update_event", data)
    assert outcome.kind == "observed", outcome
    assert outcome.result.value["version"] == 2


def test_a_duration_of_30_0_is_checked_like_30(packs):
    """The semantic check tests isinstance(duration, int): 30.0 used to slip past it."""
    data = (
        b'{"calendar_id":"work","title":"Late","date":"2026-07-22","start":"23:50",'
        b'"duration_minutes":30.0}'
    )
    outcome = packs("calendar.create_event", data)
    assert outcome.kind == "rejected"
    assert outcome.problem.code == "ends_after_midnight"

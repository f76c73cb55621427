"""The validation gate (R4): what it accepts, what it rejects, and how it says so."""

from __future__ import annotations

from importlib.metadata import version
from types import MappingProxyType

import pytest

from toolbound._errors import Problem, Rejection, SchemaError
from toolbound.gates.validate import DIALECT, CompiledSchema, ValidatorInfo

ORDER_ID = r"^[A-Z]-\d{3}$"

ORDERS_CREATE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["order_id", "lines"],
    "properties": {
        "order_id": {"type": "string", "pattern": ORDER_ID},
        "deliver_on": {"type": "string", "format": "date"},
        "priority": {"enum": ["low", "normal", "high"]},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "lines": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["sku", "quantity"],
                "properties": {
                    "sku": {"type": "string"},
                    "quantity": {"type": "integer", "minimum": 1},
                },
            },
        },
    },
}
VALID = {"order_id": "A-104", "lines": [{"sku": "tea", "quantity": 2}]}


@pytest.fixture(scope="module")
def gate() -> CompiledSchema:
    """Compile the orders.create input schema once for the module."""
    return CompiledSchema.compile(ORDERS_CREATE, where="orders.create@v1 input_schema")


def rejected(gate: CompiledSchema, instance: object) -> Problem:
    """Validate an instance the test expects to fail, and return the problem."""
    with pytest.raises(Rejection) as caught:
        gate.validate(instance)
    assert not gate.is_valid(instance)
    return caught.value.problem


def test_valid_arguments_pass(gate):
    """Arguments that satisfy the schema pass both entry points."""
    assert gate.validate(VALID) is None
    assert gate.is_valid(VALID)


def test_invented_field_is_rejected_with_code_and_pointer(gate):
    """An invented field is rejected as additional_properties, naming the field (R4)."""
    problem = rejected(gate, {**VALID, "discount": 50})
    assert problem.kind == "validation"
    assert problem.code == "additional_properties"
    assert problem.pointer == ""
    assert '"discount"' in problem.message
    assert problem.recoverable
    assert problem.hint is not None
    assert "Remove fields not in the schema" in problem.hint


def test_invented_field_deep_in_an_array_points_at_its_object(gate):
    """An invented field inside an array item points at that item."""
    problem = rejected(gate, {**VALID, "lines": [{"sku": "tea", "quantity": 1, "gift": True}]})
    assert problem.code == "additional_properties"
    assert problem.pointer == "/lines/0"
    assert '"gift"' in problem.message


def test_every_invented_field_is_named(gate):
    """When several fields are invented, the message names each of them."""
    problem = rejected(gate, {**VALID, "a": 1, "b": 2})
    assert '"a"' in problem.message
    assert '"b"' in problem.message


def test_missing_required_field_is_named(gate):
    """A missing required field is rejected as required, naming the field."""
    problem = rejected(gate, {"order_id": "A-104"})
    assert problem.code == "required"
    assert problem.pointer == ""
    assert '"lines"' in problem.message
    assert problem.hint == 'Add the required field "lines".'


def test_wrong_type_deep_in_an_array_points_at_the_value(gate):
    """A wrong type deep inside an array points at the exact value."""
    lines = [{"sku": "tea", "quantity": 1}, {"sku": "cup", "quantity": "2"}]
    problem = rejected(gate, {**VALID, "lines": lines})
    assert problem.code == "type"
    assert problem.pointer == "/lines/1/quantity"
    assert problem.message == "expected integer, got string"


def test_optional_value_of_the_wrong_type_reports_type(gate):
    """An anyOf of types (an optional field) reports the wrong type, not 'anyOf'."""
    problem = rejected(gate, {**VALID, "note": 7})
    assert problem.code == "type"
    assert problem.pointer == "/note"
    assert problem.message == "expected string or null, got integer"


@pytest.mark.parametrize(
    ("instance", "code", "pointer"),
    [
        ({**VALID, "priority": "urgent"}, "enum", "/priority"),
        ({**VALID, "lines": []}, "min_items", "/lines"),
        ({**VALID, "lines": [{"sku": "tea", "quantity": 0}]}, "minimum", "/lines/0/quantity"),
        ([VALID], "type", ""),
    ],
)
def test_codes_follow_the_failing_keyword(gate, instance, code, pointer):
    """The problem code is the failing keyword in snake_case, at the failing location."""
    problem = rejected(gate, instance)
    assert (problem.code, problem.pointer) == (code, pointer)


def test_pointer_escapes_slash_and_tilde():
    """Keys with '/' and '~' are escaped in the pointer as RFC 6901 says."""
    gate = CompiledSchema.compile({"properties": {"a/b~c": {"type": "integer"}}})
    assert rejected(gate, {"a/b~c": "x"}).pointer == "/a~1b~0c"


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("A-104", True),
        ("A-104\n", False),  # Python's $ would match before a final newline
        ("A-١٠٤", False),  # Arabic-Indic digits: Python's \d matches them, ECMA-262's does not
        ("a-104", False),
    ],
)
def test_pattern_follows_ecma_262(gate, value, valid):
    r"""Pattern has ECMA-262 semantics: $ is the very end, \d is ASCII digits only."""
    instance = {**VALID, "order_id": value}
    assert gate.is_valid(instance) is valid
    if not valid:
        problem = rejected(gate, instance)
        assert (problem.code, problem.pointer) == ("pattern", "/order_id")


def test_format_date_is_asserted(gate):
    """Format is asserted by default: 2026-02-30 is not a date."""
    problem = rejected(gate, {**VALID, "deliver_on": "2026-02-30"})
    assert (problem.code, problem.pointer) == ("format", "/deliver_on")
    assert gate.is_valid({**VALID, "deliver_on": "2026-02-28"})


def test_format_can_be_an_annotation():
    """With assert_format=False, format is only an annotation."""
    gate = CompiledSchema.compile({"format": "date"}, assert_format=False)
    assert gate.is_valid("2026-02-30")
    assert gate.info.format_assertion is False


def test_long_values_are_clipped_in_messages(gate):
    """A huge value the model sent is not echoed in full."""
    problem = rejected(gate, {**VALID, "order_id": "X" * 10_000})
    assert len(problem.message) < 300


def test_meta_schema_is_checked_at_compile():
    """A schema that breaks the 2020-12 meta-schema is refused, naming where and the location."""
    with pytest.raises(SchemaError) as caught:
        CompiledSchema.compile({"type": 12}, where="orders.get@v1 input_schema")
    message = str(caught.value)
    assert message.startswith("orders.get@v1 input_schema ")
    assert "'/type'" in message
    assert caught.value.code == "invalid_schema"


def test_meta_schema_error_deep_in_the_schema_names_its_location():
    """A meta-schema error inside properties names the nested schema location."""
    schema = {"properties": {"qty": {"type": "integer", "minimum": "one"}}}
    with pytest.raises(SchemaError, match="'/properties/qty/minimum'"):
        CompiledSchema.compile(schema, where="orders.get@v1 input_schema")


def test_invalid_regex_is_refused_at_compile():
    """A pattern that is not a valid regular expression is refused at compile."""
    with pytest.raises(SchemaError, match="'/properties/id/pattern'"):
        CompiledSchema.compile({"properties": {"id": {"pattern": "["}}})


@pytest.mark.parametrize(
    "dialect",
    [
        "https://example.com/my-meta-schema",
        "http://json-schema.org/draft-03/schema#",
        "http://json-schema.org/schema#",
        7,
    ],
)
def test_unknown_dialect_is_refused(dialect):
    """A $schema naming no dialect the gate knows is refused, naming where and the dialects."""
    with pytest.raises(
        SchemaError,
        match=r"^t@v1 input_schema: \$schema .* not a JSON Schema dialect toolbound validates "
        r"\(draft-04, draft-06, draft-07, 2019-09, 2020-12; none means 2020-12\)",
    ):
        CompiledSchema.compile({"$schema": dialect}, where="t@v1 input_schema")


@pytest.mark.parametrize(
    "dialect", [DIALECT, DIALECT + "#", "http://json-schema.org/draft/2020-12/schema"]
)
def test_2020_12_dialect_is_accepted(dialect):
    """$schema naming 2020-12 (with or without an empty fragment) is accepted."""
    compiled = CompiledSchema.compile({"$schema": dialect, "type": "string"})
    assert compiled.is_valid("x")
    assert compiled.info.dialect == DIALECT


# Each dialect with one schema whose verdict on [1, "x"] differs from 2020-12's, so the
# test shows the dialect's own validator ran: before 2020-12, "items" as an array is a
# tuple and "additionalItems" the rest; 2020-12 refuses an array under "items".
_TUPLE = {"items": [{"type": "integer"}], "additionalItems": {"type": "integer"}}


@pytest.mark.parametrize(
    ("spelling", "recorded"),
    [
        ("http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-04/schema#"),
        ("http://json-schema.org/draft-04/schema", "http://json-schema.org/draft-04/schema#"),
        ("http://json-schema.org/draft-06/schema#", "http://json-schema.org/draft-06/schema#"),
        ("http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-07/schema#"),
        ("https://json-schema.org/draft-07/schema", "http://json-schema.org/draft-07/schema#"),
        (
            "https://json-schema.org/draft/2019-09/schema",
            "https://json-schema.org/draft/2019-09/schema",
        ),
        (
            "https://json-schema.org/draft/2019-09/schema#",
            "https://json-schema.org/draft/2019-09/schema",
        ),
    ],
)
def test_earlier_dialect_is_validated_by_its_own_rules(spelling, recorded):
    """A schema declaring an earlier dialect is validated by it, and its URI is recorded."""
    compiled = CompiledSchema.compile({"$schema": spelling, **_TUPLE})
    assert compiled.info.dialect == recorded
    assert compiled.is_valid([1, 2])
    assert not compiled.is_valid([1, "x"])
    with pytest.raises(Rejection) as caught:
        compiled.validate(["x"])
    assert caught.value.problem.pointer == "/0"


def test_2020_12_refuses_the_tuple_form_of_items():
    """The same tuple schema without $schema is read as 2020-12, whose meta-schema refuses it."""
    with pytest.raises(SchemaError, match="not valid JSON Schema 2020-12 at '/items'"):
        CompiledSchema.compile(_TUPLE)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {
                "$schema": "http://json-schema.org/draft-04/schema#",
                "maximum": 5,
                "exclusiveMaximum": 3,
            },
            r"not valid JSON Schema draft-04 at '/exclusiveMaximum'",
        ),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "type": "strin"},
            r"not valid JSON Schema draft-07 at '/type'",
        ),
    ],
)
def test_schema_invalid_in_its_own_dialect_is_refused(schema, message):
    """A schema is checked against the meta-schema of the dialect it declares."""
    with pytest.raises(SchemaError, match=message):
        CompiledSchema.compile(schema)


def test_draft_04_exclusive_maximum_is_a_flag():
    """In draft-04 exclusiveMaximum is a boolean beside maximum, as that dialect defines."""
    compiled = CompiledSchema.compile(
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "maximum": 3,
            "exclusiveMaximum": True,
        }
    )
    assert compiled.is_valid(2)
    assert not compiled.is_valid(3)


def test_draft_07_definitions_and_integers_pass_through():
    """A draft-07 schema's $ref into definitions resolves offline; its integers become int."""
    compiled = CompiledSchema.compile(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"n": {"$ref": "#/definitions/count"}, "t": _TUPLE},
            "definitions": {"count": {"type": "integer", "minimum": 0}},
        }
    )
    assert compiled.validated({"n": 2.0, "t": [1.0, 3.0]}) == {"n": 2, "t": [1, 3]}
    assert type(compiled.validated({"n": 2.0})["n"]) is int
    with pytest.raises(Rejection) as caught:
        compiled.validate({"n": -1})
    assert caught.value.problem.code == "minimum"


@pytest.mark.parametrize(
    ("schema", "location"),
    [
        ({"$ref": "https://schemas.example.com/money.json"}, "'/$ref'"),
        ({"properties": {"a": {"$ref": "other.json#/$defs/x"}}}, "'/properties/a/$ref'"),
        (
            {"$id": "https://example.com/root.json", "items": {"$ref": "item.json"}},
            "'/items/$ref'",
        ),
    ],
)
def test_remote_ref_is_refused_without_retrieval(schema, location):
    """A $ref to a resource outside the document is refused; nothing is fetched."""
    with pytest.raises(SchemaError) as caught:
        CompiledSchema.compile(schema, where="t@v1 input_schema")
    message = str(caught.value)
    assert location in message
    assert "never retrieves" in message


def test_embedded_resource_resolves_offline():
    """A $ref to a resource the document embeds under $defs with its $id resolves."""
    schema = {
        "$defs": {"money": {"$id": "https://schemas.example.com/money.json", "type": "integer"}},
        "properties": {"amount": {"$ref": "https://schemas.example.com/money.json"}},
    }
    gate = CompiledSchema.compile(schema)
    assert gate.is_valid({"amount": 5})
    assert not gate.is_valid({"amount": "5"})


def test_unresolvable_local_ref_is_refused():
    """A local $ref to nothing is refused at compile, naming its location."""
    with pytest.raises(SchemaError, match="'/properties/a/\\$ref' that does not resolve"):
        CompiledSchema.compile({"properties": {"a": {"$ref": "#/$defs/missing"}}})


@pytest.mark.parametrize("schema", [["not", "an", "object"], {"minimum": float("nan")}, {1: {}}])
def test_non_json_schema_is_refused(schema):
    """A schema that is not a JSON object of JSON values is refused."""
    with pytest.raises(SchemaError):
        CompiledSchema.compile(schema)


def test_info_is_recorded(gate):
    """The dialect, validator name and version, and format assertion are recorded (R4)."""
    assert gate.info == ValidatorInfo(
        dialect=DIALECT,
        name="jsonschema-rs",
        version=version("jsonschema-rs"),
        format_assertion=True,
    )
    assert gate.info.as_json() == {
        "dialect": "https://json-schema.org/draft/2020-12/schema",
        "name": "jsonschema-rs",
        "version": version("jsonschema-rs"),
        "format_assertion": True,
    }


def test_compiled_schema_is_a_private_copy():
    """Editing the caller's schema after compile changes neither schema nor verdicts."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    gate = CompiledSchema.compile(MappingProxyType(schema))
    schema["properties"] = {"n": {"type": "string"}}
    assert gate.is_valid({"n": 1})
    assert gate.schema["properties"] == {"n": {"type": "integer"}}

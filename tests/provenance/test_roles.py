"""Parameter roles: declared on the spec or with define(), else read from the schema."""

from __future__ import annotations

from typing import Annotated

import pytest

from harness import spec
from toolbound._errors import SpecError
from toolbound.define import define
from toolbound.provenance import Role, plan
from toolbound.provenance.roles import infer_role


def obj(**properties: object) -> dict[str, object]:
    return {"type": "object", "properties": properties}


S = {"type": "string"}


@pytest.mark.parametrize(
    ("name", "schema", "role"),
    [
        ("to", S, "destination"),
        ("recipients", {"type": "array", "items": S}, "destination"),
        ("participants", {"type": "array", "items": S}, "destination"),
        ("cc", S, "destination"),
        ("reply", {"type": "string", "format": "email"}, "destination"),
        ("target", {"type": "string", "format": "uri"}, "destination"),
        ("where", {"type": "string", "format": "hostname"}, "destination"),
        ("payee_iban", S, "destination"),
        (
            "beneficiary",
            {"type": "string", "pattern": "^[A-Z]{2}[0-9]{2}[A-Z0-9]+$"},
            "destination",
        ),
        ("channel_id", S, "destination"),
        ("recipient_name", S, "destination"),
        ("file_id", S, "target"),
        ("id", {"type": "integer"}, "target"),
        ("hotel", S, "target"),
        ("street", S, "target"),
        ("new_password", S, "secret"),
        ("apiKey", S, "secret"),
        ("anything", {"type": "string", "writeOnly": True}, "secret"),
        ("subject", S, "content"),
        ("email_subject", S, "content"),
        ("body", S, "content"),
        ("title", S, "content"),
        ("amount", {"type": "number"}, "quantity"),
        ("party_size", {"type": "integer"}, "quantity"),
        ("start_day", {"type": "string", "format": "date"}, "quantity"),
        ("start", S, "quantity"),
        ("role", {"enum": ["view", "edit"]}, None),
        ("urgent", {"type": "boolean"}, None),
    ],
)
def test_roles_are_inferred_from_names_formats_and_patterns(name, schema, role):
    """The inference table: head word, qualifiers, formats, patterns, then the type."""
    assert infer_role((name,), schema) == role


def test_nested_objects_arrays_refs_and_optionals_are_followed():
    """$ref, anyOf with null, arrays of objects: each leaf gets its role at its shape pointer."""
    schema = {
        "type": "object",
        "$defs": {"Person": obj(email=S, note=S)},
        "properties": {
            "guests": {"type": "array", "items": {"$ref": "#/$defs/Person"}},
            "memo": {"anyOf": [S, {"type": "null"}]},
        },
    }
    roles = plan(spec("x.book", input_schema=schema, effect="reversible_write")).roles
    assert roles == {"/guests/email": "destination", "/guests/note": "content", "/memo": "content"}
    planned = plan(spec("x.book", input_schema=schema, effect="reversible_write"))
    assert planned.role("/guests/3/email") == "destination"


def test_declared_roles_win_and_cover_everything_below_them():
    """ToolSpec.roles overrides inference; '/payment' covers '/payment/iban'."""
    schema = obj(payment=obj(iban=S, label=S), code=S)
    planned = plan(
        spec(
            "x.pay",
            input_schema=schema,
            effect="irreversible_write",
            roles={"/payment": "target", "/code": "secret"},
        )
    )
    assert planned.role("/payment/iban") == "target"
    assert planned.role("/payment/label") == "target"
    assert planned.role("/code") == "secret"


def test_define_takes_roles_from_annotations():
    """Annotated[str, Role('destination')] lands in the spec's roles; roles= wins."""

    def notify(who: Annotated[str, Role("destination")], text: str) -> None:
        """Notify someone."""

    tool = define(notify, effect="reversible_write", capabilities=("n:send",))
    assert tool.spec.roles == {"/who": "destination"}
    overridden = define(
        notify, effect="reversible_write", capabilities=("n:send",), roles={"/who": "target"}
    )
    assert overridden.spec.roles == {"/who": "target"}


def test_a_bad_role_declaration_is_refused():
    """Role('boss') and a key without '/' are SpecErrors, raised when the tool is planned."""
    with pytest.raises(SpecError):
        Role("boss")  # type: ignore[arg-type]
    with pytest.raises(SpecError):
        plan(spec("x.y", roles={"to": "destination"}))

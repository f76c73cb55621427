"""R1, R2, R4: registration checks specs once; a request sees only its tool set."""

from __future__ import annotations

import pytest

from harness import spec
from toolbound import Registry
from toolbound._errors import SchemaError, SpecError
from toolbound.testing import FakeTool


def test_bad_schema_fails_at_registration():
    """A schema that is not valid 2020-12 is a developer error at registration."""
    with pytest.raises(SchemaError) as err:
        Registry().register(
            spec(input_schema={"type": "object", "properties": {"a": {"type": 12}}}), FakeTool()
        )
    assert "echo@v1 input_schema" in str(err.value)


def test_output_schema_checked_too():
    """The output schema is checked against the meta-schema as well."""
    with pytest.raises(SchemaError):
        Registry().register(spec(output_schema={"type": "nope"}), FakeTool())


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ({"name": "has space"}, "name"),
        ({"version": ""}, "version"),
        ({"description": " "}, "description"),
        ({"input_schema": {"type": "array"}}, "type"),
        ({"timeout": 0}, "timeout"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"effect": "irreversible_write", "capabilities": ()}, "capability"),
    ],
)
def test_bad_spec_fields(override, fragment):
    """Each malformed spec field is named in the error."""
    with pytest.raises(SpecError, match=fragment):
        Registry().register(spec(**override), FakeTool())


def test_duplicate_version_refused():
    """One name@version is registered once."""
    r = Registry()
    r.register(spec(), FakeTool())
    with pytest.raises(SpecError, match="already registered"):
        r.register(spec(), FakeTool())


def test_several_versions_and_toolsets():
    """Several versions coexist; a tool set holds one per name, looked up exactly."""
    r = Registry()
    r.register(spec(version="v1"), FakeTool())
    r.register(spec(version="v2"), FakeTool())
    assert sorted(r.versions("echo")) == ["v1", "v2"]
    with pytest.raises(SpecError, match="which version"):
        r.toolset("echo")
    ts = r.toolset("echo@v2")
    assert ts.lookup("echo").spec.version == "v2"
    assert ts.lookup("echo", "v2") is not None
    assert ts.lookup("echo", "v1") is None
    assert ts.lookup("ech0") is None  # no fuzzy matching


def test_inline_only_for_sync_reads():
    """A write cannot run inline: its deadline must be able to abandon it."""
    with pytest.raises(SpecError, match="inline"):
        Registry().register(spec(effect="reversible_write"), FakeTool(), inline=True)

"""Declaring resources, templates and prompts beside a pack's tools (toolbound.library)."""

from __future__ import annotations

import pytest

from toolbound import Registry
from toolbound._errors import SpecError
from toolbound.library import Message, prompt, reader, resource, resource_template
from toolbound.results.content import Content, Embedded, Image, Text, block_json


def test_a_resource_takes_its_name_and_description_from_the_function() -> None:
    """@resource: the function's name and docstring summary; its read tool reads the URI."""

    @resource("notes://today", mime_type="text/markdown", capabilities=("notes:read",))
    def today() -> str:
        """Today's notes.

        More detail that is not the description.
        """
        return "# Today"

    assert (today.name, today.description, today.uri) == (
        "today",
        "Today's notes.",
        "notes://today",
    )
    spec, _ = reader(today)
    assert (spec.name, spec.effect, spec.capabilities) == (
        "resources.read.today",
        "read",
        ("notes:read",),
    )
    assert spec.resources is not None
    (touched,) = spec.resources({"uri": "notes://today"})
    assert (touched.kind, touched.id, touched.action) == ("resource", "notes://today", "read")


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("notes://day/{day}/{hour}", r"\['day', 'hour'\], the function the parameters \['day'\]"),
        ("notes://day", r"has the variables \[\], the function the parameters \['day'\]"),
    ],
)  # fmt: skip
def test_a_template_and_its_function_must_name_the_same_variables(
    template: str, error: str
) -> None:
    """A variable without a parameter, or a parameter without a variable, fails at definition."""
    with pytest.raises(SpecError, match=error):

        @resource_template(template)
        def day(day: str) -> str:
            """One day."""
            return day


def test_a_template_matches_uris_segment_by_segment() -> None:
    """{day} is one path segment or more of anything but '/'."""

    @resource_template("notes://day/{day}/summary")
    def summary(day: str) -> str:
        """One day's summary."""
        return day

    assert summary.match("notes://day/2026-12-01/summary") == {"day": "2026-12-01"}
    assert summary.match("notes://day/a/b/summary") is None
    assert summary.match("notes://day/2026-12-01") is None


@pytest.mark.parametrize(
    ("declare", "error"),
    [
        (lambda: resource("no-scheme")(lambda: "x"), "is not an absolute URI"),
        (lambda: resource("a://b", description="d")(lambda x: x), "takes no parameters"),
        (lambda: resource("a://b")(lambda: "x"), "no description"),
        (lambda: resource_template("a://{x}", complete={"y": list})(lambda x: x),
         r"complete= names \['y'\]"),
    ],
)  # fmt: skip
def test_declarations_that_cannot_be_served_fail_at_definition(declare: object, error: str) -> None:
    """A bad URI, parameters on a resource, no description, completing an unknown variable."""
    with pytest.raises(SpecError, match=error):
        declare()  # type: ignore[operator]


def test_prompt_arguments_come_from_the_signature_and_the_docstring() -> None:
    """Each str parameter is an argument; one with a default is optional; Args: describes."""

    @prompt(capabilities=("notes:read",))
    def summarise(day: str, tone: str = "brief") -> str:
        """Summarise a day.

        Args:
            day: The day, as YYYY-MM-DD.
            tone: How long.

        """
        return f"{day} {tone}"

    assert [(a.name, a.required, a.description) for a in summarise.arguments] == [
        ("day", True, "The day, as YYYY-MM-DD."),
        ("tone", False, "How long."),
    ]
    assert summarise.missing({}) == ["day"]
    assert summarise.unknown({"day": "x", "mood": "y"}) == ["mood"]


def test_a_prompt_argument_must_be_a_string() -> None:
    """MCP prompt arguments are strings: an int parameter is refused."""
    with pytest.raises(SpecError, match="prompt argument days must be a str"):

        @prompt()
        def recent(days: int) -> str:
            """Recent notes."""
            return str(days)


def test_a_library_refuses_a_second_uri_prompt_or_reader_name() -> None:
    """The same URI twice, the same prompt twice, or two resources named alike: SpecError."""

    @resource("a://one")
    def one() -> str:
        """One."""
        return "1"

    @resource("a://two", name="one")
    def two() -> str:
        """Two."""
        return "2"

    @prompt()
    def ask() -> list[Message]:
        """Ask."""
        return [Message(content=Text(text="?"))]

    registry = Registry()
    one.register(registry)
    ask.register(registry)
    with pytest.raises(SpecError, match="resource a://one is already registered"):
        one.register(registry)
    with pytest.raises(SpecError, match="named one is already registered"):
        two.register(registry)
    with pytest.raises(SpecError, match="prompt ask is already registered"):
        ask.register(registry)


def test_content_blocks_encode_to_mcp_shapes() -> None:
    """Content's value: text as text, binary data as base64, an embedded resource's contents."""
    content = Content(
        "hello",
        Image(data=b"\x89PNG", mime_type="image/png"),
        Embedded(uri="a://b", data=b"\x00\x01", mime_type="application/octet-stream"),
        external_resource_id="r-1",
    )
    assert content.value == [
        {"type": "text", "text": "hello"},
        {"type": "image", "data": "iVBORw==", "mimeType": "image/png"},
        {
            "type": "resource",
            "resource": {"uri": "a://b", "mimeType": "application/octet-stream", "blob": "AAE="},
        },
    ]
    assert content.external_resource_id == "r-1"
    assert block_json(Text(text="x")) == {"type": "text", "text": "x"}


def test_an_embedded_resource_holds_text_or_data_never_both() -> None:
    """Embedded(text=, data=) and Embedded() are refused; Content() needs a block."""
    with pytest.raises(SpecError, match="exactly one of text and data"):
        Embedded(uri="a://b", text="t", data=b"d")
    with pytest.raises(SpecError, match="exactly one of text and data"):
        Embedded(uri="a://b")
    with pytest.raises(SpecError, match="at least one block"):
        Content()

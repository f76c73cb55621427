"""The fixtures the official MCP conformance suite asks for by name, as a toolbound pack.

Served by ``toolbound mcp-serve --tools conformance_tools:tools`` for
``test_mcp_conformance.py``: tools that answer text, an error, image, audio,
embedded-resource and mixed content (:class:`~toolbound.results.content.Content`),
that report progress and log through their ``ToolContext``; the ``test://``
resources and template; the ``test_*`` prompts, with argument completion. A
toolbound tool cannot sample the client's model or elicit: those scenarios are
listed in ``conformance-expected-failures.json`` with that reason.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

from toolbound import NotCommitted, Registry, ToolSpec
from toolbound.library import Message, prompt, resource, resource_template
from toolbound.results.content import Audio, Content, Embedded, Image, Text

if TYPE_CHECKING:
    from collections.abc import Callable

    from toolbound import ToolContext
    from toolbound._model import JSONObject, JSONValue

CAPABILITY = "conformance:call"
CONFIRMED = "conformance:confirm"
NO_ARGUMENTS: dict[str, object] = {"type": "object", "properties": {}}
# A 1x1 red PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
    "0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
)
# A WAV header and no samples.
WAV = b"RIFF$\x00\x00\x00WAVEfmt " + b"\x00" * 24
EMBEDDED = Embedded(
    uri="test://embedded-resource",
    text="This is an embedded resource content.",
    mime_type="text/plain",
)
WORDS = ("test-value", "testing", "paris", "park")


def _simple_text(_args: JSONObject, _ctx: ToolContext) -> JSONValue:
    return "This is a simple text response for testing."


def _error(_args: JSONObject, _ctx: ToolContext) -> JSONValue:
    msg = "This tool intentionally returns an error for testing"
    raise NotCommitted(msg, code="intentional_error", recoverable=False)


def _reconnection(_args: JSONObject, _ctx: ToolContext) -> JSONValue:
    return "Reconnection test completed."


def _echo_schema_tool(args: JSONObject, _ctx: ToolContext) -> JSONValue:
    return args


def _image(_args: JSONObject, _ctx: ToolContext) -> Content:
    return Content(Image(data=PNG, mime_type="image/png"))


def _audio(_args: JSONObject, _ctx: ToolContext) -> Content:
    return Content(Audio(data=WAV, mime_type="audio/wav"))


def _embedded(_args: JSONObject, _ctx: ToolContext) -> Content:
    return Content(EMBEDDED)


def _mixed(_args: JSONObject, _ctx: ToolContext) -> Content:
    return Content("Multiple content types test:", Image(data=PNG, mime_type="image/png"), EMBEDDED)


async def _logging(_args: JSONObject, ctx: ToolContext) -> JSONValue:
    ctx.log("Tool execution started")
    await asyncio.sleep(0.05)
    ctx.log("Tool processing data")
    await asyncio.sleep(0.05)
    ctx.log("Tool execution completed")
    return "Tool with logging executed successfully"


async def _progress(_args: JSONObject, ctx: ToolContext) -> JSONValue:
    for step in (0, 50, 100):
        ctx.report_progress(step, 100, f"step {step}")
        if step < 100:
            await asyncio.sleep(0.05)
    return "Tool with progress executed successfully"


def _greet(args: JSONObject, _ctx: ToolContext) -> JSONValue:
    return f"Hello, {args['name']}!"


async def _slow_compute(args: JSONObject, _ctx: ToolContext) -> JSONValue:
    seconds = args["seconds"]
    assert isinstance(seconds, int | float)
    await asyncio.sleep(seconds)
    return f"computed {args.get('label', '')} after {seconds}s"


def _confirm_delete(args: JSONObject, _ctx: ToolContext) -> JSONValue:
    return f"deleted {args['filename']}"


async def _failing_job(_args: JSONObject, _ctx: ToolContext) -> JSONValue:
    await asyncio.sleep(1)
    msg = "the job failed, as it always does"
    raise NotCommitted(msg, code="job_failed", recoverable=False)


async def _protocol_error_job(_args: JSONObject, _ctx: ToolContext) -> JSONValue:
    await asyncio.sleep(0.2)
    return {"value": "not the integer the output schema promises"}


FILENAME: dict[str, object] = {
    "type": "object",
    "properties": {"filename": {"type": "string"}},
    "required": ["filename"],
}
GREET: dict[str, object] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
SLOW: dict[str, object] = {
    "type": "object",
    "properties": {"seconds": {"type": "number", "minimum": 0}, "label": {"type": "string"}},
    "required": ["seconds"],
}
VALUE: dict[str, object] = {
    "type": "object",
    "properties": {"value": {"type": "integer"}},
    "required": ["value"],
}
# The tasks extension's fixtures: (name, description, schema, run, task_support,
# output schema).
TASK_TOOLS: tuple[
    tuple[str, str, dict[str, object], Callable[..., object], str, dict[str, object] | None],
    ...,
] = (
    ("greet", "Greets by name, at once.", GREET, _greet, "forbidden", None),
    ("slow_compute", "Sleeps the given seconds, then answers.", SLOW, _slow_compute,
     "optional", None),
    ("failing_job", "Fails after a second; runs only as a task.", NO_ARGUMENTS, _failing_job,
     "required", None),
    ("protocol_error_job", "Answers what its output schema forbids.", NO_ARGUMENTS,
     _protocol_error_job, "optional", VALUE),
    # A person confirms each call (the grant of CONFIRMED says so): as a task, it asks
    # for that confirmation (input_required) before it runs.
    ("confirm_delete", "Deletes a file once a person confirms it.", FILENAME, _confirm_delete,
     "optional", None),
)  # fmt: skip

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}
TOOLS: tuple[tuple[str, str, dict[str, object], Callable[..., object]], ...] = (
    ("test_simple_text", "Returns simple text.", NO_ARGUMENTS, _simple_text),
    ("test_error_handling", "Always fails.", NO_ARGUMENTS, _error),
    ("test_reconnection", "Answers on a resumable SSE stream.", NO_ARGUMENTS, _reconnection),
    ("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", JSON_SCHEMA_2020_12,
     _echo_schema_tool),
    ("test_image_content", "Returns an image.", NO_ARGUMENTS, _image),
    ("test_audio_content", "Returns audio.", NO_ARGUMENTS, _audio),
    ("test_embedded_resource", "Returns an embedded resource.", NO_ARGUMENTS, _embedded),
    ("test_multiple_content_types", "Returns text, an image and a resource.", NO_ARGUMENTS,
     _mixed),
    ("test_tool_with_logging", "Logs three messages.", NO_ARGUMENTS, _logging),
    ("test_tool_with_progress", "Reports progress three times.", NO_ARGUMENTS, _progress),
)  # fmt: skip


@resource("test://static-text", mime_type="text/plain", capabilities=(CAPABILITY,))
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@resource("test://static-binary", mime_type="image/png", capabilities=(CAPABILITY,))
def static_binary() -> bytes:
    """A static binary resource (a PNG)."""
    return PNG


@resource("test://watched-resource", mime_type="text/plain", capabilities=(CAPABILITY,))
def watched_resource() -> str:
    """A resource a client may subscribe to."""
    return "Watched resource content."


def _ids(typed: str) -> list[str]:
    return [i for i in ("123", "456", "789") if i.startswith(typed)]


@resource_template(
    "test://template/{id}/data",
    mime_type="application/json",
    capabilities=(CAPABILITY,),
    complete={"id": _ids},
)
def template_data(id: str) -> str:  # noqa: A002 - the template's variable
    """Data for one id."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@prompt(capabilities=(CAPABILITY,))
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@prompt(
    capabilities=(CAPABILITY,),
    complete={"arg1": lambda typed: [w for w in WORDS if w.startswith(typed)]},
)
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments.

    Args:
        arg1: First test argument.
        arg2: Second test argument.

    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@prompt(capabilities=(CAPABILITY,))
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:  # noqa: N803 - the suite's name
    """A prompt that embeds a resource.

    Args:
        resourceUri: URI of the resource to embed.

    """
    embedded = Embedded(
        uri=resourceUri, text="Embedded resource content for testing.", mime_type="text/plain"
    )
    return [
        Message(content=embedded),
        Message(content=Text(text="Please process the embedded resource above.")),
    ]


@prompt(capabilities=(CAPABILITY,))
def test_prompt_with_image() -> list[Message]:
    """A prompt with an image."""
    return [
        Message(content=Image(data=PNG, mime_type="image/png")),
        Message(content=Text(text="Please analyze the image above.")),
    ]


def basic() -> Registry:
    """For ``--tools conformance_tools:basic``: the four tools whose names only this pack has.

    The gateway's conformance run serves them from here, and the suite's other
    fixtures (same names) from ``conformance_upstream.py``, a plain MCP server.
    """
    return _registry(TOOLS[:4], library=False)


def tools() -> Registry:
    """For ``--tools conformance_tools:tools``: every fixture."""
    return _registry(TOOLS, library=True)


def _registry(
    chosen: tuple[tuple[str, str, dict[str, object], Callable[..., object]], ...],
    *,
    library: bool,
) -> Registry:
    r = Registry()
    for name, description, schema, run in chosen:
        r.register(
            ToolSpec(
                name=name,
                version="v1",
                description=description,
                input_schema=schema,
                effect="read",
                capabilities=(CAPABILITY,),
            ),
            run,  # type: ignore[arg-type]
        )
    if not library:
        return r
    for name, description, schema, run, support, output in TASK_TOOLS:
        r.register(
            ToolSpec(
                name=name,
                version="v1",
                description=description,
                input_schema=schema,
                output_schema=output,
                effect="irreversible_write" if name == "confirm_delete" else "read",
                capabilities=(CONFIRMED,) if name == "confirm_delete" else (CAPABILITY,),
                timeout=120.0,
                task_support=support,  # type: ignore[arg-type]
            ),
            run,  # type: ignore[arg-type]
        )
    for item in (static_text, static_binary, watched_resource, template_data):
        item.register(r)
    for made in (
        test_simple_prompt,
        test_prompt_with_arguments,
        test_prompt_with_embedded_resource,
        test_prompt_with_image,
    ):
        made.register(r)
    return r

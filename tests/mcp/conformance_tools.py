"""The fixture tools the official MCP conformance suite calls by name, as toolbound tools.

Served by ``toolbound mcp-serve --tools conformance_tools:tools`` for
``test_mcp_conformance.py``. A toolbound tool returns a JSON value, which reaches the
client as the untrusted envelope (text) and, with an output schema, as
``structuredContent``; it cannot return image, audio or resource blocks, log, report
progress, sample or elicit — the scenarios that need those are listed in
``conformance-expected-failures.yaml`` with that reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolbound import NotCommitted, Registry, ToolSpec

if TYPE_CHECKING:
    from toolbound import ToolContext
    from toolbound._model import JSONObject, JSONValue

CAPABILITY = "conformance:call"
NO_ARGUMENTS: dict[str, object] = {"type": "object", "properties": {}}


def _simple_text(_args: JSONObject, _ctx: ToolContext) -> JSONValue:
    return "This is a simple text response for testing."


def _error(_args: JSONObject, _ctx: ToolContext) -> JSONValue:
    msg = "This tool intentionally returns an error for testing"
    raise NotCommitted(msg, code="intentional_error", recoverable=False)


def _reconnection(_args: JSONObject, _ctx: ToolContext) -> JSONValue:
    return "Reconnection test completed."


def _echo_schema_tool(args: JSONObject, _ctx: ToolContext) -> JSONValue:
    return args


def tools() -> Registry:
    """For ``--tools conformance_tools:tools``."""
    r = Registry()
    for name, description, schema, run in (
        ("test_simple_text", "Returns simple text.", NO_ARGUMENTS, _simple_text),
        ("test_error_handling", "Always fails.", NO_ARGUMENTS, _error),
        ("test_reconnection", "Answers on a resumable SSE stream.", NO_ARGUMENTS, _reconnection),
        (
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            {
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
            },
            _echo_schema_tool,
        ),
    ):
        r.register(
            ToolSpec(
                name=name,
                version="v1",
                description=description,
                input_schema=schema,
                effect="read",
                capabilities=(CAPABILITY,),
            ),
            run,
        )
    return r

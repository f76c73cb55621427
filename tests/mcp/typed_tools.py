"""Tools that each declare an ``outputSchema``, one per kind of result a client must read.

Served by ``toolbound mcp-serve --tools typed_tools:tools`` to the official TypeScript
SDK client (``node/ts_client.mjs``), which checks every ``structuredContent`` it gets
against the tool's ``outputSchema``::

    typed.read   a read: success, or a validation error for bad arguments
    typed.open   a read of a path: denied outside the granted root
    typed.add    a write a person must confirm: a pending result
    typed.send   a write that loses its answer after it may have committed: outcome unknown
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolbound import CommitUnknown, Registry, ToolSpec
from toolbound._model import Resource

if TYPE_CHECKING:
    from toolbound import ToolContext
    from toolbound._model import JSONObject, JSONValue

COUNT = {
    "type": "object",
    "properties": {"count": {"type": "integer"}, "titles": {"type": "array"}},
    "required": ["count", "titles"],
    "additionalProperties": False,
}


def _read(args: JSONObject, _ctx: ToolContext) -> JSONValue:
    limit = args.get("limit", 2)
    titles = ["one", "two", "three"][: limit if isinstance(limit, int) else 0]
    return {"count": len(titles), "titles": titles}


def _open(args: JSONObject, _ctx: ToolContext) -> JSONValue:
    return {"count": 1, "titles": [str(args["path"])]}


def _add(args: JSONObject, _ctx: ToolContext) -> JSONValue:
    return {"count": 1, "titles": [str(args["title"])]}


def _send(_args: JSONObject, _ctx: ToolContext) -> JSONValue:
    msg = "the mail server closed the connection after DATA"
    raise CommitUnknown(msg)


def _path(args: JSONObject) -> list[Resource]:
    return [Resource(kind="path", id=str(args.get("path", "")), action="read")]


def tools() -> Registry:
    """For ``--tools typed_tools:tools``."""
    r = Registry()

    def spec(name: str, inputs: dict[str, object], **kw: object) -> ToolSpec:
        schema = {"type": "object", "additionalProperties": False, **inputs}
        return ToolSpec(
            name=name,
            version="v1",
            description=f"{name}, for the TypeScript client test.",
            input_schema=schema,
            output_schema=COUNT,
            **kw,  # type: ignore[arg-type]
        )

    r.register(
        spec(
            "typed.read",
            {"properties": {"limit": {"type": "integer", "minimum": 0}}},
            effect="read",
            capabilities=("typed:read",),
        ),
        _read,
    )
    r.register(
        spec(
            "typed.open",
            {"properties": {"path": {"type": "string"}}, "required": ["path"]},
            effect="read",
            capabilities=("typed:open",),
            resources=_path,
        ),
        _open,
    )
    r.register(
        spec(
            "typed.add",
            {"properties": {"title": {"type": "string"}}, "required": ["title"]},
            effect="reversible_write",
            capabilities=("typed:write",),
        ),
        _add,
    )
    r.register(
        spec("typed.send", {"properties": {}}, effect="irreversible_write",
             capabilities=("typed:send",), max_attempts=1),
        _send,
    )  # fmt: skip
    return r

"""A small tool set served by ``toolbound mcp-serve --tools local_tools:tools`` in the tests.

``notes.read`` is a read with an output schema; ``notes.add`` a write whose effect is
counted in a file named by ``TOOLBOUND_TEST_NOTES`` (so a test in another process can
see how often it really ran); ``notes.fail`` always fails before its commit.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from toolbound import NotCommitted, Registry, ToolSpec

if TYPE_CHECKING:
    from toolbound import ToolContext
    from toolbound._model import JSONObject, JSONValue

NOTE = {
    "type": "object",
    "properties": {"title": {"type": "string", "maxLength": 40}},
    "required": ["title"],
    "additionalProperties": False,
}


class Notes:
    """Notes kept in a file, one per line: the effect a test counts."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def titles(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []

    def read(self, _args: JSONObject, _ctx: ToolContext) -> JSONValue:
        return {"titles": self.titles(), "count": len(self.titles())}

    def add(self, args: JSONObject, _ctx: ToolContext) -> JSONValue:
        with self.path.open("a") as f:
            f.write(f"{args['title']}\n")
        return {"added": args["title"], "count": len(self.titles())}

    def fail(self, _args: JSONObject, _ctx: ToolContext) -> JSONValue:
        why = "the notebook is locked"
        raise NotCommitted(why, code="locked", hint="ask the owner to unlock it")


def registry(path: Path) -> Registry:
    notes = Notes(path)
    r = Registry()
    r.register(
        ToolSpec(
            name="notes.read",
            version="v1",
            description="Every note title.",
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            output_schema={
                "type": "object",
                "properties": {
                    "titles": {"type": "array", "items": {"type": "string"}},
                    "count": {"type": "integer"},
                },
                "required": ["titles", "count"],
                "additionalProperties": False,
            },
            effect="read",
            capabilities=("notes:read",),
        ),
        notes.read,
    )
    r.register(
        ToolSpec(
            name="notes.add",
            version="v1",
            description="Add a note.",
            input_schema=NOTE,
            effect="reversible_write",
            capabilities=("notes:write",),
        ),
        notes.add,
    )
    r.register(
        ToolSpec(
            name="notes.fail",
            version="v1",
            description="Always fails.",
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            effect="read",
            capabilities=("notes:read",),
        ),
        notes.fail,
    )
    return r


def tools() -> Registry:
    """For ``--tools local_tools:tools``: the notes in ``$TOOLBOUND_TEST_NOTES``."""
    return registry(Path(os.environ["TOOLBOUND_TEST_NOTES"]))

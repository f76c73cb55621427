"""A tool pack for the service tests.

Every effect is a line in a file, so tests in one process or several can count
exactly how often a write ran.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from toolbound import CommitUnknown, Registry, ToolOutput, ToolSpec

EFFECTS_ENV = "TOOLBOUND_TEST_EFFECTS"


def effects_file() -> Path:
    return Path(os.environ[EFFECTS_ENV])


def effects() -> list[str]:
    path = effects_file()
    return path.read_text().splitlines() if path.exists() else []


def register(registry: Registry) -> None:
    def add(arguments, ctx):
        if arguments["text"] == "slow":
            time.sleep(1.0)
        with effects_file().open("a") as f:
            f.write(f"{arguments['text']}\n")
        if arguments["text"].startswith("lost"):
            msg = "the connection dropped after the note was saved"
            raise CommitUnknown(msg)
        return ToolOutput({"saved": arguments["text"]}, external_resource_id="note")

    def send(arguments, ctx):
        with effects_file().open("a") as f:
            f.write(f"send:{arguments['text']}\n")
        return {"sent": arguments["text"]}

    def lookup(arguments, ctx):
        return {"text": arguments["text"].upper()}

    text_in = {
        "type": "object",
        "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 200}},
        "required": ["text"],
        "additionalProperties": False,
    }
    registry.register(
        ToolSpec(
            name="notes.add",
            version="v1",
            description="Save a note.",
            input_schema=text_in,
            output_schema={
                "type": "object",
                "properties": {"saved": {"type": "string"}},
                "required": ["saved"],
                "additionalProperties": False,
            },
            effect="reversible_write",
            capabilities=("notes:write",),
            idempotency="native_key",
        ),
        add,
    )
    registry.register(
        ToolSpec(
            name="notes.send",
            version="v1",
            description="Send a note to someone.",
            input_schema=text_in,
            effect="irreversible_write",
            capabilities=("notes:send",),
            idempotency="native_key",
        ),
        send,
    )
    registry.register(
        ToolSpec(
            name="notes.shout",
            version="v1",
            description="Upper-case a text.",
            input_schema=text_in,
            effect="read",
            capabilities=("notes:read",),
        ),
        lookup,
        inline=True,
    )

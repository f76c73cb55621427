"""A write whose answer is always lost, and a query hook that finds out what it did."""

from __future__ import annotations

from service_pack import effects, effects_file

from toolbound import ToolSpec
from toolbound.execution.reconcile import RemoteCommitted, RemoteNotCommitted
from toolbound.execution.tool import CommitUnknown


def register(registry) -> None:
    def save(arguments, _ctx):
        if arguments["text"] != "never":
            with effects_file().open("a") as f:
                f.write(f"{arguments['text']}\n")
        msg = "the answer was lost"
        raise CommitUnknown(msg)

    def asked(call):
        text = call.arguments["text"]
        if text in effects():
            return RemoteCommitted(evidence={"found": text})
        return RemoteNotCommitted(evidence={"absent": text})

    registry.register(
        ToolSpec(
            name="notes.save",
            version="v1",
            description="Save a note; the answer is always lost.",
            input_schema={
                "type": "object",
                "properties": {"text": {"type": "string", "minLength": 1}},
                "required": ["text"],
                "additionalProperties": False,
            },
            effect="reversible_write",
            capabilities=("notes:write",),
            # A short deadline: "not committed" may be found once it has passed (R9).
            timeout=0.5,
            idempotency="native_key",
            query=asked,
        ),
        save,
    )

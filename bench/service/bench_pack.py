"""The read tool the service benchmark calls: the same function as the bare endpoint."""

from __future__ import annotations

from bare_app import shout

from toolbound import Registry, ToolSpec


def register(registry: Registry) -> None:
    """``bench.shout@v1``, an inline read."""
    registry.register(
        ToolSpec(
            name="bench.shout",
            version="v1",
            description="Upper-case a text.",
            input_schema={
                "type": "object",
                "properties": {"text": {"type": "string", "maxLength": 200}},
                "required": ["text"],
                "additionalProperties": False,
            },
            effect="read",
            capabilities=("bench:read",),
        ),
        lambda arguments, _ctx: shout(arguments),
        inline=True,
    )

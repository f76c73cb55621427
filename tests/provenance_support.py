"""Shared helpers of the provenance tests: a write's spec, a session, the preset's decision."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from harness import MIRA, spec
from toolbound.gates.authorize import AuthzRequest
from toolbound.provenance import Provenance, guard_writes

if TYPE_CHECKING:
    from toolbound import ToolSpec
    from toolbound.gates.authorize import Decision
    from toolbound.provenance import FlowPolicy

NOW = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)
S = {"type": "string"}


def write(name: str, **properties: object) -> ToolSpec:
    """A write tool with these input properties (nothing declared: roles are inferred)."""
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    return spec(name, input_schema=schema, effect="reversible_write")


def session(prompt: str, *results: tuple[ToolSpec, object], **options: object) -> Provenance:
    """An index holding the user's prompt, then each ``(spec, value)`` result."""
    index = Provenance(**options)  # type: ignore[arg-type]
    index.add_user(prompt)
    for n, (tool, value) in enumerate(results):
        index.add_result(tool, f"inv-{n}", value)  # type: ignore[arg-type]
    return index


def decide(
    tool: ToolSpec,
    arguments: dict[str, object],
    index: Provenance,
    policy: FlowPolicy | None = None,
) -> Decision:
    """What the preset (or ``policy``) decides for this call in this session."""
    return (policy or guard_writes()).authorize(
        AuthzRequest(
            subject=MIRA,
            spec=tool,
            arguments=arguments,  # type: ignore[arg-type]
            now=NOW,
            provenance=index.examine(arguments),  # type: ignore[arg-type]
        )
    )

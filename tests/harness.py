"""Shared test helpers: subjects, small specs and grants, a runtime harness.

Imported as ``from harness import …`` (``tests`` is on pytest's ``pythonpath``);
fixtures live in ``conftest.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from toolbound import (
    CallContext,
    FixedClock,
    Grant,
    GrantPolicy,
    Proposal,
    Registry,
    Runtime,
    Subject,
    ToolSpec,
)

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

MIRA = Subject(id="mira", tenant="acme", session="s-1")
LEO = Subject(id="leo", tenant="acme", session="s-9")


def proposal(name: str, arguments: object | bytes, call_id: str = "call_1") -> Proposal:
    raw = arguments if isinstance(arguments, bytes) else json.dumps(arguments).encode()
    return Proposal(name=name, arguments=raw, proposal_id=call_id)


def spec(name: str = "echo", **overrides: object) -> ToolSpec:
    """A small spec: one string field, strict, with an output schema."""
    fields: dict[str, object] = {
        "name": name,
        "version": "v1",
        "description": f"The {name} test tool.",
        "input_schema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        },
        "output_schema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        },
        "effect": "read",
        "capabilities": ("test:use",),
        "timeout": 2.0,
    }
    fields.update(overrides)
    return ToolSpec(**fields)  # type: ignore[arg-type]


def grant(subject: Subject = MIRA, **overrides: object) -> Grant:
    fields: dict[str, object] = {
        "subject": subject.id,
        "tenant": subject.tenant,
        "capability": "test:use",
        "actions": frozenset({"read", "create", "modify", "delete"}),
    }
    fields.update(overrides)
    return Grant(**fields)  # type: ignore[arg-type]


class Harness:
    """A registry, a runtime and a context for one subject."""

    def __init__(self, clock: FixedClock, *grants: Grant, **runtime_kw: object) -> None:
        self.registry = Registry()
        self.clock = clock
        self.grants = list(grants) or [grant()]
        self.runtime_kw = runtime_kw
        self._runtime: Runtime | None = None

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = Runtime(
                policy=GrantPolicy(self.grants),
                clock=self.clock,
                **self.runtime_kw,  # type: ignore[arg-type]
            )
        return self._runtime

    def context(self, subject: Subject = MIRA, **kw: object) -> CallContext:
        return CallContext(subject=subject, tools=self.registry.toolset(), **kw)  # type: ignore[arg-type]

    def run(self, name: str, arguments: object | bytes, subject: Subject = MIRA, **kw: object):
        return self.runtime.run(proposal(name, arguments), self.context(subject, **kw))

    def close(self) -> None:
        if self._runtime is not None:
            self._runtime.close()

"""An MCP server built with the SDK's ``MCPServer`` (FastMCP before mcp 2), over ``Client``.

The server is called in process through the official client. Each kit tool becomes a
typed async function, as the SDK's docs write tools: the parameters come from the input
schema's properties, and the SDK builds its argument model from that signature.

Two rows. :class:`MCPServerDefaults` writes plain types (``str``, ``float``, ``int``,
``bool``). :class:`MCPServerGuarded` writes the schema's constraints too (``Literal``
for an enum, ``datetime.date`` for ``format: date``, bounds, patterns and lengths as a
pydantic ``Field``) and gives the client the tool's timeout.

MCP carries a call's arguments as a JSON object, so the host parses the model's text
first, as hosts do, with ``json.loads``; text that does not parse to an object cannot
be sent at all, and the case is not applicable. MCP has no approval step, no grants
and no idempotency key: the subject, the grants and a proposal's key reach nothing.
It has no model turn, no agent loop and no trace a client can read either: those
cases are not applicable, each with its reason.
"""

from __future__ import annotations

import datetime as dt
import inspect
import json
from importlib.metadata import version
from typing import TYPE_CHECKING, Annotated, Any, Literal

from tool_runtime_conformance.adapter import CUT_OFF, LoopObservation, NotApplicable, Observation
from tool_runtime_conformance.adapters._cancel import Cancelled, run_cancellable

try:
    from mcp import Client
    from mcp.server.mcpserver import MCPServer
    from pydantic import Field
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = "this adapter needs the MCP SDK: pip install 'tool-runtime-conformance[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Coroutine, Mapping, Sequence

    from tool_runtime_conformance.adapter import Setup
    from tool_runtime_conformance.cases import Propose, ToolDef
    from tool_runtime_conformance.world import KitTool

__all__ = ["MCPServerDefaults", "MCPServerGuarded"]

_TYPES: dict[str, object] = {
    "string": str,
    "number": float,
    "integer": int,
    "boolean": bool,
    "object": dict[str, Any],
    "array": list[Any],
}
_BOUNDS = {
    "minimum": "ge",
    "maximum": "le",
    "exclusiveMinimum": "gt",
    "exclusiveMaximum": "lt",
    "pattern": "pattern",
    "minLength": "min_length",
    "maxLength": "max_length",
}


def _annotation(schema: Mapping[str, Any], *, constrained: bool) -> object:
    """The Python type a tool author would write for one property."""
    base = _TYPES.get(str(schema.get("type")), Any)
    if not constrained:
        return base
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    if schema.get("format") == "date":
        base = dt.date
    bounds = {arg: schema[key] for key, arg in _BOUNDS.items() if key in schema}
    return Annotated[base, Field(**bounds)] if bounds else base


def _function(spec: ToolDef, tool: KitTool, *, constrained: bool) -> Callable[..., object]:
    """A typed async function whose signature is the tool's input schema."""

    async def call(**arguments: object) -> dict[str, object]:
        plain = {k: v.isoformat() if isinstance(v, dt.date) else v for k, v in arguments.items()}
        return await tool.acall(plain)

    properties: Mapping[str, Mapping[str, Any]] = spec.input_schema.get("properties", {})  # type: ignore[assignment]
    required = set(spec.input_schema.get("required", []))  # type: ignore[call-overload]
    parameters = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=_annotation(schema, constrained=constrained),
            default=inspect.Parameter.empty if name in required else None,
        )
        for name, schema in properties.items()
    ]
    call.__signature__ = inspect.Signature(parameters, return_annotation=dict[str, object])  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in parameters} | {
        "return": dict[str, object]
    }
    return call


NO_TURN = (
    "MCP has no model turn: a host sends each tools/call on its own, and the order and "
    "overlap of several are the host's"
)
NO_LOOP = "MCP has no agent loop: the host runs the loop and sets its limits"
NO_TRACE = "MCP gives a client no record of the calls a server ran"


class MCPServerDefaults:
    """MCPServer tools written with plain types; the client waits as long as it takes."""

    name = "mcp MCPServer (defaults)"
    versions: Mapping[str, str] = {"mcp": version("mcp")}
    constrained = False

    def start(self, setup: Setup) -> None:
        """An MCPServer with one typed tool per kit tool."""
        self.server = MCPServer("kit", log_level="CRITICAL")  # tool crashes are the verdicts
        self.timeouts = {spec.name: spec.timeout_seconds for spec, _ in setup.tools}
        for spec, tool in setup.tools:
            self.server.add_tool(
                _function(spec, tool, constrained=self.constrained),
                name=spec.name,
                description=spec.description,
            )

    def propose(self, proposal: Propose, cancel: threading.Event) -> Observation:
        """The host parses the model's text, then calls the tool through the client."""
        if not proposal.complete:
            raise NotApplicable(CUT_OFF)
        try:
            arguments = json.loads(proposal.arguments)
        except ValueError as exc:
            reason = f"MCP carries a parsed JSON object; this text does not parse ({exc})"
            raise NotApplicable(reason) from exc
        if not isinstance(arguments, dict):
            reason = "MCP carries a JSON object; this text parses to another JSON value"
            raise NotApplicable(reason)
        timeout = self.timeouts.get(proposal.tool) if self.constrained else None
        try:
            return run_cancellable(self._call(proposal.tool, arguments, timeout), cancel)
        except Cancelled:
            return Observation(kind="cancelled", text="")
        except Exception as exc:  # noqa: BLE001 - the host reports what the client raised
            return Observation(kind="failed", text=str(exc), detail=repr(exc))

    def _call(
        self, name: str, arguments: dict[str, Any], timeout: float | None
    ) -> Coroutine[Any, Any, Observation]:
        async def call() -> Observation:
            async with Client(self.server) as client:
                result = await client.call_tool(name, arguments, read_timeout_seconds=timeout)
            text = "\n".join(getattr(c, "text", "") for c in result.content)
            return Observation(kind="failed" if result.is_error else "ran", text=text)

        return call()

    def approve(self, call_id: str, shown: str) -> Observation:  # noqa: ARG002
        """MCP has no approval step: nothing waits for a person."""
        return Observation(kind="failed", text="", detail=f"nothing waits for approval: {call_id}")

    def deny(self, call_id: str) -> Observation:
        """MCP has no approval step: nothing waits for a person."""
        return Observation(kind="failed", text="", detail=f"nothing waits for approval: {call_id}")

    def propose_turn(
        self,
        calls: Sequence[Propose],  # noqa: ARG002
        cancel: threading.Event,  # noqa: ARG002
        *,
        interleaved: bool,  # noqa: ARG002
    ) -> Mapping[str, Observation]:
        """MCP has no model turn: several calls' order and overlap are the host's choice."""
        raise NotApplicable(NO_TURN)

    def run_loop(
        self,
        turns: Sequence[Sequence[Propose]],  # noqa: ARG002
        budgets: Mapping[str, int],  # noqa: ARG002
    ) -> LoopObservation:
        """MCP has no agent loop: the host runs the loop and bounds it."""
        raise NotApplicable(NO_LOOP)

    def trace(self) -> Sequence[Mapping[str, object]]:
        """An MCP server keeps no record of calls that a client can read."""
        raise NotApplicable(NO_TRACE)

    def close(self) -> None:
        """Each call opened and closed its own client session."""


class MCPServerGuarded(MCPServerDefaults):
    """MCPServer tools written with the schema's constraints, and the client's timeout."""

    name = "mcp MCPServer (typed constraints, timeout)"
    constrained = True

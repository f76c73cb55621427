"""A ``resources/read`` as a read through the runtime, for upstream and local resources (R6, R11).

The resource's read tool (one :class:`~toolbound.registry.RegisteredTool`) runs as a
call of its own: authorized with ``Resource(kind="resource", id=URI)`` so a grant's
scope applies, traced and counted like any tool read. Its value is a list of MCP
resource contents; each is bounded by ``limit`` bytes (a larger one is replaced by a
note, and the cut recorded) and marked untrusted tool data.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Final, cast

from toolbound._model import Proposal
from toolbound.mcp.content import block_size, mark_contents, summary
from toolbound.pipeline.runtime import CallContext
from toolbound.registry import ToolSet
from toolbound.results.encode import TRUST_MARK
from toolbound.results.redact import Cut

try:
    import mcp_types as types
    from mcp.shared.exceptions import MCPError
    from pydantic import TypeAdapter
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from toolbound._model import JSONObject, Subject
    from toolbound._outcome import Observed
    from toolbound.pipeline.runtime import Runtime
    from toolbound.registry import RegisteredTool

__all__ = ["RESOURCE_NOT_FOUND", "not_found", "read_through", "run_on"]

RESOURCE_NOT_FOUND: Final = types.INVALID_PARAMS
"""The JSON-RPC code MCP gives an unknown resource: -32602, with the URI in ``data.uri``
(the specification's 2025-11-25 revision; -32002 before it)."""

_CONTENTS = TypeAdapter(list[types.TextResourceContents | types.BlobResourceContents])
_Contents = types.TextResourceContents | types.BlobResourceContents


def not_found(uri: str) -> MCPError:
    """The error for a resource that does not exist or that the caller may not read."""
    return MCPError(
        code=RESOURCE_NOT_FOUND, message=f"Resource not found: {uri}", data={"uri": uri}
    )


async def read_through(
    runtime: Runtime,
    subject: Subject,
    reader: RegisteredTool,
    uri: str,
    *,
    limit: int,
    source: str,
) -> types.ReadResourceResult:
    """Read ``uri`` with ``reader`` as ``subject``; ``source`` names where it comes from."""
    outcome = await run_on(runtime, subject, reader, uri)
    contents = _CONTENTS.validate_python(outcome.result.value)
    kept, cuts = _bounded(contents, limit=limit, source=source)
    marked = mark_contents(kept)
    outcome.trace.record(
        "resource_contents",
        uri=uri,
        contents=[summary(_as_block(c)) for c in marked],
        cuts=cuts,
    )
    return types.ReadResourceResult(contents=marked)


async def run_on(runtime: Runtime, subject: Subject, tool: RegisteredTool, uri: str) -> Observed:
    """Run a resource tool (a read, a subscription) on ``uri`` as ``subject``.

    A refusal or failure is an MCP error carrying toolbound's envelope.
    """
    proposal = Proposal(
        name=tool.spec.name,
        arguments=json.dumps({"uri": uri}).encode(),
        proposal_id="mcp-resource-" + os.urandom(8).hex(),
    )
    context = CallContext(subject=subject, tools=ToolSet([tool]))
    outcome = await runtime.arun(proposal, context)
    if outcome.kind != "observed":
        payload = outcome.message.payload
        error = cast("JSONObject", payload.get("error") or payload)
        raise MCPError(
            code=types.INVALID_PARAMS,
            message=f"{error.get('code', outcome.kind)}: {error.get('message', '')}",
            data=payload,
        )
    return outcome


def _bounded(
    contents: list[_Contents], *, limit: int, source: str
) -> tuple[list[_Contents], list[Cut]]:
    kept: list[_Contents] = []
    cuts: list[Cut] = []
    for index, item in enumerate(contents):
        size = block_size(_as_block(item))
        if size <= limit:
            kept.append(item)
            continue
        detail = (
            f"resource {item.uri} of {size} bytes from {source} is over its "
            f"max_content_bytes of {limit}; it was not passed on"
        )
        cuts.append(Cut(pointer=f"/contents/{index}", reason="truncated", detail=detail))
        note = json.dumps({"type": "content_cut", "trust": TRUST_MARK, "detail": detail})
        kept.append(
            types.TextResourceContents(uri=item.uri, mime_type="application/json", text=note)
        )
    return kept, cuts


def _as_block(item: _Contents) -> types.ContentBlock:
    return types.EmbeddedResource(type="resource", resource=item)

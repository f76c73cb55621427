"""What a downstream request lends the upstream call it causes: its progress token.

:class:`~toolbound.mcp.server.GuardedServer` sets :data:`PROGRESS` for the length of
one ``tools/call`` whose client asked for progress (``_meta.progressToken``);
:class:`~toolbound.mcp.upstream.UpstreamTool` forwards each progress notification of
its upstream request there. A context variable, because the call passes through the
runtime (which knows nothing of MCP) between the two. Cancellation needs no such
channel: the client's ``notifications/cancelled`` cancels the server's handler, the
cancellation unwinds through the runtime into the upstream request, and the SDK's
client tells the upstream (``notifications/cancelled``) as it abandons the request.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol

__all__ = ["PROGRESS", "ProgressSink", "progress_token"]


class ProgressSink(Protocol):
    """Sends one progress notification to the client's token."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        """Report ``progress`` (of ``total``, if known), with an optional message."""
        ...


PROGRESS: ContextVar[ProgressSink | None] = ContextVar("toolbound_mcp_progress", default=None)
"""Where the current downstream call's progress goes, if its client asked for it."""


def progress_token(meta: object) -> str | int | None:
    """The progress token in a request's ``_meta``, under either spelling the SDK may keep."""
    if not isinstance(meta, dict):
        return None
    token = meta.get("progress_token", meta.get("progressToken"))
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None

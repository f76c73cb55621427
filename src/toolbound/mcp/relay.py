"""What a downstream request lends the upstream call it causes, and what flows back.

:class:`~toolbound.mcp.server.GuardedServer` sets two context variables for the
length of one ``tools/call``: :data:`PROGRESS`, when its client asked for progress
(``_meta.progressToken``), and :data:`CALLER`, the downstream request itself (its
per-request session and connection). :class:`~toolbound.mcp.upstream.UpstreamTool`
forwards each progress notification of its upstream request to the first and
registers the second with its upstream while the call is in flight, so that what
the upstream asks or says meanwhile — a sampling or elicitation request, a log
message — reaches the client whose call caused it (:mod:`toolbound.mcp.passage`).
Context variables, because the call passes through the runtime (which knows nothing
of MCP) between the two.

Cancellation needs no such channel: the client's ``notifications/cancelled`` cancels
the server's handler, the cancellation unwinds through the runtime into the upstream
request, and the SDK's client tells the upstream (``notifications/cancelled``) as
it abandons the request.

:data:`LOG_LEVELS` keeps each client connection's ``logging/setLevel``: a relayed
log message below it is not sent (:func:`admits`). On a 2026-07-28 connection there
is no such request: a call's own ``_meta`` opts in to a level (:meth:`Caller.hears`).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol
from weakref import WeakKeyDictionary

try:
    from mcp.server.connection import allowed_log_levels
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from toolbound._model import Subject

__all__ = [
    "CALLER",
    "LOG_LEVELS",
    "PROGRESS",
    "Caller",
    "ProgressSink",
    "admits",
    "caller_of",
    "connection_of",
    "progress_token",
]


class ProgressSink(Protocol):
    """Sends one progress notification to the client's token."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        """Report ``progress`` (of ``total``, if known), with an optional message."""
        ...


PROGRESS: ContextVar[ProgressSink | None] = ContextVar("toolbound_mcp_progress", default=None)
"""Where the current downstream call's progress goes, if its client asked for it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Caller:
    """The downstream ``tools/call`` an upstream call serves.

    ``session`` is the SDK's per-request server session (a request sent with
    ``related_request_id`` rides this call's response stream); ``connection`` the
    client's connection (its log level, its subscriptions).
    """

    session: Any
    connection: Any
    request_id: str | int | None
    subject: Subject
    opted_in: frozenset[str] | None = None
    """On a 2026-07-28 connection, the log levels this request opted in to (``_meta``);
    ``None`` on a 2025-era one, where ``logging/setLevel`` decides (:func:`admits`)."""

    def hears(self, level: str) -> bool:
        """Whether a log message at ``level`` may be sent for this call."""
        if self.opted_in is not None:
            return level in self.opted_in
        return admits(self.connection, level)


CALLER: ContextVar[Caller | None] = ContextVar("toolbound_mcp_caller", default=None)
"""The downstream call in progress, if it came over MCP."""

LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""MCP's log levels (RFC 5424's), least severe first."""
DEFAULT_LEVEL: Final = "info"
"""The level for a client that never sent ``logging/setLevel``."""

LOG_LEVELS: WeakKeyDictionary[Any, str] = WeakKeyDictionary()
"""Each client connection's ``logging/setLevel``, for as long as the connection lives."""


def caller_of(ctx: Any, subject: Subject) -> Caller:  # noqa: ANN401 - the SDK's request context
    """The :class:`Caller` of one SDK request context, run as ``subject``."""
    version = str(ctx.protocol_version)
    return Caller(
        session=ctx.session,
        connection=connection_of(ctx.session),
        request_id=ctx.request_id,
        subject=subject,
        opted_in=frozenset(allowed_log_levels(version, ctx.meta))
        if version in MODERN_PROTOCOL_VERSIONS
        else None,
    )


def connection_of(session: Any) -> Any:  # noqa: ANN401 - the SDK's session and connection
    """The client connection a per-request session belongs to.

    The SDK gives each request a session of its own and keeps the connection (which
    outlives them: a log level, subscriptions) on it without a public accessor.
    """
    return getattr(session, "_connection", session)


def admits(connection: object, level: str) -> bool:
    """Whether a log message at ``level`` may go to ``connection`` (its level or above)."""
    wanted = LOG_LEVELS.get(connection, DEFAULT_LEVEL)
    if level not in LEVELS or wanted not in LEVELS:
        return False
    return LEVELS.index(level) >= LEVELS.index(wanted)


def progress_token(meta: object) -> str | int | None:
    """The progress token in a request's ``_meta``, under either spelling the SDK may keep."""
    if not isinstance(meta, dict):
        return None
    token = meta.get("progress_token", meta.get("progressToken"))
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None

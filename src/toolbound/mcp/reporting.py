"""A tool's progress and log messages, relayed to the MCP client that called it (R18).

For the length of one ``tools/call``, :func:`relaying` sets
:data:`~toolbound.execution.tool.REPORTER`, so the call's
:class:`~toolbound.ToolContext` reports here::

    ctx.report_progress(...)   notifications/progress, when the request carried a
                               progressToken (none: dropped)
    ctx.log(...)               notifications/message, when the level is at least the
                               one the client set (logging/setLevel; "info" until it
                               does; on 2026-07-28, the level the request opted in to)

A sync tool reports from a worker thread: each report is queued onto the event loop
and one sender sends them in order, on the call's own stream; the call's result
goes back only once every report before it has been sent. The call's trace records
how many were sent and dropped (``tool_reports``), not what they said (R14).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast, get_args

from toolbound.execution.tool import REPORTER, LogLevel, Reporter
from toolbound.mcp.relay import DEFAULT_LEVEL, LOG_LEVELS, connection_of

try:
    from mcp.shared.exceptions import MCPDeprecationWarning
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from contextvars import Token

    from mcp.server.context import ServerRequestContext

    from toolbound._model import JSONValue
    from toolbound.mcp.relay import ProgressSink
    from toolbound.trace import Trace

__all__ = ["DEFAULT_LOG_LEVEL", "LogLevels", "Relaying", "Reports", "relaying"]

DEFAULT_LOG_LEVEL: Final[LogLevel] = DEFAULT_LEVEL
"""What a client gets until it sets a level."""
_RANK: Final = {level: rank for rank, level in enumerate(get_args(LogLevel))}
_DRAIN_SECONDS: Final = 5.0  # a client that stops reading must not hold the result forever
_LOG = logging.getLogger("toolbound.mcp")


class LogLevels:
    """The least severe level each client connection wants (``logging/setLevel``).

    Kept in :data:`toolbound.mcp.relay.LOG_LEVELS`, the one table per connection: a
    tool's own log messages and a gateway's relayed upstream ones read the same level.
    """

    def set(self, ctx: ServerRequestContext[Any, Any], level: str) -> None:
        """Remember ``level`` for the connection ``ctx`` belongs to."""
        if level in _RANK:
            LOG_LEVELS[connection_of(ctx.session)] = level

    def get(self, ctx: ServerRequestContext[Any, Any]) -> LogLevel:
        """The level set for the connection ``ctx`` belongs to, or the default.

        On a 2026-07-28 connection each request opts in with its own level, which
        the SDK applies: every level is passed to it.
        """
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return "debug"
        return cast("LogLevel", LOG_LEVELS.get(connection_of(ctx.session), DEFAULT_LOG_LEVEL))


@dataclass(slots=True)
class Reports:
    """How many of one call's reports were sent, and how many dropped.

    Dropped: progress without a token, a log below the level, a report undeliverable.
    """

    progress: int = 0
    logs: int = 0
    dropped: int = 0

    def record(self, trace: Trace) -> None:
        """Add a ``tool_reports`` event to the call's trace, if the tool reported at all."""
        if self.progress or self.logs or self.dropped:
            trace.record("tool_reports", progress=self.progress, logs=self.logs,
                         dropped=self.dropped)  # fmt: skip


class _Relay:
    """A :class:`~toolbound.execution.tool.Reporter` that queues reports for one sender.

    The queue and its sender start with the first report: most calls report nothing,
    and those cost neither a task nor a wake-up of the loop.
    """

    def __init__(
        self,
        ctx: ServerRequestContext[Any, Any],
        progress: ProgressSink | None,
        level: LogLevel,
    ) -> None:
        self.reports = Reports()
        self._ctx = ctx
        self._progress = progress
        self._least = _RANK[level]
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[tuple[Any, ...] | None] | None = None
        self._sender: asyncio.Task[None] | None = None
        # Set by the thread that reports, read on the loop's thread once the tool has
        # returned: the tool's return follows its last report.
        self._used = False
        self._drained = False

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self._put(("progress", progress, total, message) if self._progress else ("drop",))

    def log(self, level: LogLevel, data: JSONValue, logger: str | None) -> None:
        wanted = _RANK.get(level, -1) >= self._least
        self._put(("log", level, data, logger) if wanted else ("drop",))

    async def drain(self) -> None:
        """Send every report made so far, then stop the sender (none: nothing to wait for)."""
        if not self._used:
            self._drained = True  # a report made after the call has ended goes nowhere
            return
        # Through the loop's queue as well, so it comes after every report made before.
        self._put(None)
        finished = self._loop.create_future()
        self._loop.call_soon_threadsafe(self._after_sender, finished)
        try:
            await asyncio.wait_for(asyncio.shield(finished), _DRAIN_SECONDS)
        except TimeoutError:
            self._cancel()  # the result goes back; the reports still queued are dropped
        except asyncio.CancelledError:
            self._cancel()
            raise

    def _put(self, item: tuple[Any, ...] | None) -> None:
        self._used = True
        with contextlib.suppress(RuntimeError):  # the loop is closing: nobody to tell
            self._loop.call_soon_threadsafe(self._enqueue, item)

    def _enqueue(self, item: tuple[Any, ...] | None) -> None:
        # On the loop's thread, in the order the reports were made.
        if self._queue is None:
            if self._drained:
                return
            self._queue = asyncio.Queue()
            self._sender = self._loop.create_task(self._send_all(self._queue))
        self._queue.put_nowait(item)

    def _after_sender(self, finished: asyncio.Future[None]) -> None:
        def settle(_: object = None) -> None:
            if not finished.done():
                finished.set_result(None)

        sender = self._sender
        if sender is None or sender.done():
            settle()
        else:
            sender.add_done_callback(settle)

    def _cancel(self) -> None:
        if self._sender is not None:
            self._sender.cancel()

    async def _send_all(self, queue: asyncio.Queue[tuple[Any, ...] | None]) -> None:
        # Counted here, on the loop's thread only.
        reports = self.reports
        while (item := await queue.get()) is not None:
            if item[0] == "drop":
                reports.dropped += 1
                continue
            try:
                await self._send(item)
            except Exception as exc:  # noqa: BLE001 - a lost report must not fail the call
                _LOG.debug("a tool's report was not delivered: %r", exc)
                reports.dropped += 1
                continue
            if item[0] == "progress":
                reports.progress += 1
            else:
                reports.logs += 1

    async def _send(self, item: tuple[Any, ...]) -> None:
        if item[0] == "progress":
            assert self._progress is not None  # noqa: S101 - only queued with one
            await self._progress(item[1], item[2], item[3])
            return
        with warnings.catch_warnings():
            # Logging is deprecated from 2026-07-28 (SEP-2577); older clients still use it.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await self._ctx.session.send_log_message(
                item[1], item[2], item[3], related_request_id=self._ctx.request_id
            )


def relaying(
    ctx: ServerRequestContext[Any, Any] | None,
    progress: ProgressSink | None,
    levels: LogLevels,
) -> Relaying:
    """Relay the reports of the tool calls made inside to the client of ``ctx``.

    ``progress`` is where progress goes (the client's token), if anywhere. The
    :class:`Reports` the block is given are complete once the block has ended.
    """
    return Relaying(ctx, progress, levels)


class Relaying:
    """The block of :func:`relaying`: the call's reporter set inside, its reports drained after."""

    __slots__ = ("_ctx", "_levels", "_progress", "_relay", "_token")

    def __init__(
        self,
        ctx: ServerRequestContext[Any, Any] | None,
        progress: ProgressSink | None,
        levels: LogLevels,
    ) -> None:
        self._ctx = ctx
        self._progress = progress
        self._levels = levels
        self._relay: _Relay | None = None
        self._token: Token[Reporter | None] | None = None

    async def __aenter__(self) -> Reports:
        ctx = self._ctx
        if ctx is None:
            return Reports()
        relay = self._relay = _Relay(ctx, self._progress, self._levels.get(ctx))
        self._token = REPORTER.set(relay)
        return relay.reports

    async def __aexit__(self, *_exc: object) -> None:
        relay, token = self._relay, self._token
        if relay is None or token is None:
            return
        REPORTER.reset(token)
        await relay.drain()

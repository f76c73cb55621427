"""How a tool implementation talks to the runtime (R9).

A tool is a sync or async callable ``tool(arguments, context)``. It declares its own
commit boundary:

* returning normally means the effect is **committed** (for reads: the read is done);
  return :class:`ToolOutput` to add an external resource id;
* raising :class:`NotCommitted` means it failed **before** the commit boundary — nothing
  happened (a business rejection, a refused connection);
* raising :class:`CommitUnknown` means it cannot tell (a lost response) — the call
  becomes OUTCOME_UNKNOWN and is reconciled, never silently retried;
* calling :meth:`ToolContext.mark_committed` at the boundary lets the runtime tell a
  cancellation before the commit from one after it.

Any other exception from a write is treated as :class:`CommitUnknown` — the runtime
never assumes a failing write did nothing. From a read it is a failure before commit.
Credentials arrive in :attr:`ToolContext.secrets`, never in the arguments.

A long tool may say how far it has got and log as it goes
(:meth:`ToolContext.report_progress`, :meth:`ToolContext.log`). A surface that can
pass these on sets :data:`REPORTER` for the length of the call (an MCP server sends
``notifications/progress`` and ``notifications/message``); elsewhere they go nowhere,
and cost nothing.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from toolbound._model import Invocation, JSONObject, JSONValue
    from toolbound.trace import Trace

__all__ = [
    "REPORTER",
    "AsyncToolFunction",
    "CommitUnknown",
    "EnvSecrets",
    "LogLevel",
    "NotCommitted",
    "Reporter",
    "SecretProvider",
    "StaticSecrets",
    "ToolContext",
    "ToolFunction",
    "ToolOutput",
]


class NotCommitted(Exception):  # noqa: N818 - a typed signal from the tool, like ModelRetry
    """The tool failed before its commit boundary: nothing happened.

    ``code``/``message``/``hint`` reach the model as a structured error;
    ``recoverable`` says whether a corrected *new* call could succeed.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "tool_failed",
        recoverable: bool = True,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.recoverable = recoverable
        self.hint = hint


class CommitUnknown(Exception):  # noqa: N818 - a typed signal from the tool
    """The tool cannot tell whether its effect committed (e.g. a lost response)."""

    def __init__(self, message: str, *, evidence: Mapping[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.evidence: Mapping[str, object] = evidence or {}


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A committed result with the id of what it created or changed outside."""

    value: JSONValue
    external_resource_id: str | None = None


class SecretProvider(Protocol):
    """Hands credentials to tools at execution time (R6): never to the model."""

    def get(self, name: str) -> str:
        """The secret called ``name``; raises ``KeyError`` when there is none."""
        ...


@dataclass(frozen=True, slots=True)
class StaticSecrets:
    """Secrets from a mapping (tests, demos)."""

    values: Mapping[str, str]

    def get(self, name: str) -> str:
        """The secret called ``name``."""
        return self.values[name]


@dataclass(frozen=True, slots=True)
class EnvSecrets:
    """Secrets from environment variables, ``prefix`` + upper-cased name."""

    prefix: str = "TOOLBOUND_SECRET_"

    def get(self, name: str) -> str:
        """The environment variable for ``name``."""
        import os  # noqa: PLC0415 - only this provider reads the environment

        return os.environ[self.prefix + name.upper().replace(".", "_")]


LogLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
"""The syslog severities (RFC 5424), least severe first, as MCP logging uses them."""


class Reporter(Protocol):
    """Where a tool's progress and log messages go while it runs.

    Called from the tool's own thread (a worker thread for a sync tool): an
    implementation must be thread-safe and must not block.
    """

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """``progress`` (of ``total``, if known), with an optional message."""
        ...

    def log(self, level: LogLevel, data: JSONValue, logger: str | None) -> None:
        """One log message (any JSON value) at ``level``, from ``logger`` if named."""
        ...


REPORTER: ContextVar[Reporter | None] = ContextVar("toolbound_reporter", default=None)
"""Where the tool calls made in this context report; read when the call's context is made."""


@dataclass(slots=True, kw_only=True)
class ToolContext:
    """What a tool implementation receives beside its arguments."""

    invocation: Invocation
    attempt: int
    secrets: Mapping[str, str] = field(repr=False)
    idempotency_key: str | None
    epoch: int | None = None
    """The fencing token of this ownership of the call's ledger key (``None`` for a call
    that holds no key). A later owner — a process that took the call over, or the same
    call run again — holds a higher one. Hand it, with ``idempotency_key``, to the
    system the tool writes to, so it refuses a stale owner (see ``docs/execution.md``)."""
    deadline_in: float
    """Seconds left until the deadline when the attempt started."""
    transaction: object = None
    """For ``transactional`` tools: the ledger's open DB-API connection. Write the
    business rows through it; they commit with the ledger record or not at all."""
    attempt_id: str = ""
    """This attempt's id, as the trace records it."""
    reporter: Reporter | None = field(default_factory=REPORTER.get, repr=False)
    """Where :meth:`report_progress` and :meth:`log` go (none: they are dropped)."""
    trace: Trace | None = field(default=None, repr=False)
    """The call's trace, for a tool that relays what its far side asks or says
    mid-call (an MCP upstream's sampling or elicitation request): it appends events,
    never rewrites them (R14)."""
    # A plain flag: one store, visible to the runtime's thread under the GIL.
    _committed: bool = field(default=False, repr=False)

    def mark_committed(self) -> None:
        """Say the commit boundary has been crossed: a cancel after this cannot undo it."""
        self._committed = True

    @property
    def committed(self) -> bool:
        """Whether :meth:`mark_committed` was called."""
        return self._committed

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Say how far the call has got: ``progress`` of ``total`` (if known). Never blocks."""
        if self.reporter is not None:
            self.reporter.progress(progress, total, message)

    def log(self, data: JSONValue, *, level: LogLevel = "info", logger: str | None = None) -> None:
        """Log ``data`` (a message or any JSON value) to whoever follows the call. Never blocks.

        What a tool logs reaches the client as it is: never a secret.
        """
        if self.reporter is not None:
            self.reporter.log(level, data, logger)


ToolFunction: TypeAlias = "Callable[[JSONObject, ToolContext], JSONValue | ToolOutput]"
AsyncToolFunction: TypeAlias = (
    "Callable[[JSONObject, ToolContext], Awaitable[JSONValue | ToolOutput]]"
)

"""A stdio upstream's child process: its streams, and its exit seen at once (R18).

The SDK's stdio transport notices a child's end only when its stdout closes, which a
grandchild holding the pipe can delay until a call's deadline, and it keeps neither
the exit status nor what the child wrote to stderr. :class:`Child` runs the same
protocol over the same pipes and also waits on the process itself: when the child
exits, :attr:`Child.exit` records its status and the last lines of its stderr, and
the session's stream is closed at once, so every call in flight fails now with that
reason (:mod:`toolbound.mcp.upstream` turns it into ``upstream_unavailable``).

Each line the child writes to stderr is passed on to ``errlog`` as it comes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TextIO

import anyio
from anyio.streams.text import TextReceiveStream

try:
    import mcp_types as types
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from anyio.abc import ByteReceiveStream, Process
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp import StdioServerParameters

__all__ = ["Child", "Exit"]

_KEPT_LINES: Final = 10
"""How many of the child's last stderr lines an exit reports."""
_MAX_LINE: Final = 500
_STDERR_GRACE: Final = 0.3  # seconds to let the last stderr lines arrive after the exit
_STOP_GRACE: Final = 2.0  # seconds between closing stdin and SIGTERM, then SIGKILL


@dataclass(frozen=True, slots=True)
class Exit:
    """How a child ended: its exit status and the last lines it wrote to stderr."""

    status: int | None
    """The exit status; negative for a signal (``-9`` for SIGKILL), as Python reports it."""
    stderr: tuple[str, ...]

    def describe(self) -> str:
        """One line: the status, and the stderr tail joined with `` | ``."""
        if self.status is not None and self.status < 0:
            how = f"was killed by signal {-self.status}"
        else:
            how = f"exited with status {self.status}"
        tail = " | ".join(self.stderr)
        return f"{how}; the last lines of its stderr: {tail}" if tail else f"{how}, stderr empty"

    def as_json(self) -> dict[str, object]:
        """The exit as evidence, for the trace."""
        return {"exit_status": self.status, "stderr": list(self.stderr)}


class Child:
    """One run of a stdio upstream's command; enter :meth:`streams` once."""

    def __init__(self, params: StdioServerParameters, errlog: TextIO) -> None:
        self.params = params
        self.errlog = errlog
        self.exit: Exit | None = None
        """Set as soon as the process has ended (before the session hears of it)."""
        self._tail: deque[str] = deque(maxlen=_KEPT_LINES)
        self._stderr_done = anyio.Event()
        self._exited = anyio.Event()

    @contextlib.asynccontextmanager
    async def streams(
        self,
    ) -> AsyncIterator[
        tuple[
            MemoryObjectReceiveStream[SessionMessage | Exception],
            MemoryObjectSendStream[SessionMessage],
        ]
    ]:
        """Start the child and yield the session's (read, write) streams; stop it after."""
        p = self.params
        process = await anyio.open_process(
            [p.command, *p.args],
            env=get_default_environment() | (p.env or {}),
            cwd=p.cwd,
            start_new_session=True,  # its own process group, stopped as a whole
        )
        incoming, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._read_stdout, process, incoming)
            tasks.start_soon(self._write_stdin, process, outgoing, incoming)
            tasks.start_soon(self._read_stderr, process)
            tasks.start_soon(self._wait, process, incoming)
            try:
                yield read, write
            finally:
                with anyio.CancelScope(shield=True):
                    await _stop(process)
                    # The process has ended: let its exit be recorded before leaving.
                    with anyio.move_on_after(_STDERR_GRACE * 2):
                        await self._exited.wait()
                    for stream in (read, write, incoming, outgoing):
                        await stream.aclose()
                    with contextlib.suppress(OSError, anyio.BrokenResourceError):
                        await process.aclose()
                tasks.cancel_scope.cancel()

    async def _read_stdout(
        self, process: Process, incoming: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        assert process.stdout is not None  # noqa: S101 - spawned with pipes
        p = self.params
        buffer = ""
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async with incoming:
                stdout = TextReceiveStream(
                    process.stdout, encoding=p.encoding, errors=p.encoding_error_handler
                )
                async for chunk in stdout:
                    lines = (buffer + chunk).split("\n")
                    buffer = lines.pop()
                    for line in lines:
                        if line.strip():
                            await incoming.send(_message(line))

    async def _write_stdin(
        self,
        process: Process,
        outgoing: MemoryObjectReceiveStream[SessionMessage],
        incoming: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        assert process.stdin is not None  # noqa: S101 - spawned with pipes
        p = self.params
        try:
            async with outgoing:
                async for message in outgoing:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    data = (text + "\n").encode(p.encoding, p.encoding_error_handler)
                    await process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The child stopped reading: end the session instead of leaving calls waiting.
            await incoming.aclose()

    async def _read_stderr(self, process: Process) -> None:
        assert process.stderr is not None  # noqa: S101 - spawned with pipes
        try:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for line in _lines(process.stderr):
                    self._tail.append(line[:_MAX_LINE])
                    with contextlib.suppress(OSError, ValueError):
                        self.errlog.write(line + "\n")
                        self.errlog.flush()
        finally:
            self._stderr_done.set()

    async def _wait(
        self, process: Process, incoming: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        status = await process.wait()
        with anyio.move_on_after(_STDERR_GRACE):
            await self._stderr_done.wait()
        self.exit = Exit(status=status, stderr=tuple(self._tail))
        self._exited.set()
        # Whoever still holds its stdout, the session ends now: calls in flight fail.
        await incoming.aclose()


def _message(line: str) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


async def _lines(stream: ByteReceiveStream) -> AsyncIterator[str]:
    buffer = ""
    async for chunk in TextReceiveStream(stream, errors="replace"):
        lines = (buffer + chunk).split("\n")
        buffer = lines.pop()
        for line in lines:
            if line.strip():
                yield line.rstrip("\r")
    if buffer.strip():
        yield buffer


async def _stop(process: Process) -> None:
    """Close its stdin, then SIGTERM and SIGKILL its process group, each after a grace."""
    if process.stdin is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None and process.returncode is None:
            _signal_group(process, sig)
        with anyio.move_on_after(_STOP_GRACE):
            await process.wait()
            return


def _signal_group(process: Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if sys.platform == "win32":  # pragma: no cover - no process groups there
            process.send_signal(sig)
        else:
            os.killpg(process.pid, sig)

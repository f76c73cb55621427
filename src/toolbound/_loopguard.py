"""A guard against blocking I/O on a thread that runs an event loop.

The stores (the journal, the ledger's SQLite and PostgreSQL stores) and the identity
provider's key fetch block their thread for a round trip. Called from an ``async
def`` on the loop's own thread, one slow round trip is every request's wait; the
service hops to its bounded thread pool instead (:mod:`toolbound.execution.offload`), and
a :class:`~toolbound.Runtime`'s async API — what the MCP server and gateway run — to
its own (:meth:`~toolbound.Runtime.off_loop`).

:func:`check_off_loop` is what each blocking store entry point calls first. It does
nothing unless the guard is on — :func:`set_loop_guard`, or ``TOOLBOUND_LOOP_GUARD=1``
in the environment (read at import, so a server started as a subprocess inherits
it) — and then raises :class:`LoopBlockedError` when the calling thread runs an event
loop. The service's and the MCP surfaces' test suites switch it on, so a handler that
forgets the hop fails its tests. A library program may still call a store from a loop
itself, which is why the guard is off by default.
"""

from __future__ import annotations

import asyncio
import os

__all__ = ["LoopBlockedError", "check_off_loop", "loop_guard_on", "set_loop_guard"]

ENV = "TOOLBOUND_LOOP_GUARD"

_on = os.environ.get(ENV, "") not in {"", "0"}


class LoopBlockedError(RuntimeError):
    """A blocking store or network call ran on a thread whose event loop is running."""


def set_loop_guard(on: bool) -> None:  # noqa: FBT001 - a switch
    """Switch the guard on (tests) or off (the default)."""
    global _on  # noqa: PLW0603 - one process-wide switch, like stamina's set_testing
    _on = on


def loop_guard_on() -> bool:
    """Whether :func:`check_off_loop` raises on a loop's thread."""
    return _on


def check_off_loop(what: str) -> None:
    """Raise :class:`LoopBlockedError` if the guard is on and this thread runs a loop."""
    if not _on:
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    msg = f"{what} would block the event loop: run it on an I/O pool (Runtime.off_loop)"
    raise LoopBlockedError(msg)

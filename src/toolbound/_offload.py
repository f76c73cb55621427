"""One hop off the event loop: a bounded thread pool for blocking work.

The journal, the ledger and an identity provider's key fetch are synchronous: each
call blocks its thread for a round trip (or a lock, or an fsync). The HTTP service's
handlers, the MCP server's and the gateway's are ``async def`` on one event loop, so
every such call goes through an :class:`Offload` — one
:class:`~concurrent.futures.ThreadPoolExecutor` of a bounded number of threads — and
the loop stays free to answer everyone else while a store is slow. The service keeps
one per process (:mod:`toolbound.service.offload`), a :class:`~toolbound.Runtime` one
for its async API (:meth:`~toolbound.Runtime.off_loop`).

The pool is bounded: when every thread is busy, work queues rather than spawning
threads without end; the stores' own timeouts (connect, statement, pool wait) bound
how long any one thread is held. The measured cost of a hop is in ``docs/service.md``
and ``docs/mcp.md``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, ParamSpec, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Offload"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class Offload:
    """Run blocking functions on a bounded pool of ``threads``, awaited from the loop."""

    def __init__(self, threads: int, *, name: str = "toolbound-io") -> None:
        if threads < 1:
            msg = f"an off-loop pool needs at least one I/O thread, not {threads}"
            raise ValueError(msg)
        self.threads = threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)

    async def __call__(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` on the pool, in this task's context (trace spans)."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        call = functools.partial(context.run, fn, *args, **kwargs)
        return await loop.run_in_executor(self._pool, call)

    async def finish(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """:meth:`__call__` for a step that must not be cut off: it runs to its end.

        A pipeline step that claims a key or records a phase cannot be abandoned
        half-way by its caller's cancellation, any more than the same step run inline
        could: the step finishes, its result is returned, and the cancellation is
        requested again, to be delivered at the caller's next ``await`` — where the
        pipeline settles a cancelled call truthfully (R9).
        """
        hop = asyncio.ensure_future(self(fn, *args, **kwargs))
        interrupted = False
        while True:
            try:
                result = await asyncio.shield(hop)
                break
            except asyncio.CancelledError:
                if hop.done() and hop.cancelled():
                    raise
                interrupted = True
        task = asyncio.current_task()
        if interrupted and task is not None:
            task.uncancel()  # the request caught above is made again, not counted twice
            task.cancel()
        return result

    def close(self) -> None:
        """Let running work finish; start no more."""
        self._pool.shutdown(wait=True, cancel_futures=True)

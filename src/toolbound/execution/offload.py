"""A runtime's one hop off the event loop: a bounded pool of threads for blocking work.

The journal, the ledger and an identity provider's key fetch are synchronous: each
call blocks its thread for a round trip (or a lock, or an fsync). The MCP server's
and the gateway's handlers are ``async def`` on one event loop, and so is a
:class:`~toolbound.Runtime`'s async API they drive; every such call there goes
through the runtime's :class:`Offload` (:meth:`~toolbound.Runtime.off_loop`) and the
loop stays free to answer everyone else while a store is slow. The HTTP service's
handlers hop through one of their own per process (``[service] io_threads``).

The threads are :class:`~toolbound.execution.workers.Workers` — the same small
machinery the executor runs sync tools on, but threads of their own, so a slow tool
never queues the ledger's work behind it. A hop through them measured 12 to 13 µs
against 30 µs for ``loop.run_in_executor`` on a ``ThreadPoolExecutor`` and 50 µs for
``anyio.to_thread`` (``docs/mcp.md``). The pool is bounded: when every thread is
busy, work queues rather than spawning threads without end; the stores' own timeouts
(connect, statement, pool wait) bound how long any one thread is held.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from typing import TYPE_CHECKING, ParamSpec, TypeVar, cast

from toolbound.execution.workers import Answer, Job, Workers, on_worker

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
        self._workers = Workers(max_workers=threads, name=name)

    async def __call__(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` on the pool, in this task's context (trace spans).

        Cancelled while it waits, the call is dropped: skipped if no thread has
        started it, else left to end with nobody reading what it returns.
        """
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return cast("_T", await on_worker(self._workers, call, ()))

    async def finish(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """:meth:`__call__` for a step that must not be cut off: it runs to its end.

        A pipeline step that claims a key or records a phase cannot be abandoned
        half-way by its caller's cancellation, any more than the same step run inline
        could: the step finishes, its result is returned, and the cancellation is
        requested again, to be delivered at the caller's next ``await`` — where the
        pipeline settles a cancelled call truthfully (R9).
        """
        loop = asyncio.get_running_loop()
        waiter = Answer(loop)
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        job = Job(call, (), loop=loop, waiter=waiter)
        self._workers.submit(job)
        interrupted = False
        while not waiter.done():
            # A future of this round's own: a cancellation cancels it, never the job.
            woken = loop.create_future()
            waiter.add_done_callback(functools.partial(_wake, woken))
            try:
                await woken
            except asyncio.CancelledError:
                interrupted = True
        task = asyncio.current_task()
        if interrupted and task is not None:
            task.uncancel()  # the request caught above is made again, not counted twice
            task.cancel()
        if job.error is not None:
            raise job.error
        return cast("_T", job.value)

    def close(self, *, wait: bool = False) -> None:
        """Start no more work: what waits is answered cancelled, what runs ends by itself.

        ``wait``: return only once what runs has ended (a service closing its stores
        after its pool must not pull them from under a running pipeline).
        """
        self._workers.close()
        if wait:
            self._workers.join()


def _wake(woken: asyncio.Future[None], _waiter: Answer) -> None:
    if not woken.done():
        woken.set_result(None)

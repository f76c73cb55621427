"""The service's one hop off the event loop: a bounded thread pool for blocking work.

The journal, the ledger and the identity provider's key fetch are synchronous: each
call blocks its thread for a round trip (or a lock, or an fsync). The HTTP handlers
are ``async def`` on one event loop, so every such call goes through :class:`Offload`
— one :class:`~concurrent.futures.ThreadPoolExecutor` of ``[service] io_threads``
threads per process — and the loop stays free to answer everyone else (``/healthz``
included) while a store is slow. A proposal runs its whole pipeline (gates, ledger,
tool, journal) as one hop, so its thread, not the loop, waits on the tool.

Why threads and not psycopg's async pool: SQLite has no asynchronous driver, so the
SQLite stores need a pool anyway; one pool for every store keeps one hop per request
and one code path per store. The measured cost of a hop is in ``docs/service.md``.

The pool is bounded: when every thread is busy, work queues rather than spawning
threads without end; the stores' own timeouts (connect, statement, pool wait) bound
how long any one thread is held.
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

    def __init__(self, threads: int) -> None:
        if threads < 1:
            msg = f"the service needs at least one I/O thread, not {threads}"
            raise ValueError(msg)
        self.threads = threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="toolbound-io")

    async def __call__(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` on the pool, in this task's context (trace spans)."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        call = functools.partial(context.run, fn, *args, **kwargs)
        return await loop.run_in_executor(self._pool, call)

    def close(self) -> None:
        """Let running work finish; start no more."""
        self._pool.shutdown(wait=True, cancel_futures=True)

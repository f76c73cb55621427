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
how long any one thread is held. The class is the one a
:class:`~toolbound.Runtime` uses for its async API (:mod:`toolbound._offload`).
"""

from __future__ import annotations

from toolbound._offload import Offload

__all__ = ["Offload"]

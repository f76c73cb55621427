"""Run a framework's coroutine from a sync adapter, cancelling it when the kit cancels."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import threading
    from collections.abc import Coroutine

T = TypeVar("T")
_POLL = 0.02


class Cancelled(Exception):  # noqa: N818 - the outcome, as the adapter reports it
    """The kit cancelled the request and the framework's task was cancelled."""


async def _watch(coro: Coroutine[object, object, T], cancel: threading.Event) -> T:
    task = asyncio.ensure_future(coro)
    while not task.done():
        if cancel.is_set():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                raise Cancelled from None
        await asyncio.wait({task}, timeout=_POLL)
    return task.result()


def run_cancellable(coro: Coroutine[object, object, T], cancel: threading.Event) -> T:
    """Run ``coro`` on a fresh event loop; :class:`Cancelled` if ``cancel`` is set first."""
    return asyncio.run(_watch(coro, cancel))

"""Decisions made in the service's console on calls an MCP surface holds, applied here (R7).

A gateway or ``mcp-serve`` on a durable ``[store]`` keeps every call it parks in the
journal's inbox (:mod:`toolbound.recording`): approvers see it in ``/v1/confirmations``
and the console beside the service's own, and decide it there. :func:`applying` runs
beside the server, every :data:`INTERVAL` seconds: it takes each decision made
elsewhere on a call this process holds, once, and applies it to the held call through
the runtime's own path (:attr:`toolbound.Runtime.inbox`) — an approved call runs, a
denied one ends with the person's reason. The journal is read off the event loop.

The client learns of it as MCP lets it: a ``tools/call`` that got the documented
pending result calls again with the same call and gets the committed result, replayed
from the ledger (an identical call already confirmed cannot execute again); one still
waiting on an elicitation finds the call decided and replays it the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from toolbound.pipeline.runtime import Runtime

__all__ = ["INTERVAL", "applying"]

INTERVAL = 0.5
"""Seconds between two rounds of applying decisions made elsewhere."""

_LOG = logging.getLogger("toolbound.mcp.inbox")


@contextlib.asynccontextmanager
async def applying(runtime: Runtime, *, interval: float = INTERVAL) -> AsyncIterator[None]:
    """Inside, decisions made elsewhere on ``runtime``'s held calls are applied; cancelled after.

    Nothing runs when the runtime keeps no journal (``runtime.inbox`` is ``None``).
    """
    if runtime.inbox is None:
        yield
        return
    task = asyncio.create_task(_rounds(runtime, interval), name="toolbound-inbox")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _rounds(runtime: Runtime, interval: float) -> None:
    inbox = runtime.inbox
    assert inbox is not None  # noqa: S101 - checked by applying()
    while True:
        try:
            await inbox.aapply()
        except Exception:  # noqa: BLE001 - a store that cannot answer is asked next round
            _LOG.exception("could not apply the decisions made elsewhere")
        await asyncio.sleep(interval)

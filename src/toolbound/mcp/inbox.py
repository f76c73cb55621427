"""Decisions made in the service's console on calls an MCP surface holds, applied here (R7).

A gateway or ``mcp-serve`` on a durable ``[store]`` keeps every call it parks in the
journal's inbox (:mod:`toolbound.recording`): approvers see it in ``/v1/confirmations``
and the console beside the service's own, and decide it there. :func:`applying` runs
beside the server, every :data:`INTERVAL` seconds: it takes each decision made
elsewhere on a call this process holds, once, and applies it to the held call through
the runtime's own path (:attr:`toolbound.Runtime.inbox`) — an approved call runs, a
denied one ends with the person's reason. The journal is read off the event loop.

The client learns of it as MCP lets it: a ``tools/call`` that got the documented
pending result calls again with the same call and gets the decided call's outcome —
a write's committed result replayed from the ledger (an identical call already
confirmed cannot execute again); a read's result, or a denial with the person's
reason, from :class:`HandedOver`, this server's memory of the calls it answered
pending and that were decided elsewhere since. A call a person edited there ends
cancelled, never run; its corrected call runs here, and its outcome is the answer the
same call asked again gets. One still waiting on an elicitation finds the call
decided and replays it the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from toolbound._model import Subject
    from toolbound._outcome import Outcome
    from toolbound.gates.confirm import ConfirmationRequest
    from toolbound.pipeline.runtime import Runtime

__all__ = ["INTERVAL", "HandedOver", "applying"]

_K = TypeVar("_K")
_V = TypeVar("_V")

INTERVAL = 0.5
"""Seconds between two rounds of applying decisions made elsewhere."""

_LOG = logging.getLogger("toolbound.mcp.inbox")


class HandedOver:
    """The calls answered pending to a caller, and their outcomes once decided elsewhere.

    When the caller asks the same call again (same subject, same digest), the server
    answers with the decided call's outcome (:meth:`answer`), once, instead of
    parking it anew. Bounded: the oldest are forgotten first.
    """

    def __init__(self, limit: int = 1024) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._sent: OrderedDict[tuple[str, str, str], str] = OrderedDict()
        self._ended: OrderedDict[str, Outcome] = OrderedDict()

    def sent(self, subject: Subject, request: ConfirmationRequest) -> None:
        """``subject`` got the pending result of ``request``'s call."""
        with self._lock:
            self._sent[(subject.tenant, subject.id, request.digest)] = request.invocation_id
            _bound(self._sent, self._limit)

    def ended(self, outcome: Outcome) -> None:
        """A held call ended by a decision made elsewhere.

        An edit's outcome is its corrected call's: it answers the call it replaced.
        """
        with self._lock:
            self._ended[_answers(outcome)] = outcome
            _bound(self._ended, self._limit)

    def answer(self, subject: Subject, digest: str) -> Outcome | None:
        """The outcome of the call ``subject`` got pending with ``digest``, if it ended; once."""
        key = (subject.tenant, subject.id, digest)
        with self._lock:
            invocation_id = self._sent.get(key)
            outcome = None if invocation_id is None else self._ended.pop(invocation_id, None)
            if outcome is not None:
                del self._sent[key]
        return outcome


def _answers(outcome: Outcome) -> str:
    """The held call ``outcome`` ends: the one a person's edit replaced, or its own."""
    proposed = outcome.trace.of_kind("proposal")
    edit = proposed[0].data.get("edited_from") if proposed else None
    replaced = edit.get("invocation_id") if isinstance(edit, dict) else None
    return replaced if isinstance(replaced, str) else outcome.invocation_id


def _bound(kept: OrderedDict[_K, _V], limit: int) -> None:
    while len(kept) > limit:
        kept.popitem(last=False)


@contextlib.asynccontextmanager
async def applying(
    runtime: Runtime, handed: HandedOver | None = None, *, interval: float = INTERVAL
) -> AsyncIterator[None]:
    """Inside, decisions made elsewhere on ``runtime``'s held calls are applied; cancelled after.

    Each outcome is kept in ``handed`` for the caller asking the same call again.
    Nothing runs when the runtime keeps no journal (``runtime.inbox`` is ``None``).
    """
    if runtime.inbox is None:
        yield
        return
    task = asyncio.create_task(_rounds(runtime, handed, interval), name="toolbound-inbox")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _rounds(runtime: Runtime, handed: HandedOver | None, interval: float) -> None:
    inbox = runtime.inbox
    assert inbox is not None  # noqa: S101 - checked by applying()
    while True:
        try:
            for outcome in await inbox.aapply():
                if handed is not None:
                    handed.ended(outcome)
        except Exception:  # noqa: BLE001 - a store that cannot answer is asked next round
            _LOG.exception("could not apply the decisions made elsewhere")
        await asyncio.sleep(interval)

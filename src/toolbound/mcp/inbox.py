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

Any replica answers the same call asked again (:func:`answered_elsewhere`): a
replica of the surface on the same store that does not hold the call finds it in the
journal (:meth:`toolbound.inbox.Inbox.twin`) and answers with it instead of parking
it a second time — pending while it waits; once a person decided it, the outcome its
holder recorded (waiting up to :data:`WAIT` seconds for the holder to apply the
decision; an edit's, the corrected call's), or, the holder gone, the call run here
under the person's decision, once
(:meth:`toolbound.pipeline.inbox.HeldInbox.aresume`). On shutdown a replica ends the
calls it still holds, cancelled (:func:`applying`): nobody can decide them any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, TypeVar

from toolbound._confirmation import ConfirmationRequest
from toolbound._errors import ConfirmationMismatch

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from toolbound._model import Subject
    from toolbound._outcome import Outcome
    from toolbound.journal import StoredCall
    from toolbound.pipeline.call import CallContext
    from toolbound.pipeline.runtime import Runtime

__all__ = [
    "INTERVAL",
    "WAIT",
    "HandedOver",
    "answered_elsewhere",
    "applying",
    "still_unanswered",
]

_K = TypeVar("_K")
_V = TypeVar("_V")

INTERVAL = 0.5
"""Seconds between two rounds of applying decisions made elsewhere."""

WAIT = 5.0
"""Seconds a replica waits for another to apply a decision, before answering pending."""

_LOG = logging.getLogger("toolbound.mcp.inbox")
_UNDERWAY = frozenset({"awaiting_confirmation", "running"})


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
        # What waits here can be decided nowhere once this process is gone: ended, and
        # written before the server returns (its signal may end the process then).
        for invocation_id in list(runtime.parked()):
            with contextlib.suppress(ConfirmationMismatch):
                runtime.cancel_pending(invocation_id)
        await runtime.off_loop(runtime.inbox.recorder.flush)


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


async def answered_elsewhere(
    runtime: Runtime, parked: ConfirmationRequest, context: CallContext, *, wait: float = WAIT
) -> ConfirmationRequest | Outcome | StoredCall | None:
    """What the same call asked again here answers, when another replica holds the call.

    ``parked`` was just parked here for it; it is cancelled when the answer is the
    other call's: that call's request while it waits (pending, the one id); the
    outcome of running it here under the person's decision when its holder is gone;
    or its record once it ended. ``None``: no such call, ``parked`` stands.
    """
    inbox = runtime.inbox
    if inbox is None:
        return None
    twin = await _same_call(runtime, inbox.journal.twin, parked)
    if twin is None:
        return None
    runtime.cancel_pending(parked.invocation_id)  # answered with the call that waited first
    await runtime.off_loop(inbox.recorder.flush)  # once: the next asking finds this one
    deadline = time.monotonic() + wait
    while twin.decision is not None and twin.status in _UNDERWAY:
        gone = twin.lease_until is None or twin.lease_until < time.time()
        if twin.status == "awaiting_confirmation" and gone:
            with contextlib.suppress(ConfirmationMismatch):  # taken by another, or an edit
                return await inbox.aresume(twin.invocation_id, context)
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
        found = await runtime.off_loop(inbox.journal.journal.get_call, twin.invocation_id)
        twin = twin if found is None else found
    if twin.decision == "edited" and twin.status not in _UNDERWAY:
        # The corrected call ran in its place: its outcome is the answer.
        corrected = await _corrected(runtime, twin, deadline)
        if corrected is not None:
            return corrected
    if twin.status in _UNDERWAY or twin.decision == "edited":
        request = twin.body.get("confirmation")
        assert isinstance(request, dict)  # noqa: S101 - a twin was parked for a person
        return ConfirmationRequest.from_json(request)
    return twin


async def still_unanswered(runtime: Runtime, parked: ConfirmationRequest, ended: Outcome) -> bool:
    """Whether ``ended`` (kept in :class:`HandedOver`) is still the answer to give.

    Not when the same call was answered on another replica meanwhile: the journal
    has a call of the subject with that digest since the decision.
    """
    inbox = runtime.inbox
    if inbox is None:
        return True
    found = await _same_call(runtime, inbox.journal.asked, parked)
    return found is not None and found.invocation_id == _answers(ended)


async def _same_call(
    runtime: Runtime, look: Callable[..., StoredCall | None], parked: ConfirmationRequest
) -> StoredCall | None:
    """``look`` (a journal's look-up) for the subject's other call of ``parked``'s digest."""
    subject = parked.subject
    tenant, digest, besides = subject.tenant, parked.digest, parked.invocation_id
    return await runtime.off_loop(
        look, tenant, subject.id, digest, besides=besides, now=time.time()
    )


async def _corrected(runtime: Runtime, edited: StoredCall, deadline: float) -> StoredCall | None:
    """The corrected call an edit of ``edited`` became, once it ended (until ``deadline``)."""
    inbox = runtime.inbox
    assert inbox is not None  # noqa: S101 - checked by answered_elsewhere()
    while True:
        found = await runtime.off_loop(inbox.journal.replacement, edited)
        if found is not None and found.status not in _UNDERWAY:
            return found
        if time.monotonic() > deadline:
            return None
        await asyncio.sleep(0.1)

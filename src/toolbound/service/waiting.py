"""Waiting without polling: a call read once it settles, and a tenant's feed of notices.

Two ways for an agent in another process to learn of a person's decision, both
authorized like the rest of the API and both built on the journal, so any replica
answers for a call any other replica (or the gateway, or ``mcp-serve``) wrote:

* ``GET /v1/invocations/{id}?wait=SECONDS`` answers as soon as the call is settled —
  no longer waiting for a person nor running — or when ``SECONDS`` (at most
  :data:`MAX_WAIT`) have passed, whichever is first; the answer is the call as it
  stands then either way.
* ``GET /v1/events`` is a server-sent event stream of the tenant's notices
  (:meth:`toolbound.journal.Journal.notices`): ``parked``, ``decided``, ``finished``,
  ``outcome_unknown``, ``reconciled``. Each event's ``id`` is its cursor: a client
  that reconnects with ``Last-Event-ID`` (or ``?after=``) goes on after it, missing
  nothing. A stream ends after ``?timeout=`` seconds (at most :data:`MAX_STREAM`),
  with a comment line every :data:`HEARTBEAT` seconds while nothing happens; clients
  reconnect, as the SSE specification has them do.

Both read the journal on the service's I/O pool, a little more often while a change
is likely (right after a request) and less while nothing happens: a waiting client
holds no thread between reads.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Final

import anyio
from starlette.responses import StreamingResponse

from toolbound.adapters.http import ApiError
from toolbound.journal import JournalError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

    from toolbound.config import Principal
    from toolbound.journal import Notice, StoredCall
    from toolbound.service.core import Service

__all__ = ["HEARTBEAT", "MAX_STREAM", "MAX_WAIT", "UNSETTLED", "events", "settled_call"]

MAX_WAIT: Final = 60.0
"""The longest ``?wait=`` a request may ask for, in seconds."""
MAX_STREAM: Final = 3600.0
"""The longest a ``/v1/events`` stream stays open (``?timeout=``, default 300 s)."""
HEARTBEAT: Final = 15.0
"""Seconds between the comment lines that keep an idle stream's connection open."""
UNSETTLED: Final = frozenset({"awaiting_confirmation", "running"})
"""Journal statuses of a call whose answer is not final yet."""

_FIRST_PAUSE = 0.05
_LONGEST_PAUSE = 1.0


def seconds(request: Request, name: str, *, most: float, default: float | None) -> float | None:
    """A query parameter of seconds, ``0 < s <= most``, or a 400 naming it."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= most:  # NaN fails this too
        msg = f"{name} must be a number of seconds above 0 and at most {most:g}"
        raise ApiError(400, "bad_query", msg)
    return value


async def settled_call(
    service: Service, principal: Principal, invocation_id: str, wait: float, request: Request
) -> StoredCall:
    """The call once settled, or as it stands after ``wait`` seconds (or a disconnect)."""
    deadline = time.monotonic() + wait
    pause = _FIRST_PAUSE
    while True:
        call = await service.io(service.get, principal, invocation_id)
        left = deadline - time.monotonic()
        if call.status not in UNSETTLED or left <= 0 or await request.is_disconnected():
            return call
        await anyio.sleep(min(pause, left))
        pause = min(pause * 2, _LONGEST_PAUSE)


async def events(service: Service, principal: Principal, request: Request) -> StreamingResponse:
    """The tenant's notices as server-sent events, from the client's last cursor on."""
    after = request.headers.get("last-event-id") or request.query_params.get("after") or None
    timeout = seconds(request, "timeout", most=MAX_STREAM, default=300.0)
    assert timeout is not None  # noqa: S101 - it has a default
    try:
        # Read once before answering: a cursor that is not one is a 400, not a stream.
        first = await service.io(service.journal.notices, principal.tenant, after=after)
    except JournalError as exc:
        if exc.code != "bad_cursor":
            raise
        raise ApiError(400, "bad_cursor", str(exc)) from None
    stream = _stream(service, principal, request, batch=first, after=after, timeout=timeout)
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream, media_type="text/event-stream", headers=headers)


async def _stream(
    service: Service,
    principal: Principal,
    request: Request,
    *,
    batch: list[Notice],
    after: str | None,
    timeout: float,
) -> AsyncIterator[str]:
    ends = time.monotonic() + timeout
    quiet_since = time.monotonic()
    pause = _FIRST_PAUSE
    yield f"retry: {int(_LONGEST_PAUSE * 1000)}\n\n"
    while True:
        for notice in batch:
            yield _event(notice)
        if batch:
            after, quiet_since, pause = batch[-1].cursor, time.monotonic(), _FIRST_PAUSE
        elif time.monotonic() - quiet_since >= HEARTBEAT:
            yield ": still here\n\n"
            quiet_since = time.monotonic()
        left = ends - time.monotonic()
        if left <= 0 or await request.is_disconnected():
            return
        await anyio.sleep(min(pause, left))
        pause = min(pause * 2, _LONGEST_PAUSE)
        batch = await service.io(service.journal.notices, principal.tenant, after=after)


def _event(notice: Notice) -> str:
    data = json.dumps({**notice.body, "at": notice.at.isoformat()}, separators=(",", ":"))
    return f"id: {notice.cursor}\nevent: {notice.kind}\ndata: {data}\n\n"

"""The access log: one line per HTTP request, as ASGI middleware (logger ``toolbound.access``).

The HTTP service and the MCP surfaces served over HTTP (``mcp-serve --http``, the
gateway) log through it. Each line names the request id, the principal and its
tenant, the method, the route (its template, ``/v1/invocations/{invocation_id}``,
where the router matched one), the status, the duration in milliseconds, and the
invocation the request was about; an MCP request adds its JSON-RPC method (``rpc``)
and, for ``tools/call``, the tool's name. The request id is the caller's
``X-Request-Id`` when it is a plain token, else a new one; the response carries it
back in ``X-Request-Id``.

Nothing else of the request is read: no header but ``X-Request-Id``, no query string,
no body, so no key, secret or argument value reaches the log. Who called is noted by
the code that authenticates (:func:`note_principal`, :func:`note_caller`, through a
context variable set for the request), and an MCP message's method and tool name by
the endpoint that already parsed it (:func:`note_rpc`); the invocation is read from
the route's path parameters, or from the proposal answer's top-level
``invocation_id``.

With ``toolbound.access`` not enabled for ``info`` the middleware hands the request on
untouched: an application built without logging configured pays nothing.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from toolbound.config import Principal

__all__ = ["AccessLog", "note_caller", "note_principal", "note_rpc"]

LOGGER = logging.getLogger("toolbound.access")
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_PROPOSALS = "/v1/proposals"
_ANSWER_LIMIT = 1 << 20  # a proposal answer read for its invocation id, at most


@dataclass(slots=True)
class _Note:
    """What the application learns about one request while it answers it."""

    principal: str | None = None
    tenant: str | None = None
    rpc: str | None = None
    tool: str | None = None


_NOTE: ContextVar[_Note | None] = ContextVar("toolbound_access_note", default=None)


def note_principal(principal: Principal) -> None:
    """Record who the current request authenticated as (a no-op outside the access log)."""
    note_caller(principal.name, principal.tenant)


def note_caller(name: str, tenant: str) -> None:
    """Record the name and tenant the current request runs as (a no-op outside the log)."""
    note = _NOTE.get()
    if note is not None:
        note.principal, note.tenant = name, tenant


def note_rpc(method: str, tool: str | None = None) -> None:
    """Record an MCP request's JSON-RPC method and the tool a ``tools/call`` names."""
    note = _NOTE.get()
    if note is not None:
        note.rpc, note.tool = method, tool


class AccessLog:
    """ASGI middleware writing one ``toolbound.access`` line per HTTP request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer through ``app``; log the request once its answer is sent (or failed)."""
        if scope["type"] != "http" or not LOGGER.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        note = _Note()
        token = _NOTE.set(note)
        started = time.perf_counter()
        answer = _Answer(reads_body=scope["path"] == _PROPOSALS)

        async def sending(message: Message) -> None:
            answer.see(message, request_id)
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            _NOTE.reset(token)
            _log(scope, note, answer, request_id, time.perf_counter() - started)


@dataclass(slots=True)
class _Answer:
    """The response as it goes out: its status, and a proposal answer's body."""

    reads_body: bool
    status: int = 500  # an application that raised before answering: the server's 500
    body: bytearray | None = None

    def see(self, message: Message, request_id: str) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            message["headers"] = [
                *message.get("headers", ()),
                (b"x-request-id", request_id.encode()),
            ]
            if self.reads_body:
                self.body = bytearray()
        elif message["type"] == "http.response.body" and self.body is not None:
            self.body += message.get("body", b"")
            if len(self.body) > _ANSWER_LIMIT:
                self.body = None

    def invocation_id(self) -> str | None:
        """The proposal answer's top-level ``invocation_id``, if it has one."""
        if not self.body:
            return None
        try:
            answer = json.loads(self.body)
        except ValueError:
            return None
        found = answer.get("invocation_id") if isinstance(answer, dict) else None
        return found if isinstance(found, str) else None


def _request_id(scope: Scope) -> str:
    """The caller's ``X-Request-Id`` if it is a plain token, else a new id."""
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            text: str = value.decode("latin-1")
            if _REQUEST_ID.fullmatch(text):
                return text
            break
    return uuid.uuid4().hex


def _log(scope: Scope, note: _Note, answer: _Answer, request_id: str, seconds: float) -> None:
    route = scope.get("route")
    template = getattr(route, "path", None)
    params = scope.get("path_params") or {}
    invocation = params.get("invocation_id") or answer.invocation_id()
    fields = {
        "request_id": request_id,
        "principal": note.principal,
        "tenant": note.tenant,
        "method": scope["method"],
        "route": template if isinstance(template, str) else scope["path"],
        "status": answer.status,
        "duration_ms": round(seconds * 1000, 2),
        "invocation_id": invocation,
    }
    if note.rpc is not None:
        fields["rpc"] = note.rpc
        fields["tool"] = note.tool
    LOGGER.info(
        "%s %s %s", fields["method"], fields["route"], fields["status"], extra={"fields": fields}
    )

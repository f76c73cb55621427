"""``toolbound serve``'s HTTP server: uvicorn, with every slow client bounded.

A client that holds a connection open costs the server a socket and a little memory;
a thousand that trickle their requests a byte at a time must not hold those for ever.
Four bounds, from ``[service]``:

* ``header_timeout`` — a request's head (request line and headers) must arrive within
  this long of its first byte (or of the connection): uvicorn has no such timeout of
  its own, so :class:`~toolbound.service.http_protocol.HeadTimeout` adds one, and
  closes a connection past it;
* ``keep_alive`` — an idle kept-alive connection is closed after this long (uvicorn's
  ``timeout_keep_alive``);
* ``max_connections`` — connections and requests at once (uvicorn's
  ``limit_concurrency``): past it, a request is answered 503 at once;
* ``body_timeout`` — a request's body must arrive within this long of its head,
  else 408 (:class:`BodyTimeout`, in the application, so every server running it
  has it).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from toolbound.adapters.http import ApiError, send_problem

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from toolbound.config import ServiceConfig

__all__ = ["BodyTimeout", "serve", "uvicorn_options"]


def serve(
    app: ASGIApp, config: ServiceConfig, *, host: str, port: int, log_level: str = "warning"
) -> None:
    """Run ``app`` on ``host:port`` in this process until interrupted, with ``config``'s bounds.

    Logging is the caller's (``log_config=None``); uvicorn's access lines are off, since
    they carry query strings: the service logs each request itself.
    """
    import uvicorn  # noqa: PLC0415 - the service extra

    from toolbound.service.http_protocol import head_timeout_protocol  # noqa: PLC0415

    uvicorn.run(
        app,
        http=head_timeout_protocol(config.header_timeout),
        **uvicorn_options(config, host=host, port=port, log_level=log_level),
    )


def uvicorn_options(
    config: ServiceConfig, *, host: str, port: int, log_level: str
) -> dict[str, Any]:
    """The options of ``uvicorn.run`` that ``[service]`` sets, the protocol apart."""
    return {
        "host": host,
        "port": port,
        "log_config": None,
        "log_level": log_level,
        "access_log": False,
        "limit_concurrency": config.max_connections,
        "timeout_keep_alive": max(1, round(config.keep_alive)),
    }


class _BodyTimedOut(Exception):  # noqa: N818 - an internal signal, never raised to callers
    """The request's body did not arrive in time."""


class BodyTimeout:
    """ASGI middleware: a request body must arrive within ``seconds`` of its head.

    Only the body's reads are bounded; once the body is complete, waiting on
    ``receive`` (for a disconnect) is the application's business. A late body is
    answered 408 ``body_timeout`` and the connection closed, if nothing was answered
    yet.
    """

    def __init__(self, app: ASGIApp, *, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the application with its body reads bounded."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.seconds
        complete = False
        started = False

        async def bounded() -> Message:
            nonlocal complete
            if complete:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise _BodyTimedOut from None
            complete = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, bounded, watched)
        except _BodyTimedOut:
            if started:
                raise
            msg = f"the request body did not arrive within {self.seconds:g} s"
            await send_problem(send, ApiError(408, "body_timeout", msg), close=True)

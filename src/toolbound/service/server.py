"""``toolbound serve``'s HTTP server: uvicorn, with every slow client bounded.

A client that holds a connection open costs the server a socket and a little memory;
a thousand that trickle their requests a byte at a time must not hold those for ever.
Four bounds, from ``[service]``:

* ``header_timeout`` — a request's head (request line and headers) must arrive within
  this long of its first byte (or of the connection): uvicorn has no such timeout of
  its own, so :class:`_HeadTimeout` adds one, and closes a connection past it;
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

__all__ = ["BodyTimeout", "serve"]


def serve(
    app: ASGIApp, config: ServiceConfig, *, host: str, port: int, log_level: str = "warning"
) -> None:
    """Run ``app`` on ``host:port`` until interrupted, with ``config``'s bounds.

    Logging is the caller's (``log_config=None``); uvicorn's access lines are off, since
    they carry query strings: the service logs each request itself.
    """
    import uvicorn  # noqa: PLC0415 - the service extra

    uvicorn.run(
        app,
        host=host,
        port=port,
        log_config=None,
        log_level=log_level,
        access_log=False,
        http=head_timeout_protocol(config.header_timeout),
        limit_concurrency=config.max_connections,
        timeout_keep_alive=max(1, round(config.keep_alive)),
    )


def head_timeout_protocol(seconds: float) -> type[asyncio.Protocol]:
    """Uvicorn's HTTP protocol, closing a connection whose request head is late."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol  # noqa: PLC0415

    base: Any = AutoHTTPProtocol

    class _HeadTimeout(base):  # type: ignore[misc]  # uvicorn's class, chosen at import
        """Closes the connection if a request head is not complete ``seconds`` after it began.

        Armed when the connection opens and whenever bytes of a new request arrive
        (no request yet, or the last one answered); a request whose head completes in
        time starts a new cycle, and the timer finds that and does nothing.
        """

        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
                self._arm()
            super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._head_timer = self.loop.call_later(seconds, self._late, self.cycle)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _late(self, cycle: object) -> None:
            self._head_timer = None
            if self.cycle is cycle and not self.transport.is_closing():
                # No new request head completed since the timer was armed.
                self.transport.close()

    return _HeadTimeout


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

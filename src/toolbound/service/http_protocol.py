"""uvicorn's HTTP protocol, closing a connection whose request head is late.

uvicorn has no timeout for a request's head: a client may send its request line and
headers a byte a minute and hold the connection for ever. :class:`HeadTimeout` is
uvicorn's own protocol (httptools where installed, else h11) with that timeout added:
``[service] header_timeout`` seconds from a head's first byte, or from connecting.

A class at module level, so several worker processes can name it
(``toolbound.service.http_protocol:HeadTimeout``) and each sets :attr:`HeadTimeout.seconds`
from the configuration it loads; one process takes a subclass of its own from
:func:`head_timeout_protocol`. Imports uvicorn (the ``service`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from uvicorn.protocols.http.auto import AutoHTTPProtocol

if TYPE_CHECKING:
    import asyncio

__all__ = ["HeadTimeout", "head_timeout_protocol"]

_Base: Any = AutoHTTPProtocol


class HeadTimeout(_Base):  # type: ignore[misc]  # uvicorn's class, chosen at import
    """Closes the connection if a request head is not complete ``seconds`` after it began.

    Armed when the connection opens and whenever bytes of a new request arrive (no
    request yet, or the last one answered); a request whose head completes in time
    starts a new cycle, and the timer finds that and does nothing.
    """

    seconds: ClassVar[float] = 10.0
    """The bound: ``[service] header_timeout``."""

    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Arm the timer for the first request's head."""
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Arm the timer when these bytes begin a new request's head."""
        if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        """Disarm the timer."""
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._head_timer = self.loop.call_later(self.seconds, self._late, self.cycle)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _late(self, cycle: object) -> None:
        self._head_timer = None
        if self.cycle is cycle and not self.transport.is_closing():
            # No new request head completed since the timer was armed.
            self.transport.close()


def head_timeout_protocol(seconds: float) -> type[asyncio.Protocol]:
    """:class:`HeadTimeout` with a bound of ``seconds``, leaving the class itself as it is."""
    return type("HeadTimeout", (HeadTimeout,), {"seconds": seconds})

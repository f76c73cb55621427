"""Keep an HTTP upstream's connection for the next call (the gateway's streamable HTTP leg).

The MCP SDK's streamable HTTP client reads a ``tools/call`` answered as a server-sent
event stream until the JSON-RPC response arrives, then closes the response. The
server ends that stream right after the response, but the end of the body (HTTP/1.1's
last chunk) is usually not read yet when the client closes it, and a connection
whose response was not read to its end cannot carry another request: httpcore drops
it, and the next call opens a new TCP connection. Measured through the gateway, every
call to an upstream answering in SSE paid a new connection (10 connects for 10 calls;
with this transport, none), and about half of its wall time on a loaded machine.

:class:`KeepAliveTransport` wraps httpx2's transport so that closing a response
first reads what is left of its body, for at most :data:`DRAIN_SECONDS` and
:data:`DRAIN_BYTES`; a body that ends in that time leaves its connection to the pool,
one that does not is closed as before. Nothing is written by a drain and nothing
read is used: the SDK has already handed on the message it waited for. No library
offers this: httpx2 and httpcore close a partly read response's connection by
design, and the SDK closes its responses early on purpose (it must not wait on a
stream that may never end).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

try:
    import anyio
    import httpx2
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["DRAIN_BYTES", "DRAIN_SECONDS", "KeepAliveTransport"]

_LOG = logging.getLogger("toolbound.mcp.keepalive")

DRAIN_SECONDS: Final = 0.05
"""The longest a closing response is read for before its connection is given up."""
DRAIN_BYTES: Final = 64 * 1024
"""The most of a closing response's body that is read (and discarded) to keep it."""


class KeepAliveTransport(httpx2.AsyncBaseTransport):
    """``inner`` (by default httpx2's own), with responses drained briefly as they close."""

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request`` through the inner transport; its response drains on close."""
        response = await self._inner.handle_async_request(request)
        stream = response.stream
        if isinstance(stream, httpx2.AsyncByteStream):
            response.stream = _Draining(stream)
        return response

    async def aclose(self) -> None:
        """Close the inner transport and its pool."""
        await self._inner.aclose()


class _Draining(httpx2.AsyncByteStream):
    """A response body that reads its rest, briefly, before it closes."""

    def __init__(self, stream: httpx2.AsyncByteStream) -> None:
        self._stream = stream
        self._parts: AsyncIterator[bytes] | None = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        # One iterator over the inner stream, kept so that aclose can go on with it
        # from where the reader stopped.
        self._parts = aiter(self._stream)
        async for part in self._parts:
            yield part

    async def aclose(self) -> None:
        parts = self._parts
        if parts is not None:
            # In the reader's own task: the inner iterator is not moved to another.
            with anyio.move_on_after(DRAIN_SECONDS) as waited:
                try:
                    await _drain(parts)
                except Exception:  # noqa: BLE001 - a body that cannot be drained is closed
                    _LOG.debug("a response could not be drained; its connection is closed")
            if waited.cancelled_caught:
                _LOG.debug("a response did not end in time; its connection is closed")
        await self._stream.aclose()


async def _drain(parts: AsyncIterator[bytes]) -> None:
    read = 0
    async for part in parts:
        read += len(part)
        if read > DRAIN_BYTES:
            msg = "more than DRAIN_BYTES left to read"
            raise ValueError(msg)

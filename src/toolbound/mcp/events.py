"""Resumable SSE streams for the streamable HTTP endpoint (SEP-1699).

With an event store, the SDK's streamable HTTP transport starts every SSE stream with
a *priming* event (an id and empty data, with the ``retry`` a client should wait
before reconnecting) and gives every message an event id; a client whose stream broke
reconnects with ``GET`` and ``Last-Event-ID`` and receives what it missed.

:class:`MemoryEventStore` is the SDK's :class:`~mcp.server.streamable_http.EventStore`
kept in memory and bounded: it holds the last ``max_events`` events and forgets older
ones (a client that comes back later than that gets only what is still held).

One store serves one session (:class:`SessionEventStores`): the transport names a
stream by its JSON-RPC request id, which two sessions may share, so a store shared
between sessions could replay one caller's messages to another.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

try:
    from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from mcp.server import Server
    from mcp.server.streamable_http import StreamableHTTPServerTransport
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp_types import JSONRPCMessage

__all__ = ["DEFAULT_RETRY_MS", "MemoryEventStore", "SessionEventStores"]

DEFAULT_RETRY_MS: Final = 1000
"""The ``retry`` a priming event suggests: how long a client waits before reconnecting."""
DEFAULT_MAX_EVENTS: Final = 512


@dataclass(frozen=True, slots=True)
class _Event:
    stream_id: str
    message: JSONRPCMessage | None  # None: a priming event, never replayed


class MemoryEventStore(EventStore):
    """The last ``max_events`` events of one session, in memory.

    Event ids are random (a client cannot name an event it was not sent) and unique.
    """

    def __init__(self, *, max_events: int = DEFAULT_MAX_EVENTS) -> None:
        if max_events < 1:
            msg = f"max_events must be at least 1, not {max_events}"
            raise ValueError(msg)
        self.max_events = max_events
        self._events: OrderedDict[str, _Event] = OrderedDict()

    @property
    def held(self) -> int:
        """How many events are held now.

        Not ``__len__``: the SDK tests a store for truth, and an empty one must count.
        """
        return len(self._events)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        """Keep one event of ``stream_id`` (``None``: the stream's priming event)."""
        event_id = os.urandom(12).hex()
        self._events[event_id] = _Event(stream_id, message)
        while len(self._events) > self.max_events:
            self._events.popitem(last=False)
        return event_id

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        """Send every message of ``last_event_id``'s stream stored after it; its stream id.

        ``None`` when the event is not (or no longer) held: nothing is sent.
        """
        last = self._events.get(last_event_id)
        if last is None:
            return None
        after = False
        for event_id, event in list(self._events.items()):
            if after and event.stream_id == last.stream_id and event.message is not None:
                await send_callback(EventMessage(event.message, event_id))
            after = after or event_id == last_event_id
        return last.stream_id


class SessionEventStores(StreamableHTTPSessionManager):
    """The SDK's session manager, each session with a :class:`MemoryEventStore` of its own.

    ``retry_ms`` is the ``retry`` of every priming event; ``max_events`` bounds each
    session's store (the manager bounds the number of sessions).
    """

    def __init__(
        self,
        app: Server[Any],
        *,
        json_response: bool = False,
        security_settings: TransportSecuritySettings | None = None,
        retry_ms: int = DEFAULT_RETRY_MS,
        max_events: int = DEFAULT_MAX_EVENTS,
    ) -> None:
        super().__init__(
            app,
            json_response=json_response,
            security_settings=security_settings,
            retry_interval=retry_ms,
        )
        self.max_events = max_events
        self.event_store = MemoryEventStore(max_events=max_events)

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:  # noqa: ANN401
        # The SDK hands its one event_store to each transport it admits: a fresh store
        # per admission keeps sessions apart (see the module docstring).
        self.event_store = MemoryEventStore(max_events=self.max_events)
        return super()._admit_session(requestor)

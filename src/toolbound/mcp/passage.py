"""What an upstream asks or says outside its answers, relayed to the gateway's clients.

One :class:`Passage` per upstream receives what the SDK's client hands it for that
connection, and one :class:`Downstream` per gateway knows the clients::

    sampling/createMessage     to the client whose tools/call is in flight on this
    elicitation/create         upstream, only where the upstream's allow_sampling /
                               allow_elicitation says so; otherwise refused with a
                               JSON-RPC error to the upstream (so too when that
                               client cannot be asked). Either way one
                               ``upstream_request`` event in that call's trace.
    notifications/message      to that client, at or above its logging/setLevel (on
                               a 2026-07-28 connection: the call's opt-in); one
                               ``upstream_log`` event in the call's trace. Outside
                               any call, to nobody.
    notifications/resources/   to the clients subscribed to that URI
      updated                  (:meth:`Downstream.subscribe`)
    notifications/*/list_      tools: the gateway re-reads the upstream first; then
      changed                  to every client the gateway has served a call or a
                               subscription

Everything relayed carries ``_meta["io.toolbound/trust"] = "untrusted_tool_data"``
and ``_meta["io.toolbound/upstream"]``: the upstream is untrusted, and its words are
data for the client, not instructions from toolbound (R11). A request is relayed on
the stream of the ``tools/call`` that caused it; with several calls in flight on one
upstream there is no telling which one an upstream request belongs to (the protocol
does not say), so it is refused rather than guessed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, cast

from toolbound.mcp.content import TRUST_META_KEY
from toolbound.mcp.relay import CALLER, Caller
from toolbound.results.encode import TRUST_MARK

try:
    import mcp_types as types
    from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
    from mcp.shared.message import ServerMessageMetadata
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from mcp.client.session import ClientRequestContext

    from toolbound.mcp.config import UpstreamConfig
    from toolbound.trace import Trace

__all__ = ["UPSTREAM_META_KEY", "Downstream", "Passage"]

UPSTREAM_META_KEY: Final = "io.toolbound/upstream"
"""Which upstream a relayed request, log message or notification comes from (``_meta``)."""

_LOG = logging.getLogger("toolbound.mcp")
_R = TypeVar("_R", bound=types.Result)
_P = TypeVar("_P", bound=types.RequestParams | types.NotificationParams)
ListKind = Literal["tools", "resources", "prompts"]


class Downstream:
    """The gateway's clients, as far as relaying to them goes.

    ``refresh_tools`` re-reads the upstreams' tools (the gateway's catalog) before a
    tools ``list_changed`` goes out, so a client that lists again sees the change.
    """

    def __init__(self, *, refresh_tools: Callable[[], Awaitable[None]] | None = None) -> None:
        self._refresh_tools = refresh_tools
        self._clients: weakref.WeakSet[Any] = weakref.WeakSet()
        self._subscribed: dict[str, weakref.WeakSet[Any]] = {}

    def seen(self, connection: object) -> None:
        """Note a client connection (it hears of list changes from now on)."""
        self._clients.add(connection)

    def subscribe(self, uri: str, connection: object) -> bool:
        """``connection`` wants ``uri``'s updates; whether it is the URI's first subscriber."""
        self.seen(connection)
        who = self._subscribed.setdefault(uri, weakref.WeakSet())
        first = len(who) == 0
        who.add(connection)
        return first

    def unsubscribe(self, uri: str, connection: object) -> bool:
        """``connection`` no longer wants ``uri``'s updates; whether nobody wants them now."""
        who = self._subscribed.get(uri)
        if who is None:
            return False
        who.discard(connection)
        if len(who) == 0:
            del self._subscribed[uri]
            return True
        return False

    def subscribers(self, uri: str) -> list[Any]:
        """The live connections subscribed to ``uri``."""
        return list(self._subscribed.get(uri, ()))

    async def resource_updated(self, uri: str, upstream: str) -> int:
        """Tell ``uri``'s subscribers it changed; how many were told."""
        told = 0
        for connection in self.subscribers(uri):
            with _quietly(connection):
                await connection.send_resource_updated(uri, meta=_meta(upstream))
                told += 1
        return told

    async def list_changed(self, kind: ListKind, upstream: str) -> int:
        """Tell every client the gateway has served that a list changed; how many."""
        if kind == "tools" and self._refresh_tools is not None:
            await self._refresh_tools()
        told = 0
        for connection in list(self._clients):
            send = {
                "tools": connection.send_tool_list_changed,
                "resources": connection.send_resource_list_changed,
                "prompts": connection.send_prompt_list_changed,
            }[kind]
            with _quietly(connection):
                await send(meta=_meta(upstream))
                told += 1
        return told


class Passage:
    """What one upstream sends outside its answers: the SDK client's callbacks for it."""

    def __init__(self, config: UpstreamConfig, downstream: Downstream | None = None) -> None:
        self.config = config
        self.downstream = downstream if downstream is not None else Downstream()
        self._in_flight: dict[int, tuple[Caller | None, Trace | None]] = {}
        self._ids = itertools.count()
        self._tasks: set[asyncio.Task[int]] = set()
        self.tools_changed: Callable[[], None] = _nothing
        """Called as the upstream says its tools changed, before they are listed again
        (the upstream closes its gate to calls: :meth:`~toolbound.mcp.upstream.Upstream.call`)."""

    def serving(self, trace: Trace | None) -> _Serving:
        """While inside, the current downstream call (:data:`CALLER`) is in flight here."""
        caller = CALLER.get()
        if caller is not None:
            self.downstream.seen(caller.connection)
        return _Serving(self._in_flight, next(self._ids), (caller, trace))

    # -- requests ------------------------------------------------------------------------

    async def sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        """``sampling/createMessage`` from the upstream: to its caller, if allowed."""
        del context  # the upstream's request id: nothing says which call it is for
        result_type: type[types.CreateMessageResult | types.CreateMessageResultWithTools] = (
            types.CreateMessageResult
            if params.tools is None
            else types.CreateMessageResultWithTools
        )
        request = types.CreateMessageRequest(params=_marked(params, self.config.name))
        return await self._relay(
            "sampling/createMessage",
            request,
            result_type,
            allowed=self.config.allow_sampling,
            setting="allow_sampling",
            capable=lambda caps: caps.sampling is not None,
        )

    async def elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """``elicitation/create`` from the upstream: to its caller, if allowed."""
        del context
        request = types.ElicitRequest(params=_marked(params, self.config.name))
        return await self._relay(
            "elicitation/create",
            request,
            types.ElicitResult,
            allowed=self.config.allow_elicitation,
            setting="allow_elicitation",
            capable=lambda caps: caps.elicitation is not None,
        )

    async def _relay(
        self,
        method: str,
        request: types.CreateMessageRequest | types.ElicitRequest,
        result_type: type[_R],
        *,
        allowed: bool,
        setting: str,
        capable: Callable[[types.ClientCapabilities], bool],
    ) -> _R | types.ErrorData:
        name = self.config.name
        callers = list(self._in_flight.values())
        caller, trace = callers[0] if len(callers) == 1 else (None, None)
        refusal: str | None = None
        if not allowed:
            refusal = (
                f"the gateway does not relay {method} from upstream {name} "
                f"({setting} is not set for it)"
            )
        elif not callers:
            refusal = f"no call of upstream {name} is in flight to relay {method} to"
        elif len(callers) > 1:
            refusal = (
                f"{len(callers)} calls of upstream {name} are in flight; the gateway cannot "
                f"tell which one {method} belongs to"
            )
        elif caller is None:
            refusal = f"the call in flight on upstream {name} has no MCP client to ask"
        elif not caller.session.can_send_request:
            refusal = f"the client's connection takes no {method} request (a 2026-07-28 one)"
        elif not capable(caller.session.client_capabilities or types.ClientCapabilities()):
            refusal = f"the client does not offer {method.split('/', maxsplit=1)[0]}"
        _record(trace, "upstream_request", method=method, upstream=name, refused=refusal)
        if refusal is not None:
            _LOG.info("upstream %s: %s refused (%s)", name, method, refusal)
            return types.ErrorData(code=types.INVALID_REQUEST, message=refusal)
        assert caller is not None  # noqa: S101 - refusal is set otherwise
        try:
            answer: _R = await caller.session.send_request(
                request,
                result_type,
                metadata=ServerMessageMetadata(related_request_id=caller.request_id),
            )
        except MCPError as exc:
            _record(trace, "upstream_request_answered", method=method, error=exc.error.message)
            return exc.error
        except Exception as exc:  # noqa: BLE001 - the upstream gets an error, not a hang
            why = f"the client could not be asked ({type(exc).__name__})"
            _record(trace, "upstream_request_answered", method=method, error=why)
            return types.ErrorData(code=types.INTERNAL_ERROR, message=why)
        _record(trace, "upstream_request_answered", method=method, error=None)
        return answer

    # -- notifications ----------------------------------------------------------------------

    async def logging(self, params: types.LoggingMessageNotificationParams) -> None:
        """``notifications/message`` from the upstream: to the caller(s), at their level."""
        name = self.config.name
        if not self._in_flight:
            _LOG.debug("upstream %s: a log message outside any call, not relayed", name)
        for caller, trace in list(self._in_flight.values()):
            relayed = caller is not None and caller.hears(params.level)
            _record(trace, "upstream_log", upstream=name, level=params.level, relayed=relayed)
            if caller is None or not relayed:
                continue
            marked = params.model_copy(
                update={"logger": f"{name}/{params.logger}" if params.logger else name}
            )
            notification = types.LoggingMessageNotification(params=_marked(marked, name))
            with _quietly(caller.connection):
                await caller.session.send_notification(
                    notification, related_request_id=caller.request_id
                )

    async def message(self, message: types.ServerNotification | Exception) -> None:
        """Any other notification: resource updates and list changes."""
        name = self.config.name
        if isinstance(message, types.ResourceUpdatedNotification):
            await self.downstream.resource_updated(str(message.params.uri), name)
        elif isinstance(message, types.ToolListChangedNotification):
            self.tools_changed()  # at once: no call goes out before the tools are compared
            # Re-reading the tools asks this upstream, whose answer this very handler
            # would have to let through: so not here, in a task of its own.
            task = asyncio.create_task(self.downstream.list_changed("tools", name))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        elif isinstance(message, types.ResourceListChangedNotification):
            await self.downstream.list_changed("resources", name)
        elif isinstance(message, types.PromptListChangedNotification):
            await self.downstream.list_changed("prompts", name)


class _Serving:
    """One call in flight on an upstream, for as long as the block it guards runs."""

    __slots__ = ("_entry", "_in_flight", "_key")

    def __init__(
        self,
        in_flight: dict[int, tuple[Caller | None, Trace | None]],
        key: int,
        entry: tuple[Caller | None, Trace | None],
    ) -> None:
        self._in_flight = in_flight
        self._key = key
        self._entry = entry

    def __enter__(self) -> None:
        self._in_flight[self._key] = self._entry

    def __exit__(self, *_exc: object) -> None:
        del self._in_flight[self._key]


def _meta(upstream: str) -> dict[str, Any]:
    return {TRUST_META_KEY: TRUST_MARK, UPSTREAM_META_KEY: upstream}


def _marked(params: _P, upstream: str) -> _P:
    """``params`` with the untrusted mark and the upstream's name in ``_meta``."""
    meta = {**(params.meta or {}), **_meta(upstream)}
    return cast("_P", params.model_copy(update={"meta": meta}))


def _record(trace: Trace | None, kind: str, **data: object) -> None:
    if trace is not None:
        trace.add(kind, None, data)


@contextlib.contextmanager
def _quietly(connection: object) -> Iterator[None]:
    """A client that went away misses the message; the others still get it."""
    try:
        with warnings.catch_warnings():
            # Log messages are deprecated from 2026-07-28 (SEP-2577); 2025-era clients use them.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            yield
    except Exception as exc:  # noqa: BLE001 - one client's failure is not the upstream's
        _LOG.info("could not relay to client %r (%r)", connection, exc)


def _nothing() -> None:
    """The default :attr:`Passage.tools_changed`: no gate to close."""

"""The client side of the gateway: one connection per upstream MCP server (R18).

An upstream is untrusted. What it says about its tools is imported as data and
checked, never believed:

* a tool's *definition* is its name, description, input schema and output schema;
  its *version* is :func:`definition_digest` of that definition (RFC 8785 canonical
  JSON, SHA-256), so any change to what the model is shown is a new version;
* annotations (``readOnlyHint`` and friends) are kept for display only — the effect
  class of every tool comes from the gateway's configuration;
* schemas are closed with :func:`close_schema` (an object schema that lists its
  properties and says nothing else gets ``additionalProperties: false``), so an
  invented argument or result field is rejected (R4, R11).

:class:`Upstream` owns one live connection (a stdio child process or a streamable
HTTP session) on the event loop that started it, reconnects after a connection is
lost, and maps every failure at this boundary onto the typed signals of the retry
matrix (:func:`call_failure`, R9 and R10)::

    could not connect, nothing sent             NotReached          retry
    connection lost / no answer in time         write: ResponseLost  (outcome unknown)
                                                read:  NoResponse    (re-read)
    JSON-RPC error: parse, invalid request or   BusinessRejection   never retried
      params, unknown method or tool
    any other JSON-RPC error                    write: MaybeCommitted (outcome unknown)
                                                read:  Transient     (backoff)
    an ``isError`` result                       NotCommitted, with the tool's own text

:class:`UpstreamTool` is the tool implementation the gateway registers for each
imported tool: it forwards the call, with the invocation's idempotency key in
``_meta`` (``io.toolbound/idempotency-key``) for tools configured ``native_key``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, NoReturn, TextIO, TypeVar, cast

from toolbound._errors import Rejection
from toolbound.execution.retry import (
    BusinessRejection,
    MaybeCommitted,
    NoResponse,
    NotReached,
    ResponseLost,
    Transient,
)
from toolbound.execution.tool import CommitUnknown, NotCommitted
from toolbound.gates.normalize import canonical_json
from toolbound.mcp.child import Child
from toolbound.mcp.passage import Passage
from toolbound.mcp.relay import PROGRESS
from toolbound.mcp.rounds import ROUNDS, Round, missing_capabilities, refused_requests

try:
    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
    from pydantic import RootModel, ValidationError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

from toolbound.mcp.telemetry import client_span, continued

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Coroutine, Mapping

    from toolbound._model import JSONObject, JSONValue
    from toolbound.execution.tool import ToolContext
    from toolbound.mcp.config import UpstreamConfig
    from toolbound.mcp.telemetry import McpTelemetry

__all__ = [
    "IDEMPOTENCY_META_KEY",
    "Upstream",
    "UpstreamTool",
    "UpstreamUnavailable",
    "WireResult",
    "call_failure",
    "close_schema",
    "definition_digest",
    "definition_of",
    "digest_or_none",
    "error_text",
    "result_value",
]

IDEMPOTENCY_META_KEY: Final = "io.toolbound/idempotency-key"
"""Where a ``native_key`` upstream finds the invocation's idempotency key (``_meta``)."""

_LOG = logging.getLogger("toolbound.mcp")
_T = TypeVar("_T")

WireResult = dict[str, Any]
"""A ``tools/call`` result as the upstream sent it (its JSON object), once the SDK has
checked it against the negotiated protocol version's schema."""


class _AsSent(RootModel[WireResult]):
    """The result type asked of the SDK for a ``tools/call``: the answer as it came.

    The SDK checks every answer against the version's schema whatever type it is
    asked for; this one keeps the JSON object, with no result model built only to
    be read and dumped again.
    """


_PAGES: Final = 100  # a paginator that never ends cannot hang a refresh
# JSON-RPC errors answered before anything ran: the same request fails the same way.
_REFUSALS: Final = frozenset(
    {types.PARSE_ERROR, types.INVALID_REQUEST, types.METHOD_NOT_FOUND, types.INVALID_PARAMS}
)
# Keywords that make "which properties are allowed" depend on more than `properties`:
# closing such a schema could reject what it accepts, so it is left as it is.
_OPEN_ENDED: Final = frozenset(
    {
        "additionalProperties", "unevaluatedProperties", "patternProperties", "allOf",
        "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$dynamicRef",
        "dependentSchemas",
    }
)  # fmt: skip


# -- pure functions over definitions and results -----------------------------------------


def definition_of(tool: types.Tool) -> JSONObject:
    """What the model is shown of ``tool``: name, description and both schemas."""
    return {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": cast("JSONValue", tool.input_schema),
        "outputSchema": cast("JSONValue", tool.output_schema),
    }


def definition_digest(definition: JSONObject) -> str:
    """``sha256:`` and the hex SHA-256 of the RFC 8785 form of ``definition``.

    Raises :class:`~toolbound.Rejection` when the definition holds a value RFC 8785
    cannot represent (a huge integer, NaN): such a tool is not served.
    """
    return "sha256:" + hashlib.sha256(canonical_json(definition)).hexdigest()


def close_schema(schema: Mapping[str, object]) -> dict[str, object]:
    """``schema`` with ``additionalProperties: false`` on every object that lists its properties.

    Only where that cannot change what the schema means otherwise: an object schema
    with ``properties`` and none of the keywords that let other properties in (or
    compose the schema with others). Nested property, item and ``$defs`` schemas
    are closed the same way.
    """
    out = dict(schema)
    props = out.get("properties")
    if isinstance(props, dict):
        out["properties"] = {
            k: close_schema(v) if isinstance(v, dict) else v for k, v in props.items()
        }
        if not _OPEN_ENDED.intersection(out):
            out["additionalProperties"] = False
    items = out.get("items")
    if isinstance(items, dict):
        out["items"] = close_schema(items)
    for defs in ("$defs", "definitions"):
        table = out.get(defs)
        if isinstance(table, dict):
            out[defs] = {k: close_schema(v) if isinstance(v, dict) else v for k, v in table.items()}
    return out


def result_value(result: WireResult, *, structured: bool) -> JSONValue:
    """The observation in a successful ``tools/call`` result.

    ``structured`` (the tool declares an output schema): the structured content,
    which the runtime then checks against that schema (``None`` if missing, which
    fails the check). Otherwise the structured content if any, else the content:
    the text of a single text block without annotations, or the blocks themselves
    as JSON (as :func:`normal_blocks` leaves them).
    """
    found = result.get("structuredContent")
    if structured or found is not None:
        return cast("JSONValue", found)
    blocks: list[dict[str, Any]] = result.get("content", [])
    if _single_text(blocks) and "annotations" not in blocks[0]:
        return cast("str", blocks[0]["text"])
    # Annotated text stays a block, so that its annotations reach the client.
    return cast("JSONValue", blocks)


def normal_blocks(result: WireResult) -> WireResult:
    """``result`` with its content blocks as the SDK's models dump them (unset fields left out).

    Only a result whose blocks become the observation needs it (no structured
    content, not a single text block); any other is returned as it is.
    Raises :class:`~pydantic.ValidationError` for blocks the models refuse.
    """
    blocks = result.get("content", [])
    if result.get("structuredContent") is not None or (
        _single_text(blocks) and "annotations" not in blocks[0]
    ):
        return result
    model = types.CallToolResult.model_validate(result, by_name=False)
    blocks = [b.model_dump(by_alias=True, mode="json", exclude_none=True) for b in model.content]
    return {**result, "content": blocks}


def _single_text(blocks: list[dict[str, Any]]) -> bool:
    return len(blocks) == 1 and blocks[0].get("type") == "text"


def error_text(result: WireResult) -> str:
    """The text an ``isError`` result carries, all of it (R18: never hide the real error)."""
    texts = [b["text"] for b in result.get("content", []) if b.get("type") == "text"]
    if texts:
        return "\n".join(texts)
    found = result.get("structuredContent")
    if found is not None:
        return str(found)
    return "the upstream tool reported an error without any text"


def call_failure(exc: BaseException, *, write: bool) -> NotCommitted | CommitUnknown | None:
    """The typed signal for an exception raised while one ``tools/call`` was in flight.

    ``None`` for an exception this boundary does not know: the runtime then treats
    it as it treats any unclassified tool error (a write's outcome is unknown).
    """
    if isinstance(exc, TimeoutError | ValidationError) or (
        isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED
    ):
        why = (
            "no answer came in time"
            if isinstance(exc, TimeoutError)
            else "the answer was unreadable"
            if isinstance(exc, ValidationError)
            else "the connection was lost"
        )
        if write:
            return ResponseLost(
                f"the call was sent upstream but {why}; it may have taken effect",
                evidence={"error": type(exc).__name__},
            )
        return NoResponse(f"the call was sent upstream but {why}")
    if isinstance(exc, MCPError):
        text = f"the upstream answered with error {exc.code}: {exc.error.message}"
        if exc.code in _REFUSALS:
            return BusinessRejection(text)
        if write:
            return MaybeCommitted(text, status=exc.code, evidence={"code": exc.code})
        return Transient(text)
    return None


class UpstreamUnavailable(NoResponse):
    """A read was in flight when its upstream's process ended: ``upstream_unavailable``.

    The message says how it ended (exit status, the last lines of its stderr). For the
    retry matrix it is a read whose answer never came (R10): re-read within the budget,
    on a new process.
    """

    def __init__(self, message: str) -> None:
        # NoResponse's own __init__ fixes its code; this signal has another.
        NotCommitted.__init__(
            self,
            message,
            code="upstream_unavailable",
            recoverable=True,
            hint="the upstream server stopped; the same call may work once it runs again",
        )


def _ended(
    upstream: str, child: Child | None, *, write: bool
) -> NotCommitted | CommitUnknown | None:
    """The signal for a call in flight when ``child`` ended; None while it runs."""
    ended = None if child is None else child.exit
    if ended is None:
        return None
    text = f"upstream {upstream} {ended.describe()}"
    if write:
        # R9: the call was sent; the process may have done it before it ended.
        return ResponseLost(f"{text}; the call may have taken effect", evidence=ended.as_json())
    return UpstreamUnavailable(text)


# -- the connection ------------------------------------------------------------------


class Upstream:
    """One upstream MCP server, connected on the event loop that started it.

    All I/O happens on that loop: a call made from another loop or thread (a person
    approving a parked call from a console thread) is handed over to it. The
    connection is held by one task, as anyio requires; when it breaks, the next
    call opens a new one (a new child process, for stdio).
    """

    def __init__(
        self,
        config: UpstreamConfig,
        *,
        errlog: TextIO | None = None,
        passage: Passage | None = None,
    ) -> None:
        self.config = config
        self.passage = passage if passage is not None else Passage(config)
        """Where its requests, log messages and notifications go (:mod:`~toolbound.mcp.passage`)."""
        self._errlog = errlog if errlog is not None else _stderr()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Client | None = None
        self._closing: asyncio.Event | None = None
        self._holder: asyncio.Task[None] | None = None
        self._child: Child | None = None  # the process of a stdio upstream, once started
        self._modern: _ModernConnection | None = None  # for relay_input_requests
        self._lock: asyncio.Lock | None = None
        # Closed from the moment it says its tools changed until they are compared.
        self._compared: asyncio.Event | None = None
        self.passage.tools_changed = self._tools_changed
        self.connects = 0
        """How many connections were opened (a reconnect adds one)."""
        self.telemetry: McpTelemetry | None = None
        """Where each ``tools/call``'s client span and duration go (R14; set by the gateway)."""

    @property
    def name(self) -> str:
        """The upstream's configured name."""
        return self.config.name

    async def start(self) -> None:
        """Bind to the running loop and connect; raises if the first connection fails."""
        self._loop = asyncio.get_running_loop()
        self._lock = asyncio.Lock()
        self._compared = asyncio.Event()
        self._compared.set()
        await self._connected()

    async def stop(self) -> None:
        """Close the connection (and stop a stdio child)."""
        await self._disconnect()
        if self._modern is not None:
            await self._modern.disconnect()

    def compared(self) -> None:
        """Its tools were listed and compared with the served ones: calls may go out again."""
        gate, loop = self._compared, self._loop
        if gate is None or loop is None:
            return
        if _running_loop() is loop:
            gate.set()
        else:
            loop.call_soon_threadsafe(gate.set)

    def _tools_changed(self) -> None:
        # On the home loop, in the notification's handler: before anything else runs.
        if self._compared is not None:
            self._compared.clear()

    async def list_tools(self) -> list[types.Tool]:
        """Every tool the upstream lists now, across pages."""
        return await self._on_home(self._list_tools())

    async def list_resources(self) -> list[types.Resource]:
        """Every resource the upstream lists now, across pages."""
        return await self._on_home(self._pages("resources"))

    async def list_resource_templates(self) -> list[types.ResourceTemplate]:
        """Every resource template the upstream lists now, across pages."""
        return await self._on_home(self._pages("resource_templates"))

    async def list_prompts(self) -> list[types.Prompt]:
        """Every prompt the upstream lists now, across pages."""
        return await self._on_home(self._pages("prompts"))

    async def read_resource(self, uri: str, *, timeout: float | None) -> types.ReadResourceResult:
        """One ``resources/read``; failures come out as the signals of :func:`call_failure`."""
        return await self._on_home(self._read(uri, timeout))

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> types.GetPromptResult:
        """One ``prompts/get``, forwarded as it is."""
        return await self._on_home(self._get_prompt(name, arguments))

    async def get_prompt_round(
        self, name: str, arguments: dict[str, str], round_: Round
    ) -> WireResult:
        """One ``prompts/get`` round over the 2026-07-28 connection, answered as it came.

        An ``InputRequiredResult`` included (:mod:`~toolbound.mcp.rounds`).
        """
        return await self._on_home(self._get_prompt_round(name, arguments, round_))

    async def complete(self, params: types.CompleteRequestParams) -> types.CompleteResult:
        """One ``completion/complete``, forwarded as it is."""
        return await self._on_home(self._complete(params))

    async def subscribes(self) -> bool:
        """Whether the upstream offers resource subscriptions (``resources.subscribe``)."""
        return await self._on_home(self._subscribes())

    async def subscribe(self, uri: str, *, subscribe: bool = True) -> None:
        """``resources/subscribe`` (or ``resources/unsubscribe``) for ``uri``, forwarded."""
        await self._on_home(self._subscribe(uri, subscribe=subscribe))

    async def call(
        self,
        name: str,
        arguments: JSONObject,
        *,
        meta: Mapping[str, object] | None,
        timeout: float | None,
        write: bool,
        check: Callable[[], None] | None = None,
    ) -> WireResult:
        """One ``tools/call``; failures come out as the signals of :func:`call_failure`.

        After the upstream said its tools changed, the call waits (within ``timeout``)
        until they are compared, then ``check`` runs — it raises to keep a call whose
        tool changed from going out — and only then is the call sent (R18).
        """
        return await self._on_home(
            self._call(name, arguments, meta, timeout, write=write, check=check)
        )

    async def call_round(
        self,
        name: str,
        arguments: JSONObject,
        *,
        round_: Round,
        meta: Mapping[str, object] | None,
        timeout: float | None,
        write: bool,
        check: Callable[[], None] | None = None,
    ) -> WireResult:
        """One ``tools/call`` round over the 2026-07-28 connection (:mod:`~toolbound.mcp.rounds`).

        The caller's ``inputResponses`` and the upstream's own ``requestState`` go
        with it; the answer may be an ``InputRequiredResult``, returned as it came.
        """
        return await self._on_home(
            self._call_round(name, arguments, round_, meta, timeout, write=write, check=check)
        )

    # -- on the home loop ----------------------------------------------------------

    async def _on_home(self, coro: Coroutine[Any, Any, _T]) -> _T:
        loop = self._loop
        if loop is None:
            coro.close()
            msg = f"upstream {self.name} was not started"
            raise NotReached(msg)
        if asyncio.get_running_loop() is loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    async def _list_tools(self) -> list[types.Tool]:
        client = await self._connected()
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_PAGES):
            try:
                page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            except MCPError as exc:
                if exc.code == types.CONNECTION_CLOSED:
                    await self._disconnect()
                raise
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def _pages(self, kind: str) -> list[Any]:
        client = await self._connected()
        lister = {
            "resources": client.list_resources,
            "resource_templates": client.list_resource_templates,
            "prompts": client.list_prompts,
        }[kind]
        found: list[Any] = []
        cursor: str | None = None
        for _ in range(_PAGES):
            page = await lister(cursor=cursor, cache_mode="refresh")
            found.extend(getattr(page, kind))
            cursor = page.next_cursor
            if cursor is None:
                break
        return found

    async def _read(self, uri: str, timeout: float | None) -> types.ReadResourceResult:
        try:
            client = await self._connected()
        except Exception as exc:
            raise NotReached(self._unreached(exc)) from exc
        try:
            async with asyncio.timeout(timeout):
                return await client.read_resource(uri, cache_mode="refresh")
        except Exception as exc:
            signal = call_failure(exc, write=False)
            if signal is None:
                raise
            raise signal from exc

    async def _get_prompt(self, name: str, arguments: dict[str, str]) -> types.GetPromptResult:
        client = await self._connected()
        return await client.get_prompt(name, arguments)

    async def _get_prompt_round(
        self, name: str, arguments: dict[str, str], round_: Round
    ) -> WireResult:
        if self._modern is None:
            self._modern = _ModernConnection(self.config, self._errlog)
        client = await self._modern.connected()
        params = _round_params({"name": name, "arguments": arguments}, round_)
        request = types.GetPromptRequest(params=types.GetPromptRequestParams.model_validate(params))
        answer = await client.session.send_request(request, _AsSent)
        return answer.root

    async def _complete(self, params: types.CompleteRequestParams) -> types.CompleteResult:
        client = await self._connected()
        context = None if params.context is None else params.context.arguments
        return await client.complete(
            params.ref, {"name": params.argument.name, "value": params.argument.value}, context
        )

    async def _subscribes(self) -> bool:
        client = await self._connected()
        resources = client.server_capabilities.resources
        return resources is not None and bool(resources.subscribe)

    async def _subscribe(self, uri: str, *, subscribe: bool) -> None:
        client = await self._connected()
        # The 2025-era request, on the 2025-era connection the gateway opens.
        request: types.SubscribeRequest | types.UnsubscribeRequest = (
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
            if subscribe
            else types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
        )
        await client.session.send_request(request, types.EmptyResult)

    async def _call(
        self,
        name: str,
        arguments: JSONObject,
        meta: Mapping[str, object] | None,
        timeout: float | None,
        *,
        write: bool,
        check: Callable[[], None] | None,
    ) -> WireResult:
        try:
            client = await self._connected()
        except Exception as exc:
            # Nothing of this call was sent: the connection could not even be made.
            raise NotReached(self._unreached(exc)) from exc
        await self._settled(timeout)
        if check is not None:
            check()  # nothing awaited from here to the send: no change slips in between
        try:
            request = types.CallToolRequest(
                params=types.CallToolRequestParams(
                    name=name,
                    arguments=dict(arguments),
                    _meta=cast("types.RequestParamsMeta", dict(meta)) if meta else None,
                )
            )
            async with asyncio.timeout(timeout):
                # Not Client.call_tool: it would check the result against the upstream's
                # own output schema, and the runtime checks it against the closed one (R11).
                with continued(meta):
                    answer = await client.session.send_request(
                        request, _AsSent, progress_callback=PROGRESS.get()
                    )
            return normal_blocks(answer.root)
        except Exception as exc:
            if isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED:
                await self._disconnect()
            signal = _ended(self.name, self._child, write=write) or call_failure(exc, write=write)
            if signal is None:
                raise
            raise signal from exc

    async def _call_round(
        self,
        name: str,
        arguments: JSONObject,
        round_: Round,
        meta: Mapping[str, object] | None,
        timeout: float | None,
        *,
        write: bool,
        check: Callable[[], None] | None,
    ) -> WireResult:
        if self._modern is None:
            self._modern = _ModernConnection(self.config, self._errlog)
        modern = self._modern
        try:
            client = await modern.connected()
        except Exception as exc:
            raise NotReached(self._unreached(exc)) from exc
        await self._settled(timeout)
        if check is not None:
            check()
        try:
            request = _round_request(name, arguments, round_, meta)
            async with asyncio.timeout(timeout):
                with continued(meta):
                    answer = await client.session.send_request(
                        request, _AsSent, progress_callback=PROGRESS.get()
                    )
        except Exception as exc:
            if isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED:
                await modern.disconnect()
            signal = call_failure(exc, write=write)
            if signal is None:
                raise
            raise signal from exc
        if answer.root.get("resultType") == "input_required":
            return answer.root
        return normal_blocks(answer.root)

    async def _settled(self, timeout: float | None) -> None:
        """Wait until the tools the upstream said changed are compared; NotReached if not."""
        gate = self._compared
        if gate is None or gate.is_set():
            return
        try:
            async with asyncio.timeout(timeout):
                await gate.wait()
        except TimeoutError:
            msg = (
                f"upstream {self.name} said its tools changed and they were not compared "
                "in time; nothing was sent"
            )
            raise NotReached(msg) from None

    def _unreached(self, exc: Exception) -> str:
        """Why a connection could not be made, with how its process ended if it did."""
        msg = f"upstream {self.name} could not be reached ({type(exc).__name__})"
        ended = None if self._child is None else self._child.exit
        return msg if ended is None else f"{msg}: it {ended.describe()}"

    async def _connected(self) -> Client:
        if self._client is not None:
            return self._client
        assert self._lock is not None  # noqa: S101 - set by start()
        async with self._lock:
            if self._client is None:
                await self._open()
            assert self._client is not None  # noqa: S101 - _open raises otherwise
            return self._client

    async def _open(self) -> None:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        closing = asyncio.Event()
        self._closing = closing
        self._holder = asyncio.create_task(self._hold(ready, closing))
        self._client = await ready
        self.connects += 1

    async def _hold(self, ready: asyncio.Future[Client], closing: asyncio.Event) -> None:
        """Enter and leave the client in this one task, as anyio's scopes require."""

        def opening() -> Client:
            passage = self.passage
            return Client(
                self._transport(),
                client_info=_CLIENT_INFO,
                # The handshake era: server-to-client requests, logging/setLevel and
                # resources/subscribe, which the gateway relays, are its features.
                mode="legacy",
                sampling_callback=passage.sampling,
                elicitation_callback=passage.elicitation,
                logging_callback=passage.logging,
                message_handler=passage.message,
            )

        try:
            ended = await _held(opening, ready, closing)
            if ended is not None:
                _LOG.info("upstream %s: connection closed (%s)", self.name, type(ended).__name__)
        finally:
            if self._closing is closing:
                self._client = None

    async def _disconnect(self) -> None:
        self._client = None
        await _release(self._holder, self._closing)

    def _transport(self) -> Any:  # noqa: ANN401 - the SDK's Transport is a Protocol of streams
        cfg = self.config
        if cfg.url is not None:
            return _http_transport(cfg.url, _headers(cfg))
        params = StdioServerParameters(
            command=cfg.command[0], args=list(cfg.command[1:]), env=dict(cfg.env), cwd=cfg.cwd
        )
        if sys.platform == "win32":  # pragma: no cover - the SDK's own, without exit details
            return stdio_client(params, errlog=self._errlog)
        self._child = Child(params, self._errlog)
        return self._child.streams()


async def _held(
    opening: Callable[[], Client], ready: asyncio.Future[Client], closing: asyncio.Event
) -> BaseException | None:
    """Open a client, hand it to ``ready`` and keep it until ``closing``, in this one task.

    A failure before it was ready goes to ``ready``; one that ends a ready connection
    is returned (the caller may note it); what is neither an error nor a cancellation
    passes on.
    """
    try:
        async with opening() as client:
            ready.set_result(client)
            await closing.wait()
    except BaseException as exc:
        if not ready.done():
            ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
        elif not isinstance(exc, asyncio.CancelledError | Exception):
            raise
        else:
            return exc
    return None


async def _release(holder: asyncio.Task[None] | None, closing: asyncio.Event | None) -> None:
    """Close a connection's holding task and wait for it (bounded), unless it is this task."""
    if closing is not None:
        closing.set()
    if holder is not None and holder is not asyncio.current_task():
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(holder, timeout=5.0)


def _headers(cfg: UpstreamConfig) -> dict[str, str]:
    """An HTTP upstream's headers: the credential from the environment, never the file."""
    if cfg.bearer_env is None:
        return {}
    return {"Authorization": f"Bearer {os.environ.get(cfg.bearer_env, '')}"}


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


_CLIENT_INFO = types.Implementation(name="toolbound-gateway", version="1")


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with our headers, closing the HTTP client with the connection."""
    import httpx2  # noqa: PLC0415 - the SDK's own HTTP client, only for URL upstreams

    from toolbound.mcp.keepalive import KeepAliveTransport  # noqa: PLC0415 - as httpx2

    # The SDK's defaults: a response stream may stay open, so reads wait longer.
    timeout = httpx2.Timeout(30.0, read=300.0)
    # The connection outlives each call (toolbound.mcp.keepalive).
    transport = KeepAliveTransport()
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, transport=transport) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


async def _never(*_args: object) -> Any:  # noqa: ANN401 - stands for any SDK callback
    msg = "the gateway answers no input request itself"
    raise NotImplementedError(msg)


_NEVER: Any = _never


def _round_request(
    name: str, arguments: JSONObject, round_: Round, meta: Mapping[str, object] | None
) -> types.CallToolRequest:
    """One round's ``tools/call``: the caller's answers and the upstream's own state."""
    params: dict[str, Any] = {"name": name, "arguments": dict(arguments)}
    if meta:
        params["_meta"] = dict(meta)
    params = _round_params(params, round_)
    return types.CallToolRequest(params=types.CallToolRequestParams.model_validate(params))


def _round_params(params: dict[str, Any], round_: Round) -> dict[str, Any]:
    """``params`` with the caller's answers and the upstream's own state, if any."""
    if round_.responses is not None:
        params["inputResponses"] = round_.responses
    if round_.state is not None:
        params["requestState"] = round_.state
    return params


def _stderr() -> TextIO:
    """Where a child's stderr goes: ours, or the original one if ours was replaced."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__ or sys.stderr
    return sys.stderr


class _ModernConnection:
    """An upstream's 2026-07-28 connection, for ``relay_input_requests``.

    Opened at its first call and held by one task, as anyio requires
    (:mod:`toolbound.mcp.rounds`).
    """

    def __init__(self, config: UpstreamConfig, errlog: TextIO) -> None:
        self.config = config
        self._errlog = errlog
        self._client: Client | None = None
        self._closing: asyncio.Event | None = None
        self._holder: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def connected(self) -> Client:
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._client is None:
                ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
                closing = asyncio.Event()
                self._closing = closing
                self._holder = asyncio.create_task(self._hold(ready, closing))
                self._client = await ready
            return self._client

    async def _hold(self, ready: asyncio.Future[Client], closing: asyncio.Event) -> None:
        """Enter and leave the 2026-07-28 client in this one task."""

        def opening() -> Client:
            return Client(
                self._transport(),
                client_info=_CLIENT_INFO,
                mode=MODERN_PROTOCOL_VERSIONS[-1],
                # Never called: the caller answers the input requests, not the gateway.
                # They declare what the caller may be asked (:mod:`toolbound.mcp.rounds`).
                sampling_callback=_NEVER if self.config.allow_sampling else None,
                elicitation_callback=_NEVER if self.config.allow_elicitation else None,
                list_roots_callback=_NEVER,
                cache=None,
            )

        try:
            await _held(opening, ready, closing)
        finally:
            if self._closing is closing:
                self._client = None

    async def disconnect(self) -> None:
        self._client = None
        await _release(self._holder, self._closing)

    def _transport(self) -> Any:  # noqa: ANN401 - the SDK's Transport
        cfg = self.config
        if cfg.url is not None:
            return _http_transport(cfg.url, _headers(cfg))
        params = StdioServerParameters(
            command=cfg.command[0], args=list(cfg.command[1:]), env=dict(cfg.env), cwd=cfg.cwd
        )
        return stdio_client(params, errlog=self._errlog)


@dataclass(frozen=True, slots=True)
class UpstreamTool:
    """The implementation of one imported tool: forward the call to its upstream.

    ``structured`` says whether the served spec has an output schema (then the
    structured content is the observation); ``native_key`` whether the upstream
    takes the invocation's idempotency key; ``attempt_timeout`` bounds one attempt
    (a later answer counts as lost, so the retry matrix decides what follows).
    """

    telemetry_tool_type: ClassVar[str] = "extension"
    """``gen_ai.tool.type`` on its spans: the GenAI conventions' name for a tool run
    outside the agent, through an API it reaches."""

    upstream: Upstream
    tool: str
    write: bool
    structured: bool = False
    native_key: bool = False
    attempt_timeout: float | None = None
    served: Callable[[], bool] | None = None
    """Whether this definition is still the one served; asked just before each call
    goes out (a changed tool is quarantined, and its calls are not sent)."""

    async def __call__(self, arguments: JSONObject, ctx: ToolContext) -> JSONValue:
        """Forward one attempt; an ``isError`` result becomes :class:`NotCommitted`."""
        meta: dict[str, object] = {}
        if self.native_key and ctx.idempotency_key is not None:
            meta[IDEMPOTENCY_META_KEY] = ctx.idempotency_key
        timeout = ctx.deadline_in
        if self.attempt_timeout is not None:
            timeout = min(timeout, self.attempt_timeout)
        upstream = self.upstream
        with client_span(
            upstream.telemetry,
            upstream=upstream.name,
            url=upstream.config.url,
            tool=self.tool,
            ctx=ctx,
            meta=meta,
        ) as sent:
            round_ = ROUNDS.get() if upstream.config.relay_input_requests else None
            with upstream.passage.serving(ctx.trace):
                if round_ is None:
                    result = await upstream.call(
                        self.tool,
                        arguments,
                        meta=sent.meta or None,
                        timeout=timeout,
                        write=self.write,
                        check=self.refuse_if_changed,
                    )
                else:
                    self._check_round(round_, ctx)
                    if round_.continues is not None and ctx.trace is not None:
                        ctx.trace.record(
                            "input_round",
                            continues=round_.continues,
                            answered=sorted(round_.responses or {}),
                        )
                    result = await upstream.call_round(
                        self.tool,
                        arguments,
                        round_=round_,
                        meta=sent.meta or None,
                        timeout=timeout,
                        write=self.write,
                        check=self.refuse_if_changed,
                    )
            sent.answered(result)
        if round_ is not None and result.get("resultType") == "input_required":
            self._ask(round_, result, ctx)
        if result.get("isError") is True:
            # The tool's own word that it failed: its text reaches the model whole,
            # and no output contract applies to it.
            raise NotCommitted(
                error_text(result),
                code="upstream_tool_error",
                recoverable=True,
                hint="the upstream tool reported this error; fix the cause and make a new call",
            )
        return result_value(result, structured=self.structured)

    def _check_round(self, round_: Round, ctx: ToolContext) -> None:
        """Refuse a retry whose upstream state was sealed for other arguments."""
        if round_.digest is not None and round_.digest != ctx.invocation.digest:
            msg = (
                "the requestState of this retry was given for a call with other arguments; "
                "nothing was sent"
            )
            raise NotCommitted(
                msg,
                code="input_state_mismatch",
                hint="retry with the same arguments as the call that asked for input",
            )

    def _ask(self, round_: Round, result: WireResult, ctx: ToolContext) -> NoReturn:
        """The upstream asks the caller for input: hand it on, or refuse what may not pass."""
        requests = result.get("inputRequests") or {}
        config = self.upstream.config
        allow = {
            "allow_elicitation": config.allow_elicitation,
            "allow_sampling": config.allow_sampling,
        }
        why = refused_requests(requests, allow=allow)
        missing = missing_capabilities(requests, round_.capabilities)
        if why is None and missing:
            round_.missing = missing
            why = f"the caller's client does not offer {', '.join(sorted(missing))}"
        if why is not None:
            msg = f"upstream {config.name}: {why}"
            raise NotCommitted(
                msg,
                code="input_request_refused",
                recoverable=False,
                hint="the gateway's configuration or the caller's client does not allow it",
            )
        round_.asked = result
        if ctx.trace is not None:
            ctx.trace.record(
                "input_required",
                upstream=config.name,
                requests={key: r.get("method") for key, r in requests.items()},
            )
        msg = f"upstream {config.name} asks the caller for input before {self.tool!r} can answer"
        raise NotCommitted(
            msg,
            code="input_required",
            hint="answer its inputRequests and retry the same call with them",
        )

    def refuse_if_changed(self) -> None:
        """Raise ``tool_quarantined`` when this definition is no longer the one served."""
        if self.served is not None and not self.served():
            msg = (
                f"upstream {self.upstream.name} changed {self.tool!r} before this call went "
                "out; the new definition waits for a person's approval, and nothing was sent"
            )
            raise NotCommitted(
                msg,
                code="tool_quarantined",
                hint="the tool is not served until a person approves its new definition",
            )


def digest_or_none(definition: JSONObject) -> str | None:
    """:func:`definition_digest`, or ``None`` for a definition that has no canonical form."""
    try:
        return definition_digest(definition)
    except Rejection:
        return None

"""OpenTelemetry spans for MCP, after the MCP semantic conventions (R14).

Two kinds of span, from the tracer of the runtime's
:class:`~toolbound.otel.OpenTelemetrySink` (else the global tracer provider's), each
with its operation-duration histogram from the sink's meter
(``mcp.server.operation.duration``, ``mcp.client.operation.duration``):

* a **server span** per JSON-RPC message a client sends to ``mcp-serve`` or the
  gateway (:class:`ServerSpans`, the SDK server's middleware): kind SERVER, named
  ``{mcp.method.name} {target}`` (the tool or prompt name, when there is one), a
  child of the trace context the client put in the request's ``params._meta``. It is
  the active span while the request is handled, so a ``tools/call``'s
  ``execute_tool`` span is its child;
* a **client span** per ``tools/call`` the gateway sends an upstream
  (:func:`client_span`): kind CLIENT, a child of the attempt span that made it, its
  context injected into the request's ``_meta`` (``traceparent``, ``tracestate``,
  and baggage when the deployment's propagators write it), as the conventions'
  propagation section asks.

A session id is recorded as a digest (``mcp.session.id``): on streamable HTTP the id
is what a client presents to continue its session, so telemetry must not hold it.

When no tracer provider stands behind the tracer (:meth:`McpTelemetry.records`) and
there is no trace to continue — no active span, nothing in the request a propagator
reads — a span would be the invalid, non-recording one: it is not made, and only
the operation's duration is recorded. Anything else gets its span as described.
"""

from __future__ import annotations

import functools
import hashlib
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Final, Self
from urllib.parse import urlsplit

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult
from opentelemetry import context as otel_context
from opentelemetry import metrics as otel_metrics
from opentelemetry import propagate
from opentelemetry import trace as otel_trace
from pydantic import ValidationError

from toolbound.otel import OpenTelemetrySink, context_from_traceparent, incoming_context
from toolbound.telemetry.propagation import extract
from toolbound.trace import attempt_carrier

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping
    from types import TracebackType

    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from opentelemetry.propagators.textmap import TextMapPropagator
    from opentelemetry.util.types import AttributeValue

    from toolbound.execution.tool import ToolContext
    from toolbound.mcp.upstream import Upstream
    from toolbound.otel import ToolCatalogue
    from toolbound.pipeline.runtime import Runtime

__all__ = [
    "ClientCall",
    "McpTelemetry",
    "ServerSpans",
    "call_trace_id",
    "client_span",
    "continued",
    "instrument",
    "telemetry_for",
]

_TRACER_NAME: Final = "toolbound.mcp"
_TOOL_ERROR: Final = "tool_error"  # the conventions' error.type for an isError result


# The MCP conventions' advice for operation durations, in seconds.
_DURATION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)


class McpTelemetry:
    """Where a surface's MCP spans and operation durations go (one per runtime)."""

    def __init__(self, tracer: otel_trace.Tracer, meter: otel_metrics.Meter) -> None:
        self.tracer = tracer
        self.server_duration = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="MCP request or notification duration, as the server saw it.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.client_duration = meter.create_histogram(
            "mcp.client.operation.duration",
            unit="s",
            description="MCP request duration, from sending to the upstream's answer.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )

    def records(self) -> bool:
        """Whether a span started now would be recorded: a tracer provider stands behind it.

        Asked for each span: the global tracer provider may be set after the server
        was built, and the proxy tracer then records from that moment on.
        """
        tracer = self.tracer
        if isinstance(tracer, otel_trace.ProxyTracer):
            # A proxy records once a global provider is set (and set, it stays).
            return not isinstance(otel_trace.get_tracer_provider(), otel_trace.ProxyTracerProvider)
        return not isinstance(tracer, otel_trace.NoOpTracer)


def telemetry_for(runtime: Runtime) -> McpTelemetry:
    """The tracer and meter of ``runtime``'s OpenTelemetry sink (else the global ones)."""
    for sink in runtime.sinks:
        if isinstance(sink, OpenTelemetrySink):
            return McpTelemetry(sink.tracer, sink.meter)
    return McpTelemetry(otel_trace.get_tracer(_TRACER_NAME), otel_metrics.get_meter(_TRACER_NAME))


def instrument(runtime: Runtime, tools: ToolCatalogue, upstreams: Iterable[Upstream] = ()) -> None:
    """Let ``runtime``'s OpenTelemetry sinks describe ``tools``; give ``upstreams`` telemetry."""
    for sink in runtime.sinks:
        if isinstance(sink, OpenTelemetrySink) and sink.tools is None:
            sink.tools = tools
    telemetry = telemetry_for(runtime)
    for upstream in upstreams:
        upstream.telemetry = telemetry


def call_trace_id(meta: Mapping[str, object]) -> str | None:
    """The trace a ``tools/call`` joins: its ``_meta`` ``traceparent``'s, else the active span's.

    Inside a server span the call then records the span's trace id in its own trace
    (R14), so the journal and the telemetry backend name the same trace.
    """
    header = meta.get("traceparent")
    found = context_from_traceparent(header if isinstance(header, str) else None)
    if found is not None:
        return found
    active = otel_trace.get_current_span().get_span_context()
    return f"{active.trace_id:032x}" if active.is_valid else None


def session_digest(session_id: str) -> str:
    """What ``mcp.session.id`` records: a digest that identifies, never resumes, a session."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:32]


# -- the server side ------------------------------------------------------------------


class ServerSpans:
    """SDK server middleware: one SERVER span per inbound MCP request or notification."""

    def __init__(self, telemetry: McpTelemetry) -> None:
        self.telemetry = telemetry

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Handle the message inside its span; record how it ended."""
        started = time.perf_counter()
        meta: Mapping[str, Any] = ctx.meta or {}
        if not self.telemetry.records() and not _continues_a_trace(meta):
            # The span would be the invalid one, recording nothing: only the duration.
            measured = operation_attributes(ctx)[1]
            return await self._handled(ctx, call_next, otel_trace.INVALID_SPAN, measured, started)
        target, attributes = server_attributes(ctx)
        parent = incoming_context(extract({k: v for k, v in meta.items() if isinstance(v, str)}))
        with self.telemetry.tracer.start_as_current_span(
            f"{ctx.method} {target}" if target else ctx.method,
            context=parent,
            kind=otel_trace.SpanKind.SERVER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            return await self._handled(ctx, call_next, span, attributes, started)

    async def _handled(
        self,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
        span: otel_trace.Span,
        attributes: dict[str, AttributeValue],
        started: float,
    ) -> HandlerResult:
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            _failed(span, attributes, str(exc.error.code), exc.error.message, rpc=True)
            raise
        except ValidationError:
            # The client's input is in pydantic's text: record the code only.
            _failed(span, attributes, str(INVALID_PARAMS), "invalid parameters", rpc=True)
            raise
        except Exception as exc:
            name = type(exc).__qualname__
            _failed(span, attributes, name, name, rpc=False)
            raise
        else:
            if _is_tool_error(result):
                _failed(span, attributes, _TOOL_ERROR, None, rpc=False)
            return result
        finally:
            elapsed = time.perf_counter() - started
            self.telemetry.server_duration.record(elapsed, _measured(attributes))


def operation_attributes(
    ctx: ServerRequestContext[Any, Any],
) -> tuple[str | None, dict[str, AttributeValue]]:
    """The span's target (tool or prompt name) and what its operation duration carries."""
    params: Mapping[str, Any] = ctx.params or {}
    attributes: dict[str, AttributeValue] = {
        "mcp.method.name": ctx.method,
        "mcp.protocol.version": ctx.protocol_version,
    }
    name = params.get("name")
    target = name if isinstance(name, str) else None
    if ctx.method == "tools/call" and target is not None:
        attributes["gen_ai.operation.name"] = "execute_tool"
        attributes["gen_ai.tool.name"] = target
    elif ctx.method == "prompts/get" and target is not None:
        attributes["gen_ai.prompt.name"] = target
    else:
        target = None
    if ctx.request is None:
        attributes["network.transport"] = "pipe"  # stdio, or in the same process
    else:
        attributes["network.transport"] = "tcp"
        attributes["network.protocol.name"] = "http"
    return target, attributes


def server_attributes(
    ctx: ServerRequestContext[Any, Any],
) -> tuple[str | None, dict[str, AttributeValue]]:
    """The span's target (tool or prompt name) and its attributes, from the message alone."""
    target, attributes = operation_attributes(ctx)
    if ctx.request_id is not None:
        attributes["jsonrpc.request.id"] = str(ctx.request_id)
    params: Mapping[str, Any] = ctx.params or {}
    uri = params.get("uri")
    if isinstance(uri, str) and ctx.method.startswith("resources/"):
        attributes["mcp.resource.uri"] = uri
    request = ctx.request
    client = getattr(request, "client", None)
    if client is not None and client.host:
        attributes["client.address"] = client.host
    session = _session_id(ctx, getattr(request, "headers", None))
    if session:
        attributes["mcp.session.id"] = session_digest(session)
    return target, attributes


def _continues_a_trace(meta: Mapping[str, Any]) -> bool:
    """Whether a span here would have a parent: an active span, or a context in ``meta``.

    A propagator reads a parent only from its own fields (``traceparent`` and
    ``tracestate`` for W3C Trace Context): a request that carries none of them,
    case aside, has none to continue.
    """
    if otel_trace.get_current_span().get_span_context().is_valid:
        return True
    fields = _fields(propagate.get_global_textmap())
    return any(isinstance(v, str) and k.lower() in fields for k, v in meta.items())


@functools.lru_cache(maxsize=4)
def _fields(propagator: TextMapPropagator) -> frozenset[str]:
    return frozenset(field.lower() for field in propagator.fields)


def _session_id(ctx: ServerRequestContext[Any, Any], headers: object) -> str | None:
    """The transport's session id: the request's header, else the connection's."""
    found = getattr(headers, "get", lambda _name: None)("mcp-session-id")
    if isinstance(found, str):
        return found
    # The SDK's request context offers the connection only privately; a client on a
    # stateless protocol version sends no header, yet its connection is a session.
    connection = getattr(ctx.session, "_connection", None)
    found = getattr(connection, "session_id", None)
    return found if isinstance(found, str) else None


def _failed(
    span: otel_trace.Span,
    attributes: dict[str, AttributeValue],
    error_type: str,
    message: str | None,
    *,
    rpc: bool,
) -> None:
    """Mark the span failed, and note the error in ``attributes`` (for the duration)."""
    attributes["error.type"] = error_type
    if rpc:
        attributes["rpc.response.status_code"] = error_type
    span.set_attributes({k: attributes[k] for k in _ERROR_KEYS if k in attributes})
    span.set_status(otel_trace.StatusCode.ERROR, message)


# What an operation-duration point carries: the span's low-cardinality attributes.
_MEASURED: Final = (
    "mcp.method.name",
    "mcp.protocol.version",
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "gen_ai.prompt.name",
    "network.transport",
    "network.protocol.name",
    "server.address",
    "server.port",
    "error.type",
    "rpc.response.status_code",
)
_ERROR_KEYS: Final = ("error.type", "rpc.response.status_code")


def _measured(attributes: Mapping[str, AttributeValue]) -> dict[str, AttributeValue]:
    return {k: attributes[k] for k in _MEASURED if k in attributes}


def _is_tool_error(result: object) -> bool:
    if isinstance(result, CallToolResult):
        return bool(result.is_error)
    return isinstance(result, dict) and result.get("isError") is True


# -- the client side (the gateway calling an upstream) --------------------------------


class ClientCall:
    """The CLIENT span of one upstream ``tools/call``, and the ``_meta`` that carries it.

    A context manager (:func:`client_span`): inside, :attr:`meta` is the call's
    ``_meta`` with the span's context injected, and :attr:`span` the active span.
    """

    __slots__ = ("_scope", "_started", "attributes", "meta", "name", "span", "telemetry")

    def __init__(
        self,
        telemetry: McpTelemetry | None,
        name: str,
        meta: dict[str, object],
        attributes: dict[str, AttributeValue],
    ) -> None:
        self.telemetry = telemetry
        self.name = name
        self.meta = meta
        self.attributes = attributes
        self.span: otel_trace.Span = otel_trace.INVALID_SPAN
        self._scope: AbstractContextManager[otel_trace.Span] | None = None
        self._started = 0.0

    def start(self, carrier: Mapping[str, str] | None) -> None:
        """Start the span, a child of the attempt's (``carrier``), and inject its context."""
        self._started = time.perf_counter()
        telemetry = self.telemetry
        recording = telemetry is not None and telemetry.records()
        if carrier or recording or otel_trace.get_current_span().get_span_context().is_valid:
            tracer = otel_trace.NoOpTracer() if telemetry is None else telemetry.tracer
            self._scope = tracer.start_as_current_span(
                self.name,
                context=propagate.extract(dict(carrier or {}), context=otel_context.Context()),
                kind=otel_trace.SpanKind.CLIENT,
                attributes=self.attributes,
                record_exception=False,
                set_status_on_exception=False,
            )
            self.span = self._scope.__enter__()
        # Else the span would be the invalid one, with no parent and nothing to record:
        # it is not made active; the context injected is the same.
        injected: dict[str, str] = {}
        try:
            propagate.inject(injected, context=otel_trace.set_span_in_context(self.span))
        except BaseException as exc:
            if self._scope is not None:
                self._scope.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self.meta.update(injected)

    def answered(self, result: Mapping[str, object]) -> None:
        """The upstream answered (its result as sent): an ``isError`` result is a failed call."""
        if _is_tool_error(result):
            _failed(self.span, self.attributes, _TOOL_ERROR, None, rpc=False)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, MCPError):
            _failed(self.span, self.attributes, str(exc.error.code), exc.error.message, rpc=True)
        elif isinstance(exc, Exception):
            name = type(exc).__qualname__
            _failed(self.span, self.attributes, name, name, rpc=False)
        if self.telemetry is not None:
            elapsed = time.perf_counter() - self._started
            self.telemetry.client_duration.record(elapsed, _measured(self.attributes))
        if self._scope is not None:
            self._scope.__exit__(kind, exc, tb)


def client_span(
    telemetry: McpTelemetry | None,
    *,
    upstream: str,
    url: str | None,
    tool: str,
    ctx: ToolContext,
    meta: Mapping[str, object] | None,
) -> ClientCall:
    """A CLIENT span around one upstream ``tools/call``, a child of the attempt's span.

    Its :attr:`~ClientCall.meta` is ``meta`` with the span's context injected.
    Without telemetry (none configured) the span records nothing, and the attempt's
    own context, if a sink published one, is what travels on.
    """
    attributes = _client_attributes(upstream, url, tool)
    call = ClientCall(telemetry, f"tools/call {tool}", dict(meta or {}), attributes)
    call.start(attempt_carrier(ctx.attempt_id))
    return call


def _client_attributes(upstream: str, url: str | None, tool: str) -> dict[str, AttributeValue]:
    return dict(_attributes_of(upstream, url, tool))  # _failed adds to a call's own


@functools.lru_cache(maxsize=1024)
def _attributes_of(upstream: str, url: str | None, tool: str) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "toolbound.upstream": upstream,
    }
    if url is None:
        attributes["network.transport"] = "pipe"
    else:
        parts = urlsplit(url)
        attributes["network.transport"] = "tcp"
        attributes["network.protocol.name"] = "http"
        if parts.hostname:
            attributes["server.address"] = parts.hostname
        if parts.port is not None:
            attributes["server.port"] = parts.port
    return attributes


def continued(meta: Mapping[str, object] | None) -> AbstractContextManager[object]:
    """Make the trace context in an outgoing ``_meta`` the active one.

    The gateway sends on its upstream's own event loop, where the caller's context
    is not active; inside this block, the SDK's own instrumentation (if the
    application installed a global tracer provider) nests under the client span
    instead of starting a new trace.
    """
    if meta is None or not isinstance(meta.get("traceparent"), str):
        return _NOTHING
    return _attached({k: v for k, v in meta.items() if isinstance(v, str)})


_NOTHING: Final = nullcontext()


@contextmanager
def _attached(carrier: Mapping[str, str]) -> Iterator[None]:
    token = otel_context.attach(incoming_context(extract(carrier)))
    try:
        yield
    finally:
        otel_context.detach(token)

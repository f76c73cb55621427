"""OpenTelemetry spans for MCP, after the MCP semantic conventions (R14).

Two kinds of span, from the tracer of the runtime's
:class:`~toolbound.otel.OpenTelemetrySink` (else the global tracer provider's):

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
"""

from __future__ import annotations

import hashlib
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult
from opentelemetry import context as otel_context
from opentelemetry import propagate
from opentelemetry import trace as otel_trace
from pydantic import ValidationError

from toolbound.otel import OpenTelemetrySink, incoming_context
from toolbound.telemetry.propagation import extract
from toolbound.trace import attempt_carrier

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator, Mapping

    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from opentelemetry.util.types import AttributeValue

    from toolbound.execution.tool import ToolContext
    from toolbound.mcp.upstream import Upstream
    from toolbound.otel import ToolCatalogue
    from toolbound.pipeline.runtime import Runtime

__all__ = ["ClientCall", "ServerSpans", "client_span", "continued", "instrument", "tracer_for"]

_TRACER_NAME: Final = "toolbound.mcp"
_TOOL_ERROR: Final = "tool_error"  # the conventions' error.type for an isError result


def tracer_for(runtime: Runtime) -> otel_trace.Tracer:
    """The tracer of ``runtime``'s OpenTelemetry sink, so MCP spans share its exporter."""
    for sink in runtime.sinks:
        if isinstance(sink, OpenTelemetrySink):
            return sink.tracer
    return otel_trace.get_tracer(_TRACER_NAME)


def instrument(runtime: Runtime, tools: ToolCatalogue, upstreams: Iterable[Upstream] = ()) -> None:
    """Let ``runtime``'s OpenTelemetry sinks describe ``tools``; give ``upstreams`` a tracer."""
    for sink in runtime.sinks:
        if isinstance(sink, OpenTelemetrySink) and sink.tools is None:
            sink.tools = tools
    tracer = tracer_for(runtime)
    for upstream in upstreams:
        upstream.tracer = tracer


def session_digest(session_id: str) -> str:
    """What ``mcp.session.id`` records: a digest that identifies, never resumes, a session."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:32]


# -- the server side ------------------------------------------------------------------


class ServerSpans:
    """SDK server middleware: one SERVER span per inbound MCP request or notification."""

    def __init__(self, tracer: otel_trace.Tracer) -> None:
        self.tracer = tracer

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Handle the message inside its span; record how it ended."""
        target, attributes = server_attributes(ctx)
        meta: Mapping[str, Any] = ctx.meta or {}
        parent = incoming_context(extract({k: v for k, v in meta.items() if isinstance(v, str)}))
        with self.tracer.start_as_current_span(
            f"{ctx.method} {target}" if target else ctx.method,
            context=parent,
            kind=otel_trace.SpanKind.SERVER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                result = await call_next(ctx)
            except MCPError as exc:
                _failed(span, str(exc.error.code), exc.error.message, rpc=True)
                raise
            except ValidationError:
                # The client's input is in pydantic's text: record the code only.
                _failed(span, str(INVALID_PARAMS), "invalid request parameters", rpc=True)
                raise
            except Exception as exc:
                _failed(span, type(exc).__qualname__, type(exc).__qualname__, rpc=False)
                raise
            if _is_tool_error(result):
                _failed(span, _TOOL_ERROR, None, rpc=False)
            return result


def server_attributes(
    ctx: ServerRequestContext[Any, Any],
) -> tuple[str | None, dict[str, AttributeValue]]:
    """The span's target (tool or prompt name) and its attributes, from the message alone."""
    params: Mapping[str, Any] = ctx.params or {}
    attributes: dict[str, AttributeValue] = {
        "mcp.method.name": ctx.method,
        "mcp.protocol.version": ctx.protocol_version,
    }
    if ctx.request_id is not None:
        attributes["jsonrpc.request.id"] = str(ctx.request_id)
    name = params.get("name")
    target = name if isinstance(name, str) else None
    if ctx.method == "tools/call" and target is not None:
        attributes["gen_ai.operation.name"] = "execute_tool"
        attributes["gen_ai.tool.name"] = target
    elif ctx.method == "prompts/get" and target is not None:
        attributes["gen_ai.prompt.name"] = target
    else:
        target = None
    uri = params.get("uri")
    if isinstance(uri, str) and ctx.method.startswith("resources/"):
        attributes["mcp.resource.uri"] = uri
    request = ctx.request
    headers = getattr(request, "headers", None)
    if request is None:
        attributes["network.transport"] = "pipe"  # stdio
    else:
        attributes["network.transport"] = "tcp"
        attributes["network.protocol.name"] = "http"
        client = getattr(request, "client", None)
        if client is not None and client.host:
            attributes["client.address"] = client.host
    session = _session_id(ctx, headers)
    if session:
        attributes["mcp.session.id"] = session_digest(session)
    return target, attributes


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


def _failed(span: otel_trace.Span, error_type: str, message: str | None, *, rpc: bool) -> None:
    span.set_attribute("error.type", error_type)
    if rpc:
        span.set_attribute("rpc.response.status_code", error_type)
    span.set_status(otel_trace.StatusCode.ERROR, message)


def _is_tool_error(result: object) -> bool:
    if isinstance(result, CallToolResult):
        return bool(result.is_error)
    return isinstance(result, dict) and result.get("isError") is True


# -- the client side (the gateway calling an upstream) --------------------------------


class ClientCall:
    """The client span of one upstream ``tools/call``, and the ``_meta`` that carries it."""

    def __init__(self, span: otel_trace.Span, meta: dict[str, object]) -> None:
        self.span = span
        self.meta = meta

    def answered(self, result: CallToolResult) -> None:
        """The upstream answered: an ``isError`` result is a failed call."""
        if result.is_error:
            _failed(self.span, _TOOL_ERROR, None, rpc=False)


@asynccontextmanager
async def client_span(
    tracer: otel_trace.Tracer | None,
    *,
    upstream: str,
    url: str | None,
    tool: str,
    ctx: ToolContext,
    meta: Mapping[str, object] | None,
) -> AsyncIterator[ClientCall]:
    """A CLIENT span around one upstream ``tools/call``, a child of the attempt's span.

    Yields the call's ``_meta``: ``meta`` with the span's context injected. Without a
    tracer (telemetry off) the span records nothing, and the attempt's own context,
    if a sink published one, is what travels on.
    """
    carrier = attempt_carrier(ctx.attempt_id) or {}
    parent = propagate.extract(dict(carrier), context=otel_context.Context())
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
    chosen = tracer if tracer is not None else otel_trace.NoOpTracer()
    with chosen.start_as_current_span(
        f"tools/call {tool}",
        context=parent,
        kind=otel_trace.SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        sent: dict[str, object] = dict(meta or {})
        injected: dict[str, str] = {}
        propagate.inject(injected)
        sent.update(injected)
        call = ClientCall(span, sent)
        try:
            yield call
        except MCPError as exc:
            _failed(span, str(exc.error.code), exc.error.message, rpc=True)
            raise
        except Exception as exc:
            _failed(span, type(exc).__qualname__, type(exc).__qualname__, rpc=False)
            raise


@contextmanager
def continued(meta: Mapping[str, object] | None) -> Iterator[None]:
    """Make the trace context in an outgoing ``_meta`` the active one.

    The gateway sends on its upstream's own event loop, where the caller's context
    is not active; inside this block, the SDK's own instrumentation (if the
    application installed a global tracer provider) nests under the client span
    instead of starting a new trace.
    """
    carrier = {k: v for k, v in (meta or {}).items() if isinstance(v, str)}
    if "traceparent" not in carrier:
        yield
        return
    token = otel_context.attach(incoming_context(extract(carrier)))
    try:
        yield
    finally:
        otel_context.detach(token)

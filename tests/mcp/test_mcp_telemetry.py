"""R14 over MCP: a server span per request, and a client span per upstream call.

The execute_tool span is the server span's child; the client span's context travels
to the upstream in the request's ``_meta``.

A real gateway on loopback HTTP with an OpenTelemetry sink (the SDK's in-memory
exporter) is called by the SDK's client carrying a ``traceparent`` and ``tracestate``
in ``_meta``; the fault server upstream records the ``_meta`` it received.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import (
    MIRA,
    QUIET,
    TOKENS,
    as_,
    fault_upstream,
    grant,
    run,
    serving,
    write_config,
)
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolbound import Grant, GrantPolicy, Registry, Runtime, ToolSpec
from toolbound.mcp import Gateway
from toolbound.mcp.server import GuardedServer, StaticCatalog
from toolbound.mcp.telemetry import instrument, session_digest
from toolbound.otel import OpenTelemetrySink
from toolbound.testing import FakeTool

if TYPE_CHECKING:
    from pathlib import Path

    import mcp_types as types

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = "00f067aa0ba902b7"
STATE = "congo=t61rcWkgMzE"
META = {"traceparent": f"00-{TRACE}-{CALLER}-01", "tracestate": STATE}


def _exporting() -> tuple[OpenTelemetrySink, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OpenTelemetrySink(provider), exporter


def _named(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name == name]
    return span


def test_a_gateway_call_is_one_trace_from_the_client_to_the_upstream(tmp_path: Path) -> None:
    """Server span → execute_tool → attempt → client span, and the upstream gets its context."""
    state = tmp_path / "state"
    state.mkdir()
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))
    sink, exporter = _exporting()
    gw = Gateway(config, sinks=[sink], errlog=QUIET)

    async def scenario() -> types.CallToolResult:
        async with serving(gw) as url, as_(TOKENS["mira"], url) as client:
            return await client.call_tool("fault.echo", {"text": "hi"}, meta=META)

    result = run(scenario())
    assert result.is_error is False
    spans = exporter.get_finished_spans()
    server = _named(spans, "tools/call fault.echo")
    call = _named(spans, "execute_tool fault.echo")
    attempt = _named(spans, "toolbound.attempt fault.echo")
    client = _named(spans, "tools/call echo")

    assert server.kind is otel_trace.SpanKind.SERVER
    assert server.context.trace_id == int(TRACE, 16)
    assert server.parent is not None
    assert server.parent.span_id == int(CALLER, 16)
    assert server.context.trace_state.to_header() == STATE
    attrs = server.attributes
    assert attrs["mcp.method.name"] == "tools/call"
    assert attrs["gen_ai.tool.name"] == "fault.echo"
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["network.transport"] == "tcp"
    assert attrs["network.protocol.name"] == "http"
    assert attrs["jsonrpc.request.id"]
    assert attrs["mcp.protocol.version"]
    assert "mcp.session.id" not in attrs  # a 2026 connection is sessionless

    assert call.parent is not None
    assert call.parent.span_id == server.context.span_id
    assert call.attributes["gen_ai.tool.type"] == "extension"
    assert call.attributes["gen_ai.tool.description"]
    assert attempt.parent is not None
    assert attempt.parent.span_id == call.context.span_id

    assert client.kind is otel_trace.SpanKind.CLIENT
    assert client.parent is not None
    assert client.parent.span_id == attempt.context.span_id
    assert client.attributes["mcp.method.name"] == "tools/call"
    assert client.attributes["gen_ai.tool.name"] == "echo"
    assert client.attributes["network.transport"] == "pipe"
    assert client.attributes["toolbound.upstream"] == "fault"

    [received] = [json.loads(line) for line in (state / "calls.txt").read_text().splitlines()]
    assert received["traceparent"] == f"00-{TRACE}-{client.context.span_id:016x}-01"
    assert received["tracestate"] == STATE


def test_every_request_gets_a_server_span_named_after_its_method(tmp_path: Path) -> None:
    """Discovery and tools/list are server spans too; an isError result marks its span."""
    state = tmp_path / "state"
    state.mkdir()
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))
    sink, exporter = _exporting()
    gw = Gateway(config, sinks=[sink], errlog=QUIET)

    async def scenario() -> types.CallToolResult:
        async with serving(gw) as url, as_(TOKENS["mira"], url) as client:
            await client.list_tools()
            return await client.call_tool("fault.fail", {})

    result = run(scenario())
    assert result.is_error is True
    names = [s.name for s in exporter.get_finished_spans() if s.kind is otel_trace.SpanKind.SERVER]
    assert "server/discover" in names
    assert "tools/list" in names
    failed = _named(exporter.get_finished_spans(), "tools/call fault.fail")
    assert failed.attributes["error.type"] == "tool_error"
    assert failed.status.status_code is otel_trace.StatusCode.ERROR
    client = _named(exporter.get_finished_spans(), "tools/call fail")
    assert client.attributes["error.type"] == "tool_error"


def test_mcp_serve_nests_the_execute_tool_span_under_its_server_span() -> None:
    """A local tool served over MCP: its execute_tool span is the server span's child."""
    sink, exporter = _exporting()
    registry = Registry()
    registry.register(
        ToolSpec(
            name="notes.echo",
            version="v1",
            description="Say it back.",
            input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
            effect="read",
            capabilities=("notes:read",),
        ),
        FakeTool(returns={"text": "hi"}),
    )
    grant_ = Grant(
        subject=MIRA.id, tenant=MIRA.tenant, capability="notes:read", actions=frozenset({"read"})
    )
    runtime = Runtime(policy=GrantPolicy([grant_]), sinks=[sink])
    instrument(runtime, registry)
    server = GuardedServer(runtime=runtime, catalog=StaticCatalog(registry))

    async def scenario() -> types.CallToolResult:
        async with Client(server.lowlevel(MIRA)) as client:
            return await client.call_tool("notes.echo", {"text": "x"}, meta=META)

    try:
        result = run(scenario())
    finally:
        runtime.close()
    assert result.is_error is False
    spans = exporter.get_finished_spans()
    served = _named(spans, "tools/call notes.echo")
    call = _named(spans, "execute_tool notes.echo")
    assert served.kind is otel_trace.SpanKind.SERVER
    assert served.attributes["network.transport"] == "pipe"
    assert "mcp.session.id" not in served.attributes
    assert call.parent is not None
    assert call.parent.span_id == served.context.span_id
    assert call.context.trace_id == int(TRACE, 16)
    assert call.attributes["gen_ai.tool.type"] == "function"
    assert call.attributes["gen_ai.tool.description"] == "Say it back."


def test_a_handshake_era_session_is_named_by_a_digest(tmp_path: Path) -> None:
    """On a 2025-era HTTP session every server span names the session, as a digest."""
    state = tmp_path / "state"
    state.mkdir()
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))
    sink, exporter = _exporting()
    gw = Gateway(config, sinks=[sink], errlog=QUIET)

    async def scenario() -> None:
        async with (
            serving(gw) as url,
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['mira']}"}) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            await client.call_tool("fault.echo", {"text": "hi"})

    run(scenario())
    served = [s for s in exporter.get_finished_spans() if s.kind is otel_trace.SpanKind.SERVER]
    call = _named(tuple(served), "tools/call fault.echo")
    session = call.attributes["mcp.session.id"]
    assert isinstance(session, str)
    assert len(session) == 32  # a digest, never the id a client resumes its session with
    assert all(
        s.attributes.get("mcp.session.id") == session for s in served if s.name != "initialize"
    )


def test_a_session_id_is_recorded_as_a_digest() -> None:
    """The digest is stable for one session and reveals nothing of the id."""
    digest = session_digest("a1b2c3")
    assert digest == session_digest("a1b2c3")
    assert digest != session_digest("a1b2c4")
    assert "a1b2c3" not in digest

"""R14 over MCP: a server span per request, and a client span per upstream call.

The execute_tool span is the server span's child; the client span's context travels
to the upstream in the request's ``_meta``.

A real gateway on loopback HTTP with an OpenTelemetry sink (the SDK's in-memory
exporter) is called by the SDK's client carrying a ``traceparent`` and ``tracestate``
in ``_meta``; the fault server upstream records the ``_meta`` it received.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import (
    HERE,
    MIRA,
    TOKENS,
    as_,
    fault_upstream,
    gateway,
    grant,
    run,
    serving,
    write_config,
)
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolbound import Grant, GrantPolicy, Registry, Runtime, ToolSpec
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


class Exporting:
    """A sink whose spans and metrics stay in memory for the test to read."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        meters = MeterProvider(metric_readers=[self.reader])
        self.sink = OpenTelemetrySink(provider, meter_provider=meters)

    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def points(self, name: str) -> list[tuple[dict[str, object], int]]:
        """Each point of histogram ``name``: its attributes and count."""
        data = self.reader.get_metrics_data()
        return [
            (dict(point.attributes), point.count)
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


def _named(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name == name]
    return span


@dataclass(frozen=True)
class Echoed:
    """One ``fault.echo`` through a gateway: its spans, metrics and what the upstream got."""

    telemetry: Exporting
    spans: tuple[ReadableSpan, ...]
    received: dict[str, object]


@pytest.fixture(scope="module")
def echoed(tmp_path_factory: pytest.TempPathFactory) -> Echoed:
    folder = tmp_path_factory.mktemp("echoed")
    state = folder / "state"
    state.mkdir()
    config = write_config(folder, fault_upstream(state) + grant("mira", "fault:read"))
    telemetry = Exporting()
    gw = gateway(config, sinks=[telemetry.sink])

    async def scenario() -> types.CallToolResult:
        async with serving(gw) as url, as_(TOKENS["mira"], url) as client:
            return await client.call_tool("fault.echo", {"text": "hi"}, meta=META)

    assert run(scenario()).is_error is False
    [received] = [json.loads(line) for line in (state / "calls.txt").read_text().splitlines()]
    return Echoed(telemetry=telemetry, spans=telemetry.spans(), received=received)


def test_a_gateway_call_is_one_trace_from_the_client_to_the_upstream(echoed: Echoed) -> None:
    """Server span → execute_tool → attempt → client span, and the upstream gets its context."""
    server = _named(echoed.spans, "tools/call fault.echo")
    call = _named(echoed.spans, "execute_tool fault.echo")
    attempt = _named(echoed.spans, "toolbound.attempt fault.echo")
    client = _named(echoed.spans, "tools/call echo")
    assert server.context.trace_id == int(TRACE, 16)
    assert server.parent is not None
    assert server.parent.span_id == int(CALLER, 16)
    assert server.context.trace_state.to_header() == STATE
    assert call.parent is not None
    assert call.parent.span_id == server.context.span_id
    assert attempt.parent is not None
    assert attempt.parent.span_id == call.context.span_id
    assert client.parent is not None
    assert client.parent.span_id == attempt.context.span_id
    assert echoed.received["traceparent"] == f"00-{TRACE}-{client.context.span_id:016x}-01"
    assert echoed.received["tracestate"] == STATE


def test_the_spans_carry_the_mcp_and_genai_attributes(echoed: Echoed) -> None:
    """SERVER and CLIENT kinds, the MCP attributes, and an upstream tool's GenAI type."""
    server = _named(echoed.spans, "tools/call fault.echo")
    assert server.kind is otel_trace.SpanKind.SERVER
    attrs = server.attributes
    assert attrs["mcp.method.name"] == "tools/call"
    assert attrs["gen_ai.tool.name"] == "fault.echo"
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["network.transport"] == "tcp"
    assert attrs["network.protocol.name"] == "http"
    assert attrs["jsonrpc.request.id"]
    assert attrs["mcp.protocol.version"]
    assert "mcp.session.id" not in attrs  # a 2026 connection is sessionless
    call = _named(echoed.spans, "execute_tool fault.echo")
    assert call.attributes["gen_ai.tool.type"] == "extension"
    assert call.attributes["gen_ai.tool.description"]
    client = _named(echoed.spans, "tools/call echo")
    assert client.kind is otel_trace.SpanKind.CLIENT
    assert client.attributes["mcp.method.name"] == "tools/call"
    assert client.attributes["gen_ai.tool.name"] == "echo"
    assert client.attributes["network.transport"] == "pipe"
    assert client.attributes["toolbound.upstream"] == "fault"


def test_operation_durations_are_recorded_on_both_sides(echoed: Echoed) -> None:
    """``mcp.server.operation.duration`` and ``mcp.client.operation.duration``, one point each."""
    version = _named(echoed.spans, "tools/call fault.echo").attributes["mcp.protocol.version"]
    served = {
        a["mcp.method.name"]: (a, n)
        for a, n in echoed.telemetry.points("mcp.server.operation.duration")
    }
    assert served["tools/call"] == (
        {
            "mcp.method.name": "tools/call",
            "mcp.protocol.version": version,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "fault.echo",
            "network.transport": "tcp",
            "network.protocol.name": "http",
        },
        1,
    )
    [(sent, count)] = echoed.telemetry.points("mcp.client.operation.duration")
    assert count == 1
    assert sent["gen_ai.tool.name"] == "echo"
    assert sent["network.transport"] == "pipe"
    assert "toolbound.upstream" not in sent  # durations keep the conventions' attributes


def test_every_request_gets_a_server_span_named_after_its_method(tmp_path: Path) -> None:
    """Discovery and tools/list are server spans too; an isError result marks its span."""
    state = tmp_path / "state"
    state.mkdir()
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))
    telemetry = Exporting()
    gw = gateway(config, sinks=[telemetry.sink])

    async def scenario() -> types.CallToolResult:
        async with serving(gw) as url, as_(TOKENS["mira"], url) as client:
            await client.list_tools()
            return await client.call_tool("fault.fail", {})

    result = run(scenario())
    assert result.is_error is True
    names = [s.name for s in telemetry.spans() if s.kind is otel_trace.SpanKind.SERVER]
    assert "server/discover" in names
    assert "tools/list" in names
    failed = _named(telemetry.spans(), "tools/call fault.fail")
    assert failed.attributes["error.type"] == "tool_error"
    assert failed.status.status_code is otel_trace.StatusCode.ERROR
    client = _named(telemetry.spans(), "tools/call fail")
    assert client.attributes["error.type"] == "tool_error"
    failures = [
        a for a, _ in telemetry.points("mcp.server.operation.duration") if "error.type" in a
    ]
    assert [a["gen_ai.tool.name"] for a in failures] == ["fault.fail"]


def test_mcp_serve_nests_the_execute_tool_span_under_its_server_span() -> None:
    """A local tool served over MCP: its execute_tool span is the server span's child."""
    telemetry = Exporting()
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
    runtime = Runtime(policy=GrantPolicy([grant_]), sinks=[telemetry.sink])
    instrument(runtime, registry)
    server = GuardedServer(runtime=runtime, catalog=StaticCatalog(registry))

    async def scenario() -> list[types.CallToolResult]:
        async with Client(server.lowlevel(MIRA)) as client:
            return [
                await client.call_tool("notes.echo", {"text": "x"}, meta=META),
                await client.call_tool("notes.echo", {"text": "y"}),
            ]

    try:
        results = run(scenario())
    finally:
        runtime.close()
    assert [r.is_error for r in results] == [False, False]
    spans = telemetry.spans()
    served, served_fresh = [s for s in spans if s.name == "tools/call notes.echo"]
    call, call_fresh = [s for s in spans if s.name == "execute_tool notes.echo"]
    assert served.kind is otel_trace.SpanKind.SERVER
    assert served.attributes["network.transport"] == "pipe"
    assert "mcp.session.id" not in served.attributes
    assert call.parent is not None
    assert call.parent.span_id == served.context.span_id
    assert call.context.trace_id == int(TRACE, 16)
    assert call.attributes["gen_ai.tool.type"] == "function"
    assert call.attributes["gen_ai.tool.description"] == "Say it back."
    # Without a traceparent the call joins the server span's new trace.
    assert call_fresh.parent is not None
    assert call_fresh.parent.span_id == served_fresh.context.span_id
    assert call_fresh.context.trace_id == served_fresh.context.trace_id != int(TRACE, 16)
    assert "toolbound.synthetic_parent" not in call_fresh.attributes


def test_a_handshake_era_session_is_named_by_a_digest(tmp_path: Path) -> None:
    """On a 2025-era HTTP session every server span names the session, as a digest."""
    state = tmp_path / "state"
    state.mkdir()
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))
    telemetry = Exporting()
    gw = gateway(config, sinks=[telemetry.sink])

    async def scenario() -> None:
        async with (
            serving(gw) as url,
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['mira']}"}) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            await client.call_tool("fault.echo", {"text": "hi"})

    run(scenario())
    served = [s for s in telemetry.spans() if s.kind is otel_trace.SpanKind.SERVER]
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


def _untraced(tmp_path: Path) -> dict[str, Any]:
    """``untraced_gateway.py`` in its own process (the global providers are set once)."""
    state = tmp_path / "state"
    state.mkdir()
    write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("OTEL_PYTHON_TRACER_PROVIDER", None)
    out = subprocess.run(  # noqa: S603 - this interpreter, a script of the test suite
        [
            sys.executable,
            str(HERE / "untraced_gateway.py"),
            str(tmp_path / "gateway.toml"),
            str(state),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=120,
    )
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def test_without_a_tracer_provider_durations_are_recorded_and_no_context_is_made_up(
    tmp_path: Path,
) -> None:
    """No provider: no span, both durations; the upstream gets no trace context of ours.

    Once the process sets a global provider, the very next call is traced end to end.
    """
    report = _untraced(tmp_path)
    untraced = report["untraced"]
    assert untraced["errors"] == [False, False]
    assert untraced["spans"] == 0
    durations = {(p["name"], p["attributes"].get("mcp.method.name")): p for p in untraced["points"]}
    served = durations["mcp.server.operation.duration", "tools/call"]
    assert served["count"] == 2
    assert served["attributes"]["gen_ai.tool.name"] == "fault.echo"
    assert served["attributes"]["network.transport"] == "pipe"
    assert "error.type" not in served["attributes"]
    sent = durations["mcp.client.operation.duration", "tools/call"]
    assert sent["count"] == 2
    assert sent["attributes"]["gen_ai.tool.name"] == "echo"
    first, second, third = report["received"]
    assert "traceparent" not in first
    # The caller's traceparent is no span of ours: without a provider nothing records
    # a child of it, and no context is made up for the upstream.
    assert "traceparent" not in second
    traced = report["traced"]
    assert traced["errors"] == [False]
    by_name = {s["name"]: s for s in traced["spans"]}
    assert by_name["tools/call fault.echo"]["kind"] == "SERVER"
    client = by_name["tools/call echo"]
    assert client["kind"] == "CLIENT"
    # The SDK's own send span (global provider) is the client span's child, and its
    # context is the one the upstream receives.
    [sent_span] = [s for s in traced["spans"] if s["parent_id"] == client["span_id"]]
    _, trace_id, span_id, _ = third["traceparent"].split("-")
    assert (trace_id, span_id) == (client["trace_id"], sent_span["span_id"])

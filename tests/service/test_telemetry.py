"""R14 in the service: spans and metrics exported over OTLP/HTTP when the configuration asks.

A small OTLP/HTTP receiver on loopback stands in for a collector: the service built
from a configuration with ``[telemetry] exporter = "otlp"`` sends it the call and
attempt spans, in the caller's trace, children of the caller's span, and the
``gen_ai.execute_tool.duration`` histogram. An HTTP tool on loopback shows what the
service passes on: the caller's trace, its ``tracestate`` and its baggage.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from service_config import KEYS, config_text
from starlette.testclient import TestClient

from toolbound.config import parse_config
from toolbound.service.api import create_app
from toolbound.service.core import Service
from toolbound.wiring import telemetry_sinks

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
STATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"


class Collector(BaseHTTPRequestHandler):
    """Keeps every OTLP export request it is sent, traces and metrics."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = (
            ExportMetricsServiceRequest()
            if self.path == "/v1/metrics"
            else ExportTraceServiceRequest()
        )
        request.ParseFromString(body)
        self.server.received.append((self.path, request))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


class Remote(BaseHTTPRequestHandler):
    """An HTTP tool's endpoint: answers, and keeps the headers of each request."""

    def do_GET(self) -> None:
        self.server.seen.append(dict(self.headers))  # type: ignore[attr-defined]
        body = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve(handler: type[BaseHTTPRequestHandler], **state: list[object]):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    for name, value in state.items():
        setattr(server, name, value)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


@pytest.fixture
def collector():
    server = _serve(Collector, received=[])
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def remote():
    server = _serve(Remote, seen=[])
    yield server
    server.shutdown()
    server.server_close()


def _service(tmp_path, collector, remote=None, *, metrics: bool = True) -> Service:
    port = collector.server_address[1]
    extra = f'\n[telemetry]\nexporter = "otlp"\nendpoint = "http://127.0.0.1:{port}"\n'
    extra += f"metrics = {'true' if metrics else 'false'}\n"
    if remote is not None:
        extra += f"""
[[tools.http]]
name = "remote.ping"
description = "Ping the remote service."
effect = "read"
method = "GET"
url = "http://127.0.0.1:{remote.server_address[1]}/ping"
capabilities = ["notes:read"]
allow_destinations = ["127.0.0.1"]
input_schema = {{ type = "object", additionalProperties = false }}
"""
    config = parse_config(
        config_text("sqlite:///toolbound.db", extra=extra), source=tmp_path / "t.toml"
    )
    registry = config.build_registry()
    return Service(config, registry=registry, sinks=telemetry_sinks(config, registry))


def _propose(client: TestClient, tool: str, arguments: str, **headers: str):
    return client.post(
        "/v1/proposals",
        json={"tool": tool, "arguments": arguments, "call_id": "c1"},
        headers={"Authorization": f"Bearer {KEYS['agent']}", "Idempotency-Key": "k1", **headers},
    )


def _spans(collector):
    return [
        span
        for path, request in collector.received
        if path == "/v1/traces"
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def _attributes(attributes) -> dict[str, object]:
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in attributes}


def test_spans_reach_an_otlp_collector_in_the_callers_trace(tmp_path, effects_path, collector):
    """The call and attempt spans reach the collector, children of the caller's span."""
    with TestClient(create_app(_service(tmp_path, collector))) as client:
        r = _propose(
            client, "notes.shout", '{"text": "hi"}', traceparent=f"00-{TRACE_ID}-{PARENT}-01"
        )
        assert r.json()["status"] == "observed"
    # Closing the app shut the service down, which flushed the exporter.
    by_name = {span.name: span for span in _spans(collector)}
    assert by_name, "the collector received no span"
    call = by_name["execute_tool notes.shout"]
    assert call.trace_id.hex() == TRACE_ID
    assert call.parent_span_id.hex() == PARENT
    attributes = _attributes(call.attributes)
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.type"] == "function"
    assert attributes["gen_ai.tool.description"]
    attempt = by_name["toolbound.attempt notes.shout"]
    assert attempt.parent_span_id == call.span_id


def test_the_duration_metric_reaches_the_collector(tmp_path, effects_path, collector):
    """``gen_ai.execute_tool.duration`` is exported beside the spans, in seconds."""
    with TestClient(create_app(_service(tmp_path, collector))) as client:
        assert _propose(client, "notes.shout", '{"text": "hi"}').json()["status"] == "observed"
    [metric] = [
        metric
        for path, request in collector.received
        if path == "/v1/metrics"
        for resource in request.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "gen_ai.execute_tool.duration"
    ]
    assert metric.unit == "s"
    [point] = metric.histogram.data_points
    assert point.count == 1
    assert 0 <= point.sum < 30
    assert _attributes(point.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "notes.shout",
        "gen_ai.tool.type": "function",
    }


def test_metrics_false_exports_spans_only(tmp_path, effects_path, collector):
    """``[telemetry] metrics = false``: a traces-only collector is sent no metrics."""
    with TestClient(create_app(_service(tmp_path, collector, metrics=False))) as client:
        assert _propose(client, "notes.shout", '{"text": "hi"}').json()["status"] == "observed"
    paths = {path for path, _ in collector.received}
    assert paths == {"/v1/traces"}


def test_tracestate_and_baggage_travel_from_the_caller_to_an_http_tool(tmp_path, collector, remote):
    """The HTTP tool's request continues the caller's trace with its tracestate and baggage."""
    with TestClient(create_app(_service(tmp_path, collector, remote))) as client:
        r = _propose(
            client,
            "remote.ping",
            "{}",
            traceparent=f"00-{TRACE_ID}-{PARENT}-01",
            tracestate=STATE,
            baggage="tenant=acme",
        )
        assert r.json()["status"] == "observed", r.json()
    [headers] = remote.seen
    headers = {k.lower(): v for k, v in headers.items()}
    by_name = {span.name: span for span in _spans(collector)}
    attempt = by_name["toolbound.attempt remote.ping"]
    assert headers["traceparent"] == f"00-{TRACE_ID}-{attempt.span_id.hex()}-01"
    assert headers["tracestate"] == STATE
    assert headers["baggage"] == "tenant=acme"
    assert attempt.trace_state == STATE


def test_telemetry_is_off_by_default():
    """Without ``[telemetry]`` no sink is built."""
    assert telemetry_sinks(parse_config(config_text("memory"))) == []

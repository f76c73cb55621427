"""R14 in the service: spans exported over OTLP/HTTP when the configuration asks for it.

A small OTLP/HTTP receiver on loopback stands in for a collector: the service built
from a configuration with ``[telemetry] exporter = "otlp"`` sends it the call and
attempt spans, in the caller's trace, children of the caller's span.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from service_config import KEYS, config_text
from starlette.testclient import TestClient

from toolbound.config import parse_config
from toolbound.service.api import create_app
from toolbound.service.core import Service
from toolbound.wiring import telemetry_sinks

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


class Collector(BaseHTTPRequestHandler):
    """Keeps every OTLP export request it is sent."""

    received: list[ExportTraceServiceRequest]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.received.append((self.path, request))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    server.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_spans_reach_an_otlp_collector_in_the_callers_trace(tmp_path, effects_path, collector):
    port = collector.server_address[1]
    text = config_text(
        "sqlite:///toolbound.db",
        extra=f'\n[telemetry]\nexporter = "otlp"\nendpoint = "http://127.0.0.1:{port}"\n',
    )
    config = parse_config(text, source=tmp_path / "toolbound.toml")
    service = Service(config, sinks=telemetry_sinks(config))
    with TestClient(create_app(service)) as client:
        r = client.post(
            "/v1/proposals",
            json={"tool": "notes.shout", "arguments": '{"text": "hi"}', "call_id": "c1"},
            headers={
                "Authorization": f"Bearer {KEYS['agent']}",
                "Idempotency-Key": "k1",
                "traceparent": f"00-{TRACE_ID}-{PARENT}-01",
            },
        )
        assert r.json()["status"] == "observed"
    # Closing the app shut the service down, which flushed the exporter.
    spans = [
        span
        for path, request in collector.received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
        if path == "/v1/traces"
    ]
    by_name = {span.name: span for span in spans}
    assert by_name, "the collector received no span"
    call = by_name["execute_tool notes.shout"]
    assert call.trace_id.hex() == TRACE_ID
    assert call.parent_span_id.hex() == PARENT
    attempt = by_name["toolbound.attempt notes.shout"]
    assert attempt.parent_span_id == call.span_id


def test_telemetry_is_off_by_default():
    assert telemetry_sinks(parse_config(config_text("memory"))) == []

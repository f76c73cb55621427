"""R14: an HTTP tool's traceparent names the attempt span that made the request.

A real runtime with an OpenTelemetry sink calls the loopback shop through HttpTool;
the request's traceparent carries the call's trace id and, as parent, the span id of
the attempt span the sink opened, so the remote side's spans nest under the attempt.
"""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from shop import LOOPBACK

from toolbound import (
    CallContext,
    Grant,
    GrantPolicy,
    Proposal,
    Registry,
    Runtime,
    Subject,
    ToolSpec,
)
from toolbound.execution.http import HttpTool
from toolbound.execution.tool import StaticSecrets
from toolbound.otel import OpenTelemetrySink, traceparent_scope
from toolbound.trace import attempt_span

MIRA = Subject(id="mira", tenant="acme")
CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_http_request_is_a_child_of_the_attempt_span(shop):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = Registry()
    registry.register(
        ToolSpec(
            name="shop.order",
            version="v1",
            description="Place an order.",
            input_schema={
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["sku", "qty"],
                "additionalProperties": False,
            },
            effect="irreversible_write",
            capabilities=("shop:order",),
            idempotency="native_key",
            secrets=("shop_token",),
        ),
        HttpTool(
            method="POST",
            url=f"{shop.base}/orders",
            effect="irreversible_write",
            bearer_secret="shop_token",  # noqa: S106 - the secret's name, not its value
            resource_id_field="id",
            egress=LOOPBACK,
        ),
    )
    grant = Grant(
        subject=MIRA.id, tenant=MIRA.tenant, capability="shop:order", actions=frozenset({"create"})
    )
    runtime = Runtime(
        policy=GrantPolicy([grant]),
        sinks=[OpenTelemetrySink(provider)],
        secrets=StaticSecrets({"shop_token": "tok-7f3a9c1e5b2d4f60a8e1"}),
    )
    try:
        with traceparent_scope(CALLER) as trace_id:
            out = runtime.run(
                Proposal(
                    name="shop.order",
                    arguments=json.dumps({"sku": "A-104", "qty": 2}).encode(),
                    proposal_id="c1",
                ),
                CallContext(subject=MIRA, tools=registry.toolset(), trace_id=trace_id),
            )
    finally:
        runtime.close()
    assert out.kind == "observed"
    (attempt,) = [
        s for s in exporter.get_finished_spans() if s.name.startswith("toolbound.attempt")
    ]
    (seen,) = shop.seen
    version, trace, parent, _flags = seen.headers["traceparent"].split("-")
    assert (version, trace) == ("00", "4bf92f3577b34da6a3ce929d0e0e4736")
    assert parent == f"{attempt.context.span_id:016x}"
    # The attempt is over: its span is no longer published.
    assert attempt_span(attempt.attributes["toolbound.attempt.id"]) is None
    provider.shutdown()

"""R14: an HTTP tool's request carries what the deployment's propagators write.

A propagator of its own format stands in for a deployment's choice (B3, Jaeger, …):
installed as OpenTelemetry's global propagator, it reads the caller's trace from a
request's headers and writes the attempt span into the HTTP tool's request, beside
toolbound's own ``traceparent``.
"""

from __future__ import annotations

import json

from opentelemetry import propagate
from opentelemetry import trace as otel_trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import (
    CarrierT,
    Getter,
    Setter,
    TextMapPropagator,
    default_getter,
    default_setter,
)
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
from toolbound.otel import OpenTelemetrySink, propagation_scope

MIRA = Subject(id="mira", tenant="acme")
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = "00f067aa0ba902b7"


class DashedPropagator(TextMapPropagator):
    """``x-trace: <trace id>:<span id>``, a format that is not W3C's."""

    def extract(
        self,
        carrier: CarrierT,
        context: Context | None = None,
        getter: Getter[CarrierT] = default_getter,
    ) -> Context:
        found = getter.get(carrier, "x-trace")
        if not found:
            return context if context is not None else Context()
        trace_id, _, span_id = found[0].partition(":")
        remote = otel_trace.SpanContext(
            trace_id=int(trace_id, 16),
            span_id=int(span_id, 16),
            is_remote=True,
            trace_flags=otel_trace.TraceFlags(otel_trace.TraceFlags.SAMPLED),
        )
        return otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(remote), context)

    def inject(
        self,
        carrier: CarrierT,
        context: Context | None = None,
        setter: Setter[CarrierT] = default_setter,
    ) -> None:
        span = otel_trace.get_current_span(context).get_span_context()
        if span.is_valid:
            setter.set(carrier, "x-trace", f"{span.trace_id:032x}:{span.span_id:016x}")

    @property
    def fields(self) -> set[str]:
        return {"x-trace"}


def test_a_deployments_propagator_reads_the_caller_and_writes_the_tool_request(shop):
    """Its header brings the caller's trace in and takes the attempt span out."""
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
    before = propagate.get_global_textmap()
    propagate.set_global_textmap(DashedPropagator())
    try:
        with propagation_scope({"x-trace": f"{TRACE}:{CALLER}"}) as trace_id:
            out = runtime.run(
                Proposal(
                    name="shop.order",
                    arguments=json.dumps({"sku": "A-104", "qty": 2}).encode(),
                    proposal_id="c1",
                ),
                CallContext(subject=MIRA, tools=registry.toolset(), trace_id=trace_id),
            )
    finally:
        propagate.set_global_textmap(before)
        runtime.close()
    assert out.kind == "observed"
    assert trace_id == TRACE
    spans = exporter.get_finished_spans()
    [call] = [s for s in spans if s.name.startswith("execute_tool")]
    [attempt] = [s for s in spans if s.name.startswith("toolbound.attempt")]
    assert call.parent is not None
    assert call.parent.span_id == int(CALLER, 16)
    (seen,) = shop.seen
    span = f"{attempt.context.span_id:016x}"
    assert seen.headers["x-trace"] == f"{TRACE}:{span}"
    # toolbound's own traceparent is sent too: the tool's documented contract.
    assert seen.headers["traceparent"] == f"00-{TRACE}-{span}-01"
    provider.shutdown()

"""A gateway call before and after the process gets a global tracer provider.

Run as ``python untraced_gateway.py CONFIG STATE`` (its own process: OpenTelemetry's
global providers can be set only once). A global meter provider is set first, no
tracer provider; the official client calls ``fault.echo`` in this process twice,
once with a ``traceparent`` in ``_meta``. Then a tracer provider is set and one more
call made. Prints, as JSON: what the upstream received, the operation-duration
points, and the spans recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp import Client
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolbound import Subject
from toolbound.mcp import Gateway, load_gateway_config

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
QUIET = Path(os.devnull).open("w")  # noqa: SIM115 - the upstream's stderr, for the whole run


def points(reader: InMemoryMetricReader) -> list[dict[str, Any]]:
    data = reader.get_metrics_data()
    if data is None:
        return []
    return [
        {"name": metric.name, "attributes": dict(point.attributes or {}), "count": point.count}
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name.startswith("mcp.")
        for point in metric.data.data_points  # type: ignore[union-attr]
    ]


async def main(config: Path, state: Path) -> None:
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    # Opening its stores blocks: not on the loop's thread (the loop guard).
    gateway = await asyncio.to_thread(Gateway, load_gateway_config(config), errlog=QUIET)
    exporter = InMemorySpanExporter()
    report: dict[str, Any] = {}
    async with (
        gateway.running(),
        Client(gateway.server.lowlevel(Subject(id="mira", tenant="acme"))) as client,
    ):
        plain = await client.call_tool("fault.echo", {"text": "a"})
        carried = await client.call_tool(
            "fault.echo", {"text": "b"}, meta={"traceparent": TRACEPARENT}
        )
        report["untraced"] = {
            "errors": [plain.is_error, carried.is_error],
            "points": points(reader),
            "spans": len(exporter.get_finished_spans()),
        }
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        traced = await client.call_tool("fault.echo", {"text": "c"})
        report["traced"] = {
            "errors": [traced.is_error],
            "spans": [
                {
                    "name": span.name,
                    "kind": span.kind.name,
                    "span_id": f"{span.context.span_id:016x}",
                    "trace_id": f"{span.context.trace_id:032x}",
                    "parent_id": None if span.parent is None else f"{span.parent.span_id:016x}",
                }
                for span in exporter.get_finished_spans()
            ],
        }
    calls = (state / "calls.txt").read_text().splitlines()
    report["received"] = [json.loads(line) for line in calls]
    print(json.dumps(report))  # noqa: T201 - the report is this script's output


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))

"""OpenTelemetry spans and metrics for toolbound calls, after the GenAI conventions (R14).

Off by default: nothing here runs unless a user passes an :class:`OpenTelemetrySink`
to ``Runtime(sinks=[...])``. The sink turns each call's trace events into spans:

* one **call span** per proposal/invocation (``execute_tool {name}``, kind INTERNAL,
  the GenAI ``execute_tool`` span), started at the ``"proposal"`` event and ended at
  the call's last event — the ``"tool_message"`` that follows a terminal state (or
  OUTCOME_UNKNOWN); a call parked in AWAITING_CONFIRMATION stays open until it resumes;
* one **attempt span** per execution attempt (``toolbound.attempt {name}``), a child of
  the call span, from EXECUTING / ``"attempt_started"`` to its ``"attempt"`` event;
* a span event per state transition, so the state path reads as a timeline;

and records each ended call in the ``gen_ai.execute_tool.duration`` histogram.

The call span's trace id is the invocation's ``trace_id`` (``CallContext.trace_id``), so
a caller's ``traceparent`` continues in toolbound's spans. Only whitelisted, non-secret
detail becomes an attribute: never argument bytes, results or tool-message content.

The W3C Trace Context helpers are re-exported here from :mod:`toolbound.telemetry`:
:func:`parse_traceparent` accepts a header or returns ``None`` ("start a new trace"),
:func:`format_traceparent` writes version ``00``, :func:`context_from_traceparent`
gives the trace id to put in ``CallContext.trace_id``; :func:`traceparent_scope` and
:func:`propagation_scope` (a request's headers, through the global propagator) also
make the caller's span the parent of the calls made inside them.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from toolbound._state import OUTCOME_KIND, REJECTED, TERMINAL, State
from toolbound.telemetry.context import (
    SCOPE,
    Scope,
    incoming_context,
    propagation_scope,
    traceparent_scope,
)
from toolbound.telemetry.context import remote_span_context as remote_context
from toolbound.telemetry.w3c import (
    TraceParent,
    context_from_traceparent,
    format_traceparent,
    parse_traceparent,
    valid_trace_id,
)
from toolbound.trace import publish_attempt_span, retract_attempt_span

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import propagate
    from opentelemetry import trace as otel_trace
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.otel needs OpenTelemetry: pip install 'toolbound[otel]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from collections.abc import Mapping

    from opentelemetry.metrics import MeterProvider
    from opentelemetry.util.types import AttributeValue

    from toolbound._model import Attempt
    from toolbound.registry import RegisteredTool
    from toolbound.trace import TraceEvent

__all__ = [
    "OpenTelemetrySink",
    "ToolCatalogue",
    "TraceParent",
    "context_from_traceparent",
    "exporting_sink",
    "format_traceparent",
    "incoming_context",
    "parse_traceparent",
    "propagation_scope",
    "traceparent_scope",
]


# -- the sink ------------------------------------------------------------------------

_TRACER_NAME: Final = "toolbound"
# The GenAI conventions' advice for operation durations, in seconds.
_DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip


class ToolCatalogue(Protocol):
    """Where the sink looks a tool up to describe it (a :class:`~toolbound.Registry`)."""

    def get(self, name: str, version: str) -> RegisteredTool | None:
        """The registered tool ``name@version``, if any."""
        ...


_COMMITTED: Final = frozenset({State.COMMITTED, State.OBSERVED, State.FAILED_AFTER_COMMIT})
_FAILED: Final = REJECTED | {
    State.FAILED_BEFORE_COMMIT,
    State.FAILED_AFTER_COMMIT,
    State.OUTCOME_UNKNOWN,
}
# Detail safe to copy onto span events: decisions and ids, never arguments, results,
# message bytes or exception text (R6: secrets never leave the runtime).
_EVENT_KEYS: Final = frozenset(
    {
        "action",
        "answer",
        "attempt",
        "attempt_id",
        "code",
        "decision",
        "delay",
        "digest",
        "failure",
        "is_error",
        "number",
        "phase",
        "reason",
        "spec",
        "truncated",
        "type",
        "verified",
    }
)


def _ns(at: float) -> int:
    return int(at * 1_000_000_000)


@dataclass(slots=True)
class _Open:
    """The spans of one call still being built."""

    call: otel_trace.Span
    lock: threading.Lock = field(default_factory=threading.Lock)
    name: str = ""
    state: State = State.PROPOSED
    path: list[str] = field(default_factory=lambda: [State.PROPOSED.value])
    attempts: dict[str, otel_trace.Span] = field(default_factory=dict)
    attempt_count: int = 0
    error_code: str | None = None
    ended: bool = False
    started: float = 0.0
    tool_type: str | None = None


class OpenTelemetrySink:
    """A :class:`~toolbound.trace.TraceSink` that records each call as OpenTelemetry spans.

    ``tracer_provider`` defaults to the global one (a no-op until the application
    installs an SDK provider). The sink never raises into the runtime: a failure is
    counted in :attr:`errors` and the call goes on. It is safe to share between
    threads and runtimes. At most ``max_open`` calls are tracked at once (parked calls
    count); past that, the oldest is ended with ``toolbound.abandoned`` set.

    The call span's trace id is the call's ``trace_id`` — taken from the ``"proposal"``
    event when the runtime records it there, else from the enclosing
    :func:`traceparent_scope`. Its parent is the caller's span from that scope's
    header, else the active OpenTelemetry span if it has the same trace id, else a
    synthetic remote parent that carries the trace id (``toolbound.synthetic_parent``).
    Outside any scope, with no trace id in the event, the call span simply nests under
    the active OpenTelemetry span (or starts a new trace).

    ``tools`` (a :class:`~toolbound.Registry`, or anything with its ``get``; settable
    later as :attr:`tools`) lets the span name each tool's description and type
    (``gen_ai.tool.description``, ``gen_ai.tool.type``). ``meter_provider`` (default:
    the global one) receives the ``gen_ai.execute_tool.duration`` histogram.
    """

    def __init__(
        self,
        tracer_provider: otel_trace.TracerProvider | None = None,
        *,
        meter_provider: MeterProvider | None = None,
        tools: ToolCatalogue | None = None,
        max_open: int = 10_000,
    ) -> None:
        self._tracer = otel_trace.get_tracer(_TRACER_NAME, tracer_provider=tracer_provider)
        meter = self._meter = otel_metrics.get_meter(_TRACER_NAME, meter_provider=meter_provider)
        self._duration = meter.create_histogram(
            "gen_ai.execute_tool.duration",
            unit="s",
            description="Duration of tool execution: proposal to the call's ending.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.tools = tools
        self._provider = tracer_provider
        self._meter_provider = meter_provider
        self._owns_provider = False
        self._max_open = max_open
        self._lock = threading.Lock()
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self._errors = 0
        self._last_error: str | None = None

    def flush(self, timeout_millis: int = 5_000) -> bool:
        """Export what the providers have batched (if they can flush); ``True`` if done."""
        done = True
        for provider in (self._provider, self._meter_provider):
            flush = getattr(provider, "force_flush", None)
            if flush is not None:
                done = bool(flush(timeout_millis)) and done
        return done

    def shutdown(self) -> None:
        """Flush and shut down the providers this sink owns (see :func:`exporting_sink`)."""
        if self._owns_provider:
            for provider in (self._provider, self._meter_provider):
                shutdown = getattr(provider, "shutdown", None)
                if shutdown is not None:
                    shutdown()

    @property
    def tracer(self) -> otel_trace.Tracer:
        """The tracer the sink's spans come from (for a surface's own spans beside them)."""
        return self._tracer

    @property
    def meter(self) -> otel_metrics.Meter:
        """The meter the sink's metrics come from (for a surface's own metrics beside them)."""
        return self._meter

    @property
    def errors(self) -> int:
        """How many events the sink failed to turn into spans."""
        return self._errors

    @property
    def last_error(self) -> str | None:
        """The most recent failure, as ``Type: text`` (for logs and tests)."""
        return self._last_error

    def emit(self, invocation_id: str, event: TraceEvent) -> None:
        """Turn one trace event into span work; never raises."""
        try:
            self._emit(invocation_id, event)
        except Exception as exc:  # noqa: BLE001 - a telemetry fault must not fail a call
            with self._lock:
                self._errors += 1
                self._last_error = f"{type(exc).__name__}: {exc}"

    def _emit(self, invocation_id: str, event: TraceEvent) -> None:
        if event.kind == "proposal":
            self._start(invocation_id, event)
            return
        with self._lock:
            call = self._open.get(invocation_id)
        if call is None:
            return  # an event after the call span ended (e.g. a later re-budgeting)
        with call.lock:
            if call.ended:
                return
            done = self._apply(call, event)
        if done:
            with self._lock:
                self._open.pop(invocation_id, None)

    def _start(self, invocation_id: str, event: TraceEvent) -> None:
        data = event.data
        name = str(data.get("name", ""))
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "toolbound.invocation_id": invocation_id,
        }
        proposal_id = data.get("proposal_id")
        if isinstance(proposal_id, str):
            attributes["gen_ai.tool.call.id"] = proposal_id
            attributes["toolbound.proposal_id"] = proposal_id
        model_call_id = data.get("model_call_id")
        if isinstance(model_call_id, str):
            attributes["toolbound.model_call_id"] = model_call_id
        version = data.get("version")
        attributes["toolbound.tool"] = f"{name}@{version}" if isinstance(version, str) else name
        trace_id = data.get("trace_id")
        caller = SCOPE.get()
        if not isinstance(trace_id, str):
            trace_id = None if caller is None else caller.trace_id
        span = self._tracer.start_span(
            f"execute_tool {name}",
            context=_parent(trace_id, caller, attributes),
            kind=otel_trace.SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(event.at),
        )
        call = _Open(call=span, name=name, started=event.at)
        if isinstance(version, str):
            self._describe(call, name, version)
        evicted: list[_Open] = []
        with self._lock:
            self._open[invocation_id] = call
            while len(self._open) > self._max_open:
                evicted.append(self._open.popitem(last=False)[1])
        for old in evicted:
            with old.lock:
                if not old.ended:
                    old.call.set_attribute("toolbound.abandoned", value=True)
                    self._finish(old, end=None)

    def _apply(self, call: _Open, event: TraceEvent) -> bool:
        """Fold one event into the call's spans; ``True`` once the call span has ended."""
        data = event.data
        problem = data.get("problem")
        code = getattr(problem, "code", None)
        if isinstance(code, str):
            call.error_code = code
        if event.kind == "transition" and event.state is not None:
            self._transition(call, event)
        elif event.kind == "attempt_started":
            self._open_attempt(call, data.get("attempt_id"), data.get("number"), event.at)
        elif event.kind == "attempt":
            self._close_attempt(call, data.get("attempt"), event.at)
        elif event.kind == "tool_message":
            call.call.add_event("tool_message", _safe(data), timestamp=_ns(event.at))
            if call.state is not State.AWAITING_CONFIRMATION:
                if data.get("is_error") is True:
                    call.call.set_attribute("toolbound.is_error", value=True)
                self._finish(call, end=_ns(event.at))
                return True
        else:
            target = self._current_attempt(call) or call.call
            target.add_event(event.kind, _safe(data), timestamp=_ns(event.at))
        return False

    def _transition(self, call: _Open, event: TraceEvent) -> None:
        state = event.state
        assert state is not None  # noqa: S101 - checked by the caller
        data = event.data
        call.state = state
        call.path.append(state.value)
        previous = data.get("previous")
        attributes: dict[str, AttributeValue] = {"toolbound.state": state.value}
        if isinstance(previous, State):
            attributes["toolbound.previous"] = previous.value
        call.call.add_event("transition", attributes, timestamp=_ns(event.at))
        spec = data.get("spec")
        if isinstance(spec, str):
            call.call.set_attribute("toolbound.tool", spec)
            if call.tool_type is None:
                name, _, version = spec.rpartition("@")
                self._describe(call, name, version)
        digest = data.get("digest")
        if isinstance(digest, str):
            call.call.set_attribute("toolbound.digest", digest)
        if state is State.EXECUTING:
            self._open_attempt(call, data.get("attempt_id"), data.get("attempt"), event.at)

    def _open_attempt(self, call: _Open, attempt_id: object, number: object, at: float) -> None:
        if not isinstance(attempt_id, str) or attempt_id in call.attempts:
            return
        call.attempt_count += 1
        parent = otel_trace.set_span_in_context(call.call)
        span = call.attempts[attempt_id] = self._tracer.start_span(
            f"toolbound.attempt {call.name}",
            context=parent,
            attributes={
                "toolbound.attempt.id": attempt_id,
                "toolbound.attempt.number": number
                if isinstance(number, int)
                else call.attempt_count,
            },
            start_time=_ns(at),
        )
        context = span.get_span_context()
        if context.is_valid:
            # An HTTP tool names this span as its traceparent's parent, and sends the
            # headers the deployment's propagator writes for it (tracestate, baggage).
            carrier: dict[str, str] = {}
            propagate.inject(
                carrier, context=otel_trace.set_span_in_context(span, otel_context.get_current())
            )
            publish_attempt_span(attempt_id, f"{context.span_id:016x}", carrier)

    def _close_attempt(self, call: _Open, attempt: object, at: float) -> None:
        attempt_id = getattr(attempt, "attempt_id", None)
        span = call.attempts.pop(attempt_id, None) if isinstance(attempt_id, str) else None
        if span is None:
            return
        retract_attempt_span(str(attempt_id))
        done: Attempt = attempt  # type: ignore[assignment]
        span.set_attribute("toolbound.attempt.outcome", done.outcome)
        if done.detail is not None:
            span.set_attribute("toolbound.attempt.detail", done.detail)
        if done.outcome != "committed":
            span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, done.outcome))
        span.end(end_time=_ns(at))

    def _describe(self, call: _Open, name: str, version: str) -> None:
        """Name the tool's type and description on the call span, once it is known."""
        tool = None if self.tools is None else self.tools.get(name, version)
        if tool is None:
            return
        call.tool_type = str(getattr(tool.function, "telemetry_tool_type", "function"))
        call.call.set_attribute("gen_ai.tool.type", call.tool_type)
        call.call.set_attribute("gen_ai.tool.description", tool.spec.description)

    def _current_attempt(self, call: _Open) -> otel_trace.Span | None:
        return next(reversed(call.attempts.values()), None)

    def _finish(self, call: _Open, *, end: int | None) -> None:
        """Set the call span's summary attributes and end it (and any unfinished attempt)."""
        call.ended = True
        for span in call.attempts.values():
            span.set_attribute("toolbound.attempt.outcome", "unfinished")
            span.end(end_time=end)
        call.attempts.clear()
        span = call.call
        state = call.state
        span.set_attribute("toolbound.state", state.value)
        span.set_attribute("toolbound.state_path", tuple(call.path))
        span.set_attribute("toolbound.attempts", call.attempt_count)
        if end is not None:  # an ended call's answer kind, as /metrics counts it
            span.set_attribute("toolbound.outcome", OUTCOME_KIND.get(state, "cancelled"))
        if state in _COMMITTED:
            span.set_attribute("toolbound.commit_status", "committed")
        elif state is State.OUTCOME_UNKNOWN:
            span.set_attribute("toolbound.commit_status", "unknown")
        elif state in TERMINAL:
            span.set_attribute("toolbound.commit_status", "not_committed")
        error_type = None
        if call.error_code is not None:
            span.set_attribute("toolbound.error_code", call.error_code)
        if state in _FAILED:
            # GenAI conventions: error.type names the failure, low-cardinality.
            error_type = call.error_code or state.value
            span.set_attribute("error.type", error_type)
            span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, error_type))
        span.end(end_time=end)
        if end is not None:
            self._measure(call, end, error_type)

    def _measure(self, call: _Open, end: int, error_type: str | None) -> None:
        """Record the call's ``gen_ai.execute_tool.duration``, in seconds."""
        measured: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
        }
        if call.tool_type is not None:
            measured["gen_ai.tool.type"] = call.tool_type
        if error_type is not None:
            measured["error.type"] = error_type
        self._duration.record(max(0.0, (end - _ns(call.started)) / 1e9), measured)


def _parent(
    trace_id: str | None, caller: Scope | None, attributes: dict[str, AttributeValue]
) -> otel_context.Context | None:
    """The parent context carrying the call's trace id (R14), or ``None`` for a new trace."""
    if trace_id is None or not valid_trace_id(trace_id):
        return None
    if caller is not None and caller.parent is not None and caller.trace_id == trace_id:
        remote = remote_context(caller.parent, caller.tracestate)
        return otel_trace.set_span_in_context(
            otel_trace.NonRecordingSpan(remote), otel_context.get_current()
        )
    current = otel_trace.get_current_span().get_span_context()
    if current.is_valid and current.trace_id == int(trace_id, 16):
        return otel_context.get_current()
    # No known parent span: a synthetic remote one carries the trace id, since the
    # OpenTelemetry API takes a trace id only from a parent.
    attributes["toolbound.synthetic_parent"] = True
    remote = otel_trace.SpanContext(
        trace_id=int(trace_id, 16),
        span_id=int.from_bytes(os.urandom(8), "big") or 1,
        is_remote=True,
        trace_flags=otel_trace.TraceFlags(otel_trace.TraceFlags.SAMPLED),
    )
    return otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(remote))


def _safe(data: Mapping[str, object]) -> dict[str, AttributeValue]:
    """The whitelisted scalar detail of an event, as span-event attributes."""
    out: dict[str, AttributeValue] = {}
    for key in _EVENT_KEYS & data.keys():
        value = data[key]
        if isinstance(value, bool | int | float | str):
            out[f"toolbound.{key}"] = value
    return out


def exporting_sink(
    exporter: str,
    *,
    endpoint: str | None = None,
    service_name: str = "toolbound",
    metrics: bool = True,
    tools: ToolCatalogue | None = None,
) -> OpenTelemetrySink:
    """A sink with its own SDK providers exporting to ``"console"`` or ``"otlp"``.

    Spans (batched) and metrics (``gen_ai.execute_tool.duration``, read periodically
    and at shutdown) go to the same place. ``otlp`` sends OTLP/HTTP to ``endpoint``
    (``/v1/traces`` and ``/v1/metrics`` under it; default: the exporters' own
    default, ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``http://localhost:4318``).
    ``metrics=False`` exports spans only (the metrics go to the global meter provider).
    """
    from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider  # noqa: PLC0415
    from opentelemetry.sdk.metrics.export import (  # noqa: PLC0415
        ConsoleMetricExporter,
        MetricExporter,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415 - SDK only when exporting
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    span_exporter: SpanExporter
    metric_exporter: MetricExporter
    if exporter == "console":
        span_exporter = ConsoleSpanExporter()
        metric_exporter = ConsoleMetricExporter()
    elif exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # noqa: PLC0415
            OTLPMetricExporter,
        )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )

        base = endpoint.rstrip("/") if endpoint else None
        span_exporter = OTLPSpanExporter(endpoint=None if base is None else f"{base}/v1/traces")
        metric_exporter = OTLPMetricExporter(
            endpoint=None if base is None else f"{base}/v1/metrics"
        )
    else:
        msg = f"unknown exporter {exporter!r}: use console or otlp"
        raise ValueError(msg)
    resource = Resource.create({"service.name": service_name})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    meters = (
        SdkMeterProvider(
            resource=resource, metric_readers=[PeriodicExportingMetricReader(metric_exporter)]
        )
        if metrics
        else None
    )
    sink = OpenTelemetrySink(provider, meter_provider=meters, tools=tools)
    sink._owns_provider = True  # noqa: SLF001 - built here, so shut down with the sink
    return sink

"""OpenTelemetry spans and W3C Trace Context (R14).

The W3C trace-context test suite (github.com/w3c/trace-context/test) is not available
offline, so the ``traceparent`` vectors below are written from the rules of Trace
Context level 1 (section 3.2 and "Versioning of traceparent"), each with its reason;
several mirror cases of that suite by name.
"""

from __future__ import annotations

import io
import json
import threading

import pytest
from opentelemetry import propagate
from opentelemetry import trace as otel_trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.propagators.textmap import TextMapPropagator, default_getter, default_setter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

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
from toolbound._state import State
from toolbound.execution.retry import FakeSleeper, NotReached
from toolbound.execution.tool import StaticSecrets
from toolbound.otel import (
    OpenTelemetrySink,
    TraceParent,
    context_from_traceparent,
    format_traceparent,
    parse_traceparent,
    propagation_scope,
    traceparent_scope,
)
from toolbound.telemetry import propagation
from toolbound.telemetry.propagation import Incoming, extract
from toolbound.telemetry.w3c import parse_tracestate
from toolbound.testing import FakeTool
from toolbound.trace import TraceEvent, attempt_carrier

TID = "4bf92f3577b34da6a3ce929d0e0e4736"
PID = "00f067aa0ba902b7"
V00 = f"00-{TID}-{PID}-01"

# -- traceparent vectors -------------------------------------------------------------

VALID = [
    (V00, TraceParent(version="00", trace_id=TID, parent_id=PID, trace_flags=1), "spec example"),
    (f"00-{TID}-{PID}-00", None, "not sampled"),
    (f"00-{TID}-{PID}-ff", None, "unknown flag bits parsed, sampled kept"),
    (f"  {V00}\t", None, "optional whitespace around the value (RFC 9110 OWS)"),
    (f"01-{TID}-{PID}-01", None, "a future version with exactly 55 chars"),
    (f"cc-{TID}-{PID}-01-what-the-future-will-be-like", None, "future version, extra after '-'"),
    (f"cc-{TID}-{PID}-01-", None, "future version, empty extra after '-'"),
    (f"fe-{TID}-{PID}-09", None, "the highest allowed version"),
]


@pytest.mark.parametrize(("header", "expected", "reason"), VALID, ids=[v[2] for v in VALID])
def test_valid_traceparent_parses(header, expected, reason):
    """A header the spec accepts parses to its lowercase ids and flags byte."""
    parsed = parse_traceparent(header)
    assert parsed is not None, reason
    assert parsed.trace_id == TID
    assert parsed.parent_id == PID
    assert parsed.trace_flags == int(header.strip()[53:55], 16)
    assert parsed.sampled == bool(parsed.trace_flags & 1)
    if expected is not None:
        assert parsed == expected


INVALID = [
    (None, "no header"),
    ("", "empty"),
    (V00[:-1], "too short (54 chars)"),
    (V00 + "0", "version 00 longer than 55 chars"),
    (V00 + "-extra", "version 00 must be exactly 55 chars even with a dash"),
    (f"cc-{TID}-{PID}-01.what-the-future-will-be-like", "future version, extra not after '-'"),
    (f"ff-{TID}-{PID}-01", "version ff is forbidden"),
    (f"0-{TID}-{PID}-01", "version one digit"),
    (f"000-{TID}-{PID}-01", "version three digits"),
    (f"0g-{TID}-{PID}-01", "version not hex"),
    (f"0A-{TID}-{PID}-01", "version uppercase"),
    (f"00-{TID.upper()}-{PID}-01", "trace id uppercase"),
    (f"00-{TID}-{PID.upper()}-01", "parent id uppercase"),
    (f"00-{TID}-{PID}-0A", "flags uppercase"),
    (f"00-{'0' * 32}-{PID}-01", "all-zero trace id"),
    (f"00-{TID}-{'0' * 16}-01", "all-zero parent id"),
    (f"00-{TID[:-1]}-{PID}0-01", "trace id 31 chars"),
    (f"00-{TID}0-{PID[:-1]}-01", "parent id 15 chars"),
    (f"00-{TID}-{PID}-1", "flags one digit"),
    (f"00-{TID}-{PID}-0x", "flags not hex"),
    (f"00-{TID[:-1]}.-{PID}-01", "trace id illegal character"),
    (f"00-{TID}-{PID[:-1]}.-01", "parent id illegal character"),
    (f"00_{TID}_{PID}_01", "wrong delimiter"),
    (f"00-{TID}-{PID}-01,{V00}", "two headers folded into one value"),
    (f"00-{TID}-{PID}-01\n", "a newline is not optional whitespace"),
    (f"00-{TID}-{PID}-0\u0661", "a non-ASCII digit (ARABIC-INDIC ONE)"),
]


@pytest.mark.parametrize(("header", "reason"), INVALID, ids=[v[1] for v in INVALID])
def test_invalid_traceparent_starts_a_new_trace(header, reason):
    """A header the spec rejects parses to None: the receiver starts a new trace."""
    assert parse_traceparent(header) is None, reason
    assert context_from_traceparent(header) is None


def test_format_traceparent_writes_version_00():
    """Formatting always writes version 00; a future-version header downgrades on send."""
    assert format_traceparent(TID, PID) == V00
    assert format_traceparent(TID, PID, trace_flags=0) == f"00-{TID}-{PID}-00"
    future = parse_traceparent(f"cc-{TID}-{PID}-01-more")
    assert future is not None
    assert future.header == V00
    assert parse_traceparent(future.header) == TraceParent(
        version="00", trace_id=TID, parent_id=PID, trace_flags=1
    )


@pytest.mark.parametrize(
    ("trace_id", "parent_id", "flags"),
    [
        ("0" * 32, PID, 1),
        (TID, "0" * 16, 1),
        (TID.upper(), PID, 1),
        (TID, PID[:-1], 1),
        (TID, PID, 256),
    ],
)
def test_format_traceparent_refuses_forbidden_ids(trace_id, parent_id, flags):
    """Formatting an id the spec forbids is a developer error, not a silent bad header."""
    with pytest.raises(ValueError, match="must"):
        format_traceparent(trace_id, parent_id, trace_flags=flags)


def test_context_from_traceparent_gives_the_trace_id():
    """A valid header's trace id is what goes into CallContext.trace_id."""
    assert context_from_traceparent(V00) == TID


def test_scope_yields_caller_or_fresh_trace_id():
    """A scope yields the caller's trace id, or a fresh valid one for a bad header."""
    with traceparent_scope(V00) as trace_id:
        assert trace_id == TID
    with traceparent_scope("garbage") as fresh, traceparent_scope(None) as other:
        assert len(fresh) == 32
        assert int(fresh, 16) != 0
        assert fresh != other


# -- spans through a real runtime ----------------------------------------------------

MIRA = Subject(id="mira", tenant="acme", session="s-1")


def _spec(**overrides) -> ToolSpec:
    fields: dict[str, object] = {
        "name": "echo",
        "version": "v1",
        "description": "Echo some text.",
        "input_schema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        },
        "effect": "read",
        "capabilities": ("test:use",),
        "timeout": 2.0,
    }
    fields.update(overrides)
    return ToolSpec(**fields)


class World:
    """A registry, a runtime with an OpenTelemetry sink, and an in-memory exporter."""

    def __init__(
        self, *, console: io.StringIO | None = None, confirm: bool = False, **runtime_kw
    ) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        if console is not None:
            exporter = ConsoleSpanExporter(out=console)
            self.provider.add_span_processor(SimpleSpanProcessor(exporter))
        self.registry = Registry()
        self.metrics = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.metrics])
        self.sink = OpenTelemetrySink(
            self.provider, meter_provider=self.meters, tools=self.registry
        )
        grant = Grant(
            subject=MIRA.id,
            tenant=MIRA.tenant,
            capability="test:use",
            actions=frozenset({"read"}),
            confirm=confirm,
        )
        self.runtime = Runtime(policy=GrantPolicy([grant]), sinks=[self.sink], **runtime_kw)

    def run(self, arguments: object, *, trace_id: str | None = None, call_id: str = "call_1"):
        proposal = Proposal(
            name="echo", arguments=json.dumps(arguments).encode(), proposal_id=call_id
        )
        ctx = CallContext(subject=MIRA, tools=self.registry.toolset(), trace_id=trace_id)
        return self.runtime.run(proposal, ctx)

    def spans(self) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
        spans = self.exporter.get_finished_spans()
        calls = [s for s in spans if s.name.startswith("execute_tool")]
        attempts = [s for s in spans if s.name.startswith("toolbound.attempt")]
        return calls, attempts

    def durations(self) -> list[tuple[dict[str, object], int, float]]:
        """Each ``gen_ai.execute_tool.duration`` point: attributes, count and sum."""
        data = self.metrics.get_metrics_data()
        return [
            (dict(point.attributes), point.count, point.sum)
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == "gen_ai.execute_tool.duration"
            for point in metric.data.data_points
        ]

    def close(self) -> None:
        self.runtime.close()
        self.provider.shutdown()
        self.meters.shutdown()


@pytest.fixture
def world():
    w = World()
    yield w
    w.close()


def test_observed_read_gives_call_and_attempt_spans(world: World):
    """An observed read is one call span and one child attempt span in the caller's trace."""
    world.registry.register(_spec(), FakeTool(returns={"text": "hi"}))
    with traceparent_scope(V00) as trace_id:
        out = world.run({"text": "x"}, trace_id=trace_id)
    assert out.kind == "observed"
    assert out.trace.trace_id == TID
    [call], [attempt] = world.spans()
    assert call.context.trace_id == attempt.context.trace_id == int(TID, 16)
    assert call.context.span_id != attempt.context.span_id
    assert call.parent is not None
    assert call.parent.span_id == int(PID, 16)
    assert call.parent.is_remote
    assert attempt.parent is not None
    assert attempt.parent.span_id == call.context.span_id
    attrs = call.attributes
    assert attrs["toolbound.tool"] == "echo@v1"
    assert attrs["gen_ai.tool.name"] == "echo"
    assert attrs["gen_ai.tool.call.id"] == "call_1"
    assert attrs["toolbound.invocation_id"] == out.invocation_id
    assert attrs["toolbound.state"] == "observed"
    assert attrs["toolbound.state_path"] == tuple(s.value for s in out.path)
    assert str(attrs["toolbound.digest"]).startswith("sha256:")
    assert attrs["toolbound.commit_status"] == "committed"
    assert attrs["toolbound.outcome"] == "observed"
    assert attrs["toolbound.attempts"] == 1
    assert "toolbound.synthetic_parent" not in attrs
    assert [e.attributes["toolbound.state"] for e in call.events if e.name == "transition"] == [
        s.value for s in out.path[1:]
    ]
    assert attempt.attributes["toolbound.attempt.number"] == 1
    assert attempt.attributes["toolbound.attempt.outcome"] == "committed"
    assert call.status.status_code is otel_trace.StatusCode.UNSET
    assert call.start_time <= attempt.start_time <= attempt.end_time <= call.end_time


def test_rejected_proposal_gives_error_call_span_without_attempt(world: World):
    """A proposal rejected by the schema has a call span with error status and no attempt."""
    world.registry.register(_spec(), FakeTool(returns={"text": "hi"}))
    with traceparent_scope(None) as trace_id:
        out = world.run({"text": "x", "admin": True}, trace_id=trace_id)
    assert out.kind == "rejected"
    [call], attempts = world.spans()
    assert attempts == []
    assert call.context.trace_id == int(trace_id, 16)
    assert call.attributes["toolbound.synthetic_parent"] is True
    assert call.attributes["toolbound.state"] == State.VALIDATION_REJECTED.value
    assert call.attributes["toolbound.error_code"] == "additional_properties"
    assert call.attributes["toolbound.commit_status"] == "not_committed"
    assert call.status.status_code is otel_trace.StatusCode.ERROR
    assert call.status.description == "additional_properties"


def test_parked_call_span_stays_open_until_approved():
    """A call awaiting confirmation keeps one open call span that ends after approval."""
    w = World(confirm=True)
    w.registry.register(_spec(), FakeTool(returns={"text": "hi"}))
    try:
        with traceparent_scope(V00) as trace_id:
            parked = w.run({"text": "x"}, trace_id=trace_id)
        assert parked.kind == "awaiting_confirmation"
        assert w.spans() == ([], [])
        done = w.runtime.approve(parked.invocation_id, digest=parked.request.digest, approver="ana")
    finally:
        w.close()
    assert done.kind == "observed"
    [call], [attempt] = w.spans()
    assert call.context.trace_id == int(TID, 16)
    assert attempt.parent.span_id == call.context.span_id
    path = call.attributes["toolbound.state_path"]
    assert path[path.index("awaiting_confirmation") + 1] == "prepared"
    assert path[-1] == "observed"
    assert [e.name for e in call.events].count("tool_message") == 2


def test_retried_call_gives_two_attempt_spans():
    """A call retried after NotReached has two attempt spans under the one call span."""
    w = World(sleeper=FakeSleeper())
    calls = {"n": 0}

    def flaky(arguments, ctx):
        calls["n"] += 1
        if calls["n"] == 1:
            msg = "x"
            raise NotReached(msg)
        return {"text": "ok"}

    w.registry.register(_spec(max_attempts=2), flaky)
    try:
        out = w.run({"text": "x"})
    finally:
        w.close()
    assert out.kind == "observed"
    [call], attempts = w.spans()
    assert sorted(a.attributes["toolbound.attempt.number"] for a in attempts) == [1, 2]
    assert {a.parent.span_id for a in attempts} == {call.context.span_id}
    assert len({a.context.span_id for a in attempts}) == 2
    by_number = {a.attributes["toolbound.attempt.number"]: a for a in attempts}
    assert by_number[1].attributes["toolbound.attempt.outcome"] == "not_committed"
    assert by_number[1].status.status_code is otel_trace.StatusCode.ERROR
    assert [e.name for e in by_number[1].events] == ["retry_decision"]
    assert by_number[1].events[0].attributes["toolbound.action"] == "retry"
    assert by_number[2].attributes["toolbound.attempt.outcome"] == "committed"
    assert call.attributes["toolbound.attempts"] == 2


def test_secrets_and_arguments_never_reach_spans():
    """No span or span-event attribute holds a secret, the arguments or the result."""
    w = World(secrets=StaticSecrets({"api_key": "sk-live-123456"}))

    def leaky(arguments, ctx):
        return {"text": f"used {ctx.secrets['api_key']} for {arguments['text']}"}

    w.registry.register(_spec(secrets=("api_key",)), leaky)
    try:
        out = w.run({"text": "private-argument"})
    finally:
        w.close()
    assert out.kind == "observed"
    calls, attempts = w.spans()
    dumped = repr(
        [(dict(s.attributes), [dict(e.attributes) for e in s.events]) for s in calls + attempts]
    )
    assert "sk-live" not in dumped
    assert "private-argument" not in dumped
    assert "used" not in dumped


class _BrokenTracer(otel_trace.NoOpTracer):
    def start_span(self, *_args, **_kwargs):
        msg = "exporter on fire"
        raise RuntimeError(msg)


class _BrokenProvider(otel_trace.NoOpTracerProvider):
    def get_tracer(self, *_args, **_kwargs):
        return _BrokenTracer()


def test_sink_failure_does_not_break_the_call():
    """A sink whose tracer raises counts the error; the call still completes."""
    sink = OpenTelemetrySink(_BrokenProvider())
    registry = Registry()
    registry.register(_spec(), FakeTool(returns={"text": "hi"}))
    grant = Grant(subject="mira", tenant="acme", capability="test:use", actions=frozenset({"read"}))
    with Runtime(policy=GrantPolicy([grant]), sinks=[sink]) as runtime:
        out = runtime.run(
            Proposal(name="echo", arguments=b'{"text":"x"}', proposal_id="c"),
            CallContext(subject=MIRA, tools=registry.toolset()),
        )
    assert out.kind == "observed"
    assert sink.errors == 1
    assert sink.last_error == "RuntimeError: exporter on fire"


def test_concurrent_calls_get_their_own_spans(world: World):
    """Calls from many threads each get one call span and one attempt span of their own."""
    world.registry.register(_spec(), FakeTool(returns={"text": "hi"}))
    outs = []
    lock = threading.Lock()

    def one(i: int) -> None:
        with traceparent_scope(None) as trace_id:
            out = world.run({"text": "x"}, trace_id=trace_id, call_id=f"c{i}")
        with lock:
            outs.append((out, trace_id))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    calls, attempts = world.spans()
    assert world.sink.errors == 0
    assert len(calls) == len(attempts) == 16
    by_id = {c.attributes["toolbound.invocation_id"]: c for c in calls}
    for out, trace_id in outs:
        assert by_id[out.invocation_id].context.trace_id == int(trace_id, 16)
    assert {a.parent.span_id for a in attempts} == {c.context.span_id for c in calls}


def test_trace_id_recorded_in_the_proposal_event_wins():
    """A trace id in the "proposal" event sets the span's trace id without any scope."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = OpenTelemetrySink(provider)
    proposal = {"name": "echo", "version": None, "proposal_id": "c", "trace_id": TID}
    sink.emit("inv", TraceEvent(0, 1.0, "proposal", State.PROPOSED, proposal))
    sink.emit("inv", TraceEvent(1, 2.0, "transition", State.PARSE_REJECTED, {}))
    sink.emit("inv", TraceEvent(2, 3.0, "tool_message", None, {"is_error": True}))
    sink.emit("inv", TraceEvent(3, 4.0, "tool_message", None, {}))  # late: ignored
    [span] = exporter.get_finished_spans()
    assert span.context.trace_id == int(TID, 16)
    assert span.start_time == 1_000_000_000
    assert span.end_time == 3_000_000_000
    assert span.attributes["toolbound.is_error"] is True
    assert sink.errors == 0


def test_outside_a_scope_the_call_nests_under_the_active_span(world: World):
    """With no trace id known, the call span is a child of the application's current span."""
    world.registry.register(_spec(), FakeTool(returns={"text": "hi"}))
    tracer = world.provider.get_tracer("app")
    with tracer.start_as_current_span("agent turn") as turn:
        world.run({"text": "x"})
    [call], [_attempt] = world.spans()
    assert call.parent is not None
    assert call.parent.span_id == turn.get_span_context().span_id
    assert call.context.trace_id == turn.get_span_context().trace_id


def test_console_exporter_prints_spans():
    """The SDK's console exporter works with the sink (the documented local set-up)."""
    out = io.StringIO()
    w = World(console=out)
    w.registry.register(_spec(), FakeTool(returns={"text": "hi"}))
    try:
        w.run({"text": "x"})
    finally:
        w.close()
    printed = out.getvalue()
    assert '"name": "execute_tool echo"' in printed
    assert '"name": "toolbound.attempt echo"' in printed


# -- GenAI semantic conventions ------------------------------------------------------


def test_call_span_follows_the_genai_execute_tool_conventions(world: World):
    """The call span is an INTERNAL ``execute_tool {name}`` span with the GenAI attributes."""
    world.registry.register(_spec(), FakeTool(returns={"text": "hi"}))
    world.run({"text": "x"})
    [call], _ = world.spans()
    assert call.name == "execute_tool echo"
    assert call.kind is otel_trace.SpanKind.INTERNAL
    attrs = call.attributes
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["gen_ai.tool.name"] == "echo"
    assert attrs["gen_ai.tool.call.id"] == "call_1"
    assert attrs["gen_ai.tool.type"] == "function"
    assert attrs["gen_ai.tool.description"] == "Echo some text."
    assert "error.type" not in attrs
    # toolbound's own attributes keep their prefix.
    assert {k for k in attrs if not k.startswith(("gen_ai.", "error."))} <= {
        k for k in attrs if k.startswith("toolbound.")
    }


def test_failed_call_names_its_error_type(world: World):
    """A failure sets ``error.type`` to its problem code (else its final state)."""
    world.registry.register(_spec(), FakeTool(returns={"text": "hi"}))
    world.run({"text": "x", "admin": True})
    [call], _ = world.spans()
    assert call.attributes["error.type"] == "additional_properties"
    assert call.status.status_code is otel_trace.StatusCode.ERROR


def test_an_unknown_tool_has_no_type_or_description(world: World):
    """A name the model made up is not described: nothing to look up."""
    world.run({"text": "x"})
    [call], _ = world.spans()
    assert call.attributes["gen_ai.tool.name"] == "echo"
    assert "gen_ai.tool.type" not in call.attributes
    assert "gen_ai.tool.description" not in call.attributes
    assert call.attributes["error.type"] == "unknown_tool"


def test_duration_histogram_is_recorded_per_call(world: World):
    """``gen_ai.execute_tool.duration`` gets one point per ended call, in seconds."""
    world.registry.register(_spec(), FakeTool(returns={"text": "hi"}))
    world.run({"text": "x"}, call_id="a")
    world.run({"text": "y"}, call_id="b")
    world.run({"text": "x", "admin": True}, call_id="c")
    points = {tuple(sorted(a.items())): (count, total) for a, count, total in world.durations()}
    ok = (
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "echo"),
        ("gen_ai.tool.type", "function"),
    )
    failed = tuple(sorted((*ok, ("error.type", "additional_properties"))))
    assert set(points) == {ok, failed}
    assert points[ok][0] == 2
    assert points[failed][0] == 1
    [call, *_] = world.spans()[0]
    assert 0 <= points[ok][1] < 5  # seconds, not nanoseconds
    assert call.end_time - call.start_time >= 0


def test_tracestate_is_kept_on_the_spans(world: World):
    """The caller's ``tracestate`` travels on the call and attempt spans' contexts."""
    world.registry.register(_spec(), FakeTool(returns={"text": "hi"}))
    with traceparent_scope(V00, tracestate="congo=t61rcWkgMzE, rojo=00f067aa0ba902b7") as tid:
        world.run({"text": "x"}, trace_id=tid)
    [call], [attempt] = world.spans()
    assert call.parent is not None
    assert call.parent.trace_state.to_header() == "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
    assert attempt.context.trace_state.to_header() == "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("header", "kept"),
    [
        ("congo=t61rcWkgMzE", "congo=t61rcWkgMzE"),
        (" congo=t61rcWkgMzE ,, rojo=00f067aa0ba902b7", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"),
        ("tenant@vendor=x", "tenant@vendor=x"),
        ("Congo=t61", None),  # keys are lowercase
        ("congo=a,congo=b", None),  # a key at most once
        ("congo=a=b", None),  # '=' is not a value character
        ("congo=", None),  # a value has at least one non-blank character
        (",".join(f"k{i}=v" for i in range(33)), None),  # at most 32 members
        ("", None),
    ],
)
def test_tracestate_is_kept_only_when_valid(header, kept):
    """A valid ``tracestate`` is normalized; an invalid one is dropped whole (W3C 3.3)."""
    assert parse_tracestate(header) == kept


@pytest.mark.parametrize(("header", "expected", "reason"), VALID, ids=[v[2] for v in VALID])
def test_valid_traceparent_is_extracted_through_the_propagator(header, expected, reason):
    """The global propagator path keeps the caller's trace for every valid vector."""
    incoming = extract({"traceparent": header, "tracestate": "congo=t61rcWkgMzE"})
    assert incoming.trace_id == TID, reason
    assert incoming.tracestate == "congo=t61rcWkgMzE"


@pytest.mark.parametrize(("header", "reason"), INVALID, ids=[v[1] for v in INVALID])
def test_invalid_traceparent_is_refused_through_the_propagator(header, reason):
    """The propagator path starts a new trace for every invalid vector, tracestate dropped."""
    carrier = {"tracestate": "congo=t61rcWkgMzE"}
    if header is not None:
        carrier["traceparent"] = header
    incoming = extract(carrier)
    assert incoming.parent is None, reason
    assert incoming.tracestate is None


def test_baggage_reaches_the_attempts_propagation_headers(world: World):
    """Baggage from the caller's headers is injected into an attempt's outgoing headers."""
    published: list[dict[str, str]] = []

    class Capture(FakeTool):
        def __call__(self, arguments, ctx):
            published.append(dict(attempt_carrier(ctx.attempt_id) or {}))
            return super().__call__(arguments, ctx)

    world.registry.register(_spec(), Capture(returns={"text": "hi"}))
    carrier = {"traceparent": V00, "tracestate": "congo=t61rcWkgMzE", "baggage": "user=mira"}
    with propagation_scope(carrier) as tid:
        world.run({"text": "x"}, trace_id=tid)
    [sent] = published
    [_call], [attempt] = world.spans()
    assert sent["traceparent"] == format_traceparent(TID, f"{attempt.context.span_id:016x}")
    assert sent["tracestate"] == "congo=t61rcWkgMzE"
    assert sent["baggage"] == "user=mira"


def test_without_the_otel_api_the_builtin_parser_reads_the_headers(monkeypatch):
    """With no OpenTelemetry propagator, traceparent and tracestate are read by toolbound."""
    monkeypatch.setattr(propagation, "propagate", None)
    incoming = extract({"TraceParent": V00, "TraceState": "congo=t61rcWkgMzE", "baggage": "a=b"})
    assert incoming.parent == parse_traceparent(V00)
    assert incoming.tracestate == "congo=t61rcWkgMzE"
    assert dict(incoming.baggage) == {}  # baggage needs the API's propagator
    assert extract({"traceparent": V00 + "0", "tracestate": "congo=x"}).tracestate is None


def test_headers_are_found_whatever_their_case():
    """A plain dict of headers is read case-insensitively, as HTTP means them."""
    incoming = extract({"TRACEPARENT": V00, "Tracestate": "congo=t61rcWkgMzE"})
    assert incoming.trace_id == TID
    assert incoming.tracestate == "congo=t61rcWkgMzE"


def test_baggage_alone_is_read_by_the_default_propagators():
    """No ``traceparent``, only ``baggage``: no caller's span, but its entries are kept."""
    incoming = extract({"content-type": "application/json", "Baggage": "user=mira"})
    assert incoming.parent is None
    assert dict(incoming.baggage) == {"user": "mira"}
    assert extract({"content-type": "application/json"}) == Incoming(parent=None)


class _Named(TextMapPropagator):
    """Reads the caller's span from ``x-span: <trace id>:<span id>`` (not a W3C header)."""

    def extract(self, carrier, context=None, getter=default_getter):
        found = getter.get(carrier, "x-span")
        if not found:
            return context if context is not None else Context()
        trace_id, _, span_id = found[0].partition(":")
        remote = otel_trace.SpanContext(
            trace_id=int(trace_id, 16), span_id=int(span_id, 16), is_remote=True
        )
        return otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(remote), context)

    def inject(self, carrier, context=None, setter=default_setter) -> None:
        """Writes nothing: only extraction is under test."""

    @property
    def fields(self) -> set[str]:
        return {"x-span"}


@pytest.mark.parametrize(
    "propagator",
    [
        _Named(),
        CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator(), _Named()]),
    ],
    ids=["alone", "beside the defaults"],
)
def test_a_propagator_of_the_deployments_is_asked_without_w3c_headers(propagator):
    """Any propagator but the default pair may read any header: it is always asked."""
    before = propagate.get_global_textmap()
    propagate.set_global_textmap(propagator)
    try:
        incoming = extract({"X-Span": f"{TID}:00f067aa0ba902b7"})
    finally:
        propagate.set_global_textmap(before)
    assert incoming.trace_id == TID
    assert extract({"X-Span": f"{TID}:00f067aa0ba902b7"}).parent is None  # defaults again

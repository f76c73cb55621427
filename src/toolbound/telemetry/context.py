"""The caller's trace context as OpenTelemetry context (R14; the ``otel`` extra).

:func:`traceparent_scope` and :func:`propagation_scope` make a caller's trace the
one calls proposed inside them join (:class:`~toolbound.otel.OpenTelemetrySink` reads
:data:`SCOPE`); :func:`incoming_context` turns what the headers said into the active
OpenTelemetry context, for a surface's own spans.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opentelemetry import baggage
from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace

from toolbound.telemetry.propagation import Incoming, extract
from toolbound.telemetry.w3c import TraceParent, new_trace_id

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

__all__ = [
    "SCOPE",
    "Scope",
    "incoming_context",
    "propagation_scope",
    "remote_span_context",
    "traceparent_scope",
]


@dataclass(frozen=True, slots=True)
class Scope:
    """The caller's trace, for the calls proposed inside a scope."""

    trace_id: str
    parent: TraceParent | None
    tracestate: str | None = None


SCOPE: ContextVar[Scope | None] = ContextVar("toolbound_otel_scope", default=None)


@contextmanager
def traceparent_scope(header: str | None, tracestate: str | None = None) -> Iterator[str]:
    """Within the block, calls get the caller's trace; yields the id for ``CallContext``.

    A valid ``header`` yields its trace id, and the call spans of proposals made in
    the block become children of the caller's span (carrying its ``tracestate``); an
    absent or invalid one yields a fresh trace id (a new trace). Pass the yielded id
    as ``CallContext.trace_id`` so toolbound's trace, its HTTP tools' ``traceparent``
    and the spans agree::

        with traceparent_scope(request.headers.get("traceparent")) as trace_id:
            runtime.run(proposal, CallContext(subject=..., tools=..., trace_id=trace_id))
    """
    carrier = {"traceparent": header or ""}
    if tracestate is not None:
        carrier["tracestate"] = tracestate
    with propagation_scope(carrier) as trace_id:
        yield trace_id


@contextmanager
def propagation_scope(carrier: Mapping[str, str]) -> Iterator[str]:
    """:func:`traceparent_scope` from a request's headers, through the global propagator.

    The deployment's OpenTelemetry propagators read ``carrier`` (``traceparent`` and
    ``tracestate``, baggage, or whatever ``OTEL_PROPAGATORS`` names); a ``traceparent``
    must still pass the W3C rules. The caller's span and baggage are the active
    OpenTelemetry context inside the block, so an HTTP tool's request carries them on.
    """
    incoming = extract(carrier)
    trace_id = incoming.trace_id or new_trace_id()
    token = SCOPE.set(Scope(trace_id, incoming.parent, incoming.tracestate))
    # Nothing came in: the active context already is the one to run in.
    empty = incoming.parent is None and not incoming.baggage
    attached = None if empty else otel_context.attach(incoming_context(incoming))
    try:
        yield trace_id
    finally:
        if attached is not None:
            otel_context.detach(attached)
        SCOPE.reset(token)


def incoming_context(incoming: Incoming) -> otel_context.Context:
    """The active context with the caller's span (if valid) and baggage in it."""
    context = otel_context.get_current()
    if incoming.parent is not None:
        remote = remote_span_context(incoming.parent, incoming.tracestate)
        context = otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(remote), context)
    for key, value in incoming.baggage.items():
        context = baggage.set_baggage(key, value, context)
    return context


def remote_span_context(parent: TraceParent, tracestate: str | None) -> otel_trace.SpanContext:
    """The caller's span, as a remote OpenTelemetry span context."""
    return otel_trace.SpanContext(
        trace_id=int(parent.trace_id, 16),
        span_id=int(parent.parent_id, 16),
        is_remote=True,
        trace_flags=otel_trace.TraceFlags(parent.trace_flags),
        trace_state=otel_trace.TraceState.from_header([tracestate]) if tracestate else None,
    )

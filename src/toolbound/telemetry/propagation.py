"""Reading a caller's trace context from request headers (R14).

With the OpenTelemetry API installed (the ``otel`` extra), :func:`extract` asks the
*global* propagator — so a deployment's ``OTEL_PROPAGATORS`` (or a propagator the
application set) applies, baggage included — and keeps what it extracted as an
OpenTelemetry context. A ``traceparent`` header, when there is one, must still pass
the strict W3C parser (:func:`~toolbound.telemetry.w3c.parse_traceparent`), so a
header Trace Context rejects starts a new trace whichever propagator read it.
Without the API, the built-in W3C parser reads ``traceparent`` and ``tracestate``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from toolbound.telemetry.w3c import TraceParent, parse_traceparent, parse_tracestate

if TYPE_CHECKING:
    from collections.abc import Mapping

try:
    from opentelemetry import baggage, propagate
    from opentelemetry import trace as otel_trace
    from opentelemetry.baggage.propagation import W3CBaggagePropagator
    from opentelemetry.context import Context
    from opentelemetry.propagators.composite import CompositePropagator as _Composite
    from opentelemetry.propagators.textmap import Getter
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - exercised only without the extra
    propagate = None  # type: ignore[assignment]
else:
    _W3C_PARTS: frozenset[type] = frozenset({TraceContextTextMapPropagator, W3CBaggagePropagator})
    _W3C_ONLY: list[tuple[object, bool]] = [(None, False)]
    """The global propagator last seen, and whether it reads only the W3C headers."""

__all__ = ["Incoming", "extract", "header"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Incoming:
    """The caller's trace context, as its headers gave it.

    ``parent`` is ``None`` when there is no valid one (start a new trace);
    ``tracestate`` the caller's vendor state to pass on with it; ``baggage`` the
    entries the global propagator extracted (empty without the API, or when the
    deployment's propagators do not read baggage).
    """

    parent: TraceParent | None
    tracestate: str | None = None
    baggage: Mapping[str, object] = field(default_factory=dict)

    @property
    def trace_id(self) -> str | None:
        """The caller's trace id, for ``CallContext.trace_id``."""
        return None if self.parent is None else self.parent.trace_id


def header(carrier: Mapping[str, str], name: str) -> str | None:
    """The value of header ``name`` (case-insensitive) in ``carrier``, if present."""
    value = carrier.get(name)
    if value is not None:
        return value
    wanted = name.lower()
    return next((v for k, v in carrier.items() if k.lower() == wanted), None)


def extract(carrier: Mapping[str, str]) -> Incoming:
    """The caller's trace context from request headers; never raises."""
    raw_parent = header(carrier, "traceparent")
    if propagate is None:  # pragma: no cover - exercised only without the extra
        return _builtin(raw_parent, header(carrier, "tracestate"))
    if raw_parent is None and header(carrier, "baggage") is None and _reads_only_w3c():
        # OpenTelemetry's default propagators read nothing else: most requests carry
        # no trace context, and asking them would find none.
        return _NONE
    try:
        # Into an empty context: only what the headers say, not the active span.
        context = propagate.extract(carrier, context=Context(), getter=_GETTER)
    except Exception:  # noqa: BLE001 - a faulty propagator must not fail the request
        return _builtin(raw_parent, header(carrier, "tracestate"))
    entries = dict(baggage.get_all(context))
    if raw_parent is not None:
        # Trace Context's rules decide over a W3C header, whoever parsed it.
        found = _builtin(raw_parent, header(carrier, "tracestate"))
        return Incoming(parent=found.parent, tracestate=found.tracestate, baggage=entries)
    span = otel_trace.get_current_span(context).get_span_context()
    if not span.is_valid:
        return Incoming(parent=None, baggage=entries)
    # Another propagator (B3, Jaeger, ...) found the caller's span.
    parent = TraceParent(
        version="00",
        trace_id=f"{span.trace_id:032x}",
        parent_id=f"{span.span_id:016x}",
        trace_flags=int(span.trace_flags),
    )
    state = span.trace_state.to_header() or None
    return Incoming(parent=parent, tracestate=state, baggage=entries)


_NONE = Incoming(parent=None, baggage=MappingProxyType({}))


def _reads_only_w3c() -> bool:
    """Whether the global propagator is OpenTelemetry's default: Trace Context and baggage.

    Those read only the ``traceparent``, ``tracestate`` and ``baggage`` headers (and
    ``tracestate`` only with a ``traceparent``). Any other propagator, one of the
    application's or one ``OTEL_PROPAGATORS`` names, may read any header: it is asked.
    """
    textmap = propagate.get_global_textmap()
    seen, only = _W3C_ONLY[0]
    if seen is not textmap:
        parts = getattr(textmap, "_propagators", None) if type(textmap) is _Composite else None
        only = type(textmap) in _W3C_PARTS or (
            parts is not None and all(type(part) in _W3C_PARTS for part in parts)
        )
        # One pair swapped whole: another thread sees the old pair or the new one.
        _W3C_ONLY[0] = (textmap, only)
    return only


def _builtin(raw_parent: str | None, raw_state: str | None) -> Incoming:
    parent = parse_traceparent(raw_parent)
    # tracestate means nothing without a valid traceparent (Trace Context 3.3).
    return Incoming(
        parent=parent, tracestate=None if parent is None else parse_tracestate(raw_state)
    )


if propagate is not None:

    class _Getter(Getter["Mapping[str, str]"]):
        """Reads any string mapping, case-insensitively (HTTP headers, MCP ``_meta``)."""

        def get(self, carrier: Mapping[str, str], key: str) -> list[str] | None:
            value = header(carrier, key)
            return None if value is None else [value]

        def keys(self, carrier: Mapping[str, str]) -> list[str]:
            return list(carrier.keys())

    _GETTER = _Getter()

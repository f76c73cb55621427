"""Trace context for toolbound's telemetry (R14).

* :mod:`toolbound.telemetry.w3c` — the built-in W3C Trace Context parser and writer
  (no OpenTelemetry needed);
* :mod:`toolbound.telemetry.propagation` — reading a caller's trace context from
  headers, through OpenTelemetry's global propagator when the API is installed;
* :mod:`toolbound.telemetry.context` — the caller's trace as the active
  OpenTelemetry context (:func:`~toolbound.telemetry.context.propagation_scope`).

The span and metric sink is :mod:`toolbound.otel` (the ``otel`` extra).
"""

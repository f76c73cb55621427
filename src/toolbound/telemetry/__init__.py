"""Telemetry helpers that need no OpenTelemetry SDK.

* :mod:`toolbound.telemetry.w3c` — the built-in W3C Trace Context parser and writer;
* :mod:`toolbound.telemetry.propagation` — reading a caller's trace context from
  headers (through OpenTelemetry's global propagator when it is installed).

The span and metric sinks are in :mod:`toolbound.otel` (the ``otel`` extra).
"""

"""W3C Trace Context level 1 (https://www.w3.org/TR/trace-context/), without OpenTelemetry.

The built-in parser and writer toolbound uses when the ``otel`` extra is absent, and
the strict check on a ``traceparent`` even when a deployment's OpenTelemetry
propagator reads the headers (:mod:`toolbound.telemetry.propagation`):

* :func:`parse_traceparent` accepts a header or returns ``None`` ("start a new trace");
* :func:`format_traceparent` writes version ``00``;
* :func:`context_from_traceparent` gives the trace id for ``CallContext.trace_id``;
* :func:`parse_tracestate` keeps a valid ``tracestate`` (normalized) or drops it whole.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "TraceParent",
    "context_from_traceparent",
    "format_traceparent",
    "new_span_id",
    "new_trace_id",
    "parse_traceparent",
    "parse_tracestate",
    "valid_trace_id",
]

_VERSION_00_LENGTH: Final = 55  # "00-" + 32 + "-" + 16 + "-" + 2
_HEADER: Final = re.compile(
    r"(?P<version>[0-9a-f]{2})-(?P<trace_id>[0-9a-f]{32})-"
    r"(?P<parent_id>[0-9a-f]{16})-(?P<flags>[0-9a-f]{2})"
)
_TRACE_ID: Final = re.compile(r"[0-9a-f]{32}")
_SPAN_ID: Final = re.compile(r"[0-9a-f]{16}")
_OWS: Final = " \t"  # RFC 9110 optional whitespace around a field value
_SAMPLED: Final = 0x01


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceParent:
    """A parsed W3C ``traceparent``: lowercase hex ids and the flags byte."""

    version: str
    trace_id: str
    parent_id: str
    trace_flags: int

    @property
    def sampled(self) -> bool:
        """Whether the caller may have recorded its span (the ``sampled`` flag)."""
        return bool(self.trace_flags & _SAMPLED)

    @property
    def header(self) -> str:
        """The header to propagate: always version ``00`` (W3C: send your own version)."""
        return format_traceparent(self.trace_id, self.parent_id, trace_flags=self.trace_flags)


def parse_traceparent(header: str | None) -> TraceParent | None:
    """Parse a ``traceparent`` header; ``None`` if absent or invalid (start a new trace).

    Follows Trace Context level 1: lowercase hex only; version ``ff`` is invalid;
    version ``00`` is exactly 55 characters; a higher version is parsed by its first
    55 characters, and anything after them must begin with ``-``; an all-zero trace
    id or parent id is invalid. Optional whitespace around the value is ignored.
    """
    value = "" if header is None else header.strip(_OWS)
    found = _HEADER.match(value)  # the first 55 characters, whatever follows
    if found is None:
        return None
    version, trace_id, parent_id = found["version"], found["trace_id"], found["parent_id"]
    rest = value[_VERSION_00_LENGTH:]
    if (
        version == "ff"  # forbidden version
        or (rest and (version == "00" or not rest.startswith("-")))
        or trace_id == "0" * 32
        or parent_id == "0" * 16
    ):
        return None
    return TraceParent(
        version=version,
        trace_id=trace_id,
        parent_id=parent_id,
        trace_flags=int(found["flags"], 16),
    )


def format_traceparent(trace_id: str, parent_id: str, *, trace_flags: int = _SAMPLED) -> str:
    """A version-``00`` ``traceparent``; raise :class:`ValueError` on ids the spec forbids."""
    if not _TRACE_ID.fullmatch(trace_id) or trace_id == "0" * 32:
        msg = f"trace id must be 32 lowercase hex digits, not all zero: {trace_id!r}"
        raise ValueError(msg)
    if not _SPAN_ID.fullmatch(parent_id) or parent_id == "0" * 16:
        msg = f"parent id must be 16 lowercase hex digits, not all zero: {parent_id!r}"
        raise ValueError(msg)
    if not 0 <= trace_flags <= 0xFF:  # noqa: PLR2004 - one byte
        msg = f"trace flags must fit in one byte: {trace_flags!r}"
        raise ValueError(msg)
    return f"00-{trace_id}-{parent_id}-{trace_flags:02x}"


def context_from_traceparent(header: str | None) -> str | None:
    """The trace id for ``CallContext.trace_id``; ``None`` lets toolbound start a new trace."""
    parsed = parse_traceparent(header)
    return None if parsed is None else parsed.trace_id


def valid_trace_id(trace_id: str) -> bool:
    """Whether ``trace_id`` is 32 lowercase hex digits, not all zero."""
    return bool(_TRACE_ID.fullmatch(trace_id)) and trace_id != "0" * 32


def new_trace_id() -> str:
    """A random, valid (not all-zero) trace id."""
    while (trace_id := os.urandom(16).hex()) == "0" * 32:
        pass  # pragma: no cover - one chance in 2**128
    return trace_id


def new_span_id() -> str:
    """A random, valid (not all-zero) span id."""
    while (span_id := os.urandom(8).hex()) == "0" * 16:
        pass  # pragma: no cover - one chance in 2**64
    return span_id


# -- tracestate (section 3.3) ------------------------------------------------------------

_MAX_MEMBERS: Final = 32
_KEY: Final = re.compile(
    r"[a-z][a-z0-9_\-*/]{0,255}"  # simple-key
    r"|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13}"  # multi-tenant-key
)
_VALUE: Final = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")


def parse_tracestate(header: str | None) -> str | None:
    """The ``tracestate`` to pass on (members normalized, empty ones dropped), or ``None``.

    A header that breaks the grammar — a bad key or value, a repeated key, more than
    32 members — is dropped whole: Trace Context says a vendor that cannot parse it
    must not propagate it. So is an empty one.
    """
    if not header:
        return None
    members: list[str] = []
    keys: set[str] = set()
    for raw in header.split(","):
        member = raw.strip(_OWS)
        if not member:
            continue  # empty list members are allowed and dropped
        key, equals, value = member.partition("=")
        if not equals or not _KEY.fullmatch(key) or not _VALUE.fullmatch(value) or key in keys:
            return None
        keys.add(key)
        members.append(f"{key}={value}")
    if not members or len(members) > _MAX_MEMBERS:
        return None
    return ",".join(members)

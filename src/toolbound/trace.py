"""The append-only trace of one call (R14).

A :class:`Trace` answers, for one proposal: which ToolSpec the model saw, the raw
argument bytes, what parser, validator and normalizer produced, who authorized it
with which capability and whether a person confirmed, each execution attempt, the
commit status, and the exact bytes sent back to the model. Events are only ever
appended; :attr:`Trace.events` is a snapshot tuple.

Secrets never enter a trace: credentials are injected at execution only, and
results are redacted before they are recorded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from enum import Enum
from math import modf
from typing import TYPE_CHECKING, NamedTuple, Protocol

from toolbound._clock import SystemClock
from toolbound._jsontext import compact

if TYPE_CHECKING:
    from collections.abc import Iterable

    from toolbound._clock import Clock
    from toolbound._state import State

__all__ = ["Trace", "TraceEvent", "TraceSink", "encode_event", "utc_text"]


class TraceEvent(NamedTuple):
    """One thing that happened to a call. Immutable; ``data`` holds the detail.

    A named tuple rather than a dataclass: one is built for every step of every
    call, and a tuple is the cheapest immutable record Python has.
    """

    seq: int
    at: float
    kind: str
    state: State | None
    data: Mapping[str, object]

    @property
    def timestamp(self) -> datetime:
        """``at`` as a UTC datetime."""
        return datetime.fromtimestamp(self.at, UTC)

    def as_json(self) -> dict[str, object]:
        """The event as a JSON-friendly dict (bytes become text where UTF-8, else hex)."""
        state = self.state
        return {
            "seq": self.seq,
            "at": utc_text(self.at),
            "kind": self.kind,
            "state": None if state is None else state._value_,
            "data": {k: _jsonable(v) for k, v in self.data.items()},
        }


_new = tuple.__new__


class TraceSink(Protocol):
    """Receives every event as it is appended (a log, an OpenTelemetry bridge, a store)."""

    def emit(self, invocation_id: str, event: TraceEvent) -> None:
        """Take one event; must not raise for ordinary events."""
        ...


class Trace:
    """The events of one call, in order, never rewritten."""

    __slots__ = ("_events", "_now", "_sinks", "invocation_id", "trace_id")

    def __init__(
        self,
        *,
        invocation_id: str,
        trace_id: str,
        clock: Clock,
        sinks: tuple[TraceSink, ...] = (),
    ) -> None:
        self.invocation_id = invocation_id
        self.trace_id = trace_id
        # Bound once: one event per step of every call. The system clock's reading
        # is time.time itself, without the method in between.
        self._now = time.time if type(clock) is SystemClock else clock.time
        self._sinks = sinks
        self._events: list[TraceEvent] = []

    def record(self, kind: str, /, state: State | None = None, **data: object) -> TraceEvent:
        """Append one event and hand it to every sink."""
        return self.add(kind, state, data)

    def add(self, kind: str, state: State | None, data: dict[str, object]) -> TraceEvent:
        """:meth:`record` with the detail as one dict, which the trace keeps as it is."""
        events = self._events
        # tuple.__new__ directly: a named tuple's own constructor is a Python function.
        event: TraceEvent = _new(TraceEvent, (len(events), self._now(), kind, state, data))
        events.append(event)
        if self._sinks:
            for sink in self._sinks:
                sink.emit(self.invocation_id, event)
        return event

    @property
    def events(self) -> tuple[TraceEvent, ...]:
        """A snapshot of the events so far."""
        return tuple(self._events)

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(tuple(self._events))

    def __len__(self) -> int:
        return len(self._events)

    def of_kind(self, kind: str) -> list[TraceEvent]:
        """The events of one kind, in order."""
        return [e for e in self._events if e.kind == kind]

    def as_json(self) -> dict[str, object]:
        """The whole trace as a JSON-friendly dict."""
        return {
            "invocation_id": self.invocation_id,
            "trace_id": self.trace_id,
            "events": [e.as_json() for e in self._events],
        }


_PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def _jsonable(value: object) -> object:
    """Render trace detail for JSON: bytes stay exact (text if UTF-8, else hex)."""
    cls = type(value)
    # The common shapes first, by exact type: most detail is plain text and numbers,
    # plain dicts and tuples of them, and states.
    if cls in _PLAIN:
        return value
    if cls is dict:
        return {str(k): _jsonable(v) for k, v in value.items()}  # type: ignore[attr-defined]
    if cls is tuple or cls is list:
        return [_jsonable(v) for v in value]  # type: ignore[attr-defined]
    return _other(value)


def encode_event(event: TraceEvent) -> tuple[str, str]:
    """The event's time as ISO text, and ``event.as_json()`` as compact JSON text.

    The text is exactly ``json.dumps(event.as_json(), separators=(",", ":"),
    ensure_ascii=False)``, written in one pass where it can be: the detail goes to
    the JSON encoder as it is, and only what the encoder cannot write itself (bytes,
    states, sets, dates, values with ``as_json``) is rendered as :func:`_jsonable`
    renders it. Detail the encoder would write differently (a key that is not a
    ``str``, a subclass of a JSON type) takes the dict route of :meth:`as_json`.
    """
    at = utc_text(event.at)
    state = event.state
    data = event.data
    if type(data) is not dict or not _writes_as_is(data):
        data = {k: _jsonable(v) for k, v in data.items()}
    head = {"seq": event.seq, "at": at, "kind": event.kind}
    head["state"] = None if state is None else state._value_
    head["data"] = data
    return at, _compact(head)


def utc_text(at: float) -> str:
    """``datetime.fromtimestamp(at, UTC).isoformat()``, the same text in under half the time.

    A call's events fall in one or a few seconds: the text of the whole second is
    kept from the last event, and only the microseconds are written anew, rounded
    as ``fromtimestamp`` rounds them (half to even, a carry into the next second).
    """
    fraction, whole = modf(at)
    micro = round(fraction * 1e6)
    if micro >= _MICROS:
        micro -= _MICROS
        whole += 1.0
    elif micro < 0:
        micro += _MICROS
        whole -= 1.0
    second = int(whole)
    last = _last_second[0]
    if last[0] == second:
        prefix = last[1]
    else:
        prefix = datetime.fromtimestamp(second, UTC).isoformat()[:-6]
        # One tuple swapped whole: a thread reading it sees the old pair or the new one.
        _last_second[0] = (second, prefix)
    return "%s.%06d+00:00" % (prefix, micro) if micro else prefix + "+00:00"  # noqa: UP031 - faster


_MICROS = 1_000_000
_last_second: list[tuple[int, str]] = [(0, "1970-01-01T00:00:00")]
"""The last whole second written, and its text: a cache of one entry."""


def _writes_as_is(value: dict[object, object]) -> bool:
    """Whether the JSON encoder writes ``value`` as :func:`_jsonable`'s rendering of it."""
    for key in value:
        if type(key) is not str:
            return False
    return _all_write_as_is(value.values())


def _all_write_as_is(values: Iterable[object]) -> bool:
    for item in values:
        cls = type(item)
        if cls in _PLAIN:
            continue
        if cls is dict:
            if not _writes_as_is(item):  # type: ignore[arg-type]
                return False
        elif cls is tuple or cls is list:
            if not _all_write_as_is(item):  # type: ignore[arg-type]
                return False
        elif isinstance(item, _NATIVE):
            return False
    return True


_NATIVE = (str, int, float, dict, list, tuple)
"""What the encoder writes itself, subclasses too (a ``str`` enum as its text)."""


def _other(value: object) -> object:  # noqa: PLR0911 - one return per JSON shape
    if isinstance(value, bytes):
        try:
            return {"utf8": value.decode("utf-8")}
        except UnicodeDecodeError:
            return {"hex": value.hex()}
    if isinstance(value, Enum):  # states and other labels: their value
        return value._value_
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        items = sorted(value, key=str) if isinstance(value, frozenset | set) else value
        return [_jsonable(v) for v in items]
    if isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    as_json = getattr(value, "as_json", None)
    if callable(as_json):
        return as_json()
    return repr(value)


# What JSON has no type for goes to _other. Without cycle checks: trace detail is a
# tree, and _jsonable would not end on a cycle either.
_compact = compact(allow_nan=True, default=_other)


# -- attempt spans, for propagation ------------------------------------------------------
#
# A telemetry sink that opens a span for each attempt publishes its id here, so that a
# tool calling another service (HttpTool) can name that span as the ``traceparent``
# parent: the remote side's spans then nest under the attempt that made the request.
# With the id it may publish the headers its propagator writes for that span
# (``traceparent``, ``tracestate``, baggage), which the tool then sends as they are.
# Keyed by attempt id (random, unique); a plain dict is safe under the GIL.

_ATTEMPT_SPANS: dict[str, str] = {}
_ATTEMPT_CARRIERS: dict[str, dict[str, str]] = {}


def publish_attempt_span(
    attempt_id: str, span_id: str, carrier: Mapping[str, str] | None = None
) -> None:
    """Record the (16 hex digit) span id of the span for ``attempt_id``, and its headers."""
    _ATTEMPT_SPANS[attempt_id] = span_id
    if carrier:
        _ATTEMPT_CARRIERS[attempt_id] = dict(carrier)


def retract_attempt_span(attempt_id: str) -> None:
    """The attempt ended: forget its span."""
    _ATTEMPT_SPANS.pop(attempt_id, None)
    _ATTEMPT_CARRIERS.pop(attempt_id, None)


def attempt_span(attempt_id: str) -> str | None:
    """The span id a sink published for ``attempt_id``, if any."""
    return _ATTEMPT_SPANS.get(attempt_id)


def attempt_carrier(attempt_id: str) -> Mapping[str, str] | None:
    """The propagation headers a sink published for ``attempt_id``'s span, if any."""
    return _ATTEMPT_CARRIERS.get(attempt_id)

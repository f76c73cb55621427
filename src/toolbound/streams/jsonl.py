"""Bytes → JSON events, one object per line (R15).

Some recordings and proxies carry a provider's stream events without SSE framing,
one JSON object per line. :class:`JSONLinesDecoder` is the sans-IO decoder for that
form: lines end at LF (a CR before it is dropped), blank lines are skipped, and each
line must be one JSON object in strict UTF-8. Splitting at LF on *bytes* is safe
because LF never occurs inside a multi-byte UTF-8 sequence.

:func:`parse_event` is the one place an event payload becomes a mapping; the SSE
driver in :mod:`toolbound.streams.assemble` uses it for ``data`` too.
"""

from __future__ import annotations

import json
from json.scanner import make_scanner
from typing import TYPE_CHECKING, Final, NoReturn

from toolbound._errors import ConfigurationError
from toolbound.streams.sse import StreamError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["JSONLinesDecoder", "parse_event"]


def _reject_constant(name: str) -> NoReturn:
    msg = f"{name} is not JSON"
    raise ValueError(msg)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
# The scanner reads its settings off any JSONDecoder (typeshed names only its own
# class), as in toolbound.gates.parse.
_SCAN: Final[Callable[[str, int], tuple[object, int]]] = make_scanner(_DECODER)  # type: ignore[arg-type]
_JSON_SPACE: Final = " \t\n\r"  # RFC 8259's four; str.strip() would take more


def parse_event(payload: str | bytes) -> dict[str, object]:
    """Parse one event payload: strict UTF-8, one JSON object, no NaN or Infinity.

    Raises :class:`StreamError` with code ``invalid_utf8``, ``invalid_json`` or
    ``not_an_object``.
    """
    if isinstance(payload, bytes):
        try:
            # Decoded here, not by json.loads: that would also accept UTF-16/32.
            payload = payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            msg = f"an event is not valid UTF-8: {exc.reason}"
            raise StreamError(msg, code="invalid_utf8") from exc
    # Fast path for the usual payload, an object with nothing around it: the C
    # scanner directly, skipping JSONDecoder.decode's two regex passes. Anything
    # else, including every error, takes the full decoder for its message.
    if payload[:1] == "{":
        try:
            value, end = _SCAN(payload, 0)
        except (StopIteration, ValueError):
            pass
        else:
            if isinstance(value, dict) and (
                end == len(payload) or not payload[end:].strip(_JSON_SPACE)
            ):
                return value
    try:
        value = _DECODER.decode(payload)
    except ValueError as exc:  # JSONDecodeError is a ValueError, as is _reject_constant's
        msg = f"an event is not JSON: {exc}"
        raise StreamError(msg, code="invalid_json") from exc
    if not isinstance(value, dict):
        msg = f"an event is JSON but not an object: {type(value).__name__}"
        raise StreamError(msg, code="not_an_object")
    return value


class JSONLinesDecoder:
    """An incremental decoder for one-JSON-object-per-line event streams.

    :meth:`feed` returns the objects on the lines the chunk completes; :meth:`close`
    parses a last line that lacks its LF (common in files), so a truncated last line
    raises ``invalid_json`` rather than vanishing. A bad line raises
    :class:`StreamError`; objects on earlier lines of the same chunk are returned
    first and the error is raised by the next call.
    """

    __slots__ = ("_closed", "_error", "_pending")

    def __init__(self) -> None:
        self._pending: list[bytes] = []  # pieces of the unterminated line (linear joins)
        self._closed = False
        self._error: StreamError | None = None

    def feed(self, chunk: bytes) -> list[dict[str, object]]:
        """Take the next bytes; return the objects of every line they complete."""
        if self._closed:
            msg = "JSONLinesDecoder.feed() after close()"
            raise ConfigurationError(msg, code="stream_closed")
        if self._error is not None:
            raise self._error
        if b"\n" not in chunk:
            if chunk:
                self._pending.append(chunk)
            return []
        lines = chunk.split(b"\n")
        if self._pending:
            self._pending.append(lines[0])
            lines[0] = b"".join(self._pending)
        last = lines.pop()
        self._pending = [last] if last else []
        events: list[dict[str, object]] = []
        for line in lines:
            if line.strip():
                try:
                    events.append(parse_event(line))
                except StreamError as exc:
                    # As in SSEDecoder: objects before the bad line are returned
                    # first, so the result does not depend on the chunking.
                    self._error = exc
                    if not events:
                        raise
                    break
        return events

    def close(self) -> list[dict[str, object]]:
        """End the stream; return the object on a final line without LF, if any."""
        if self._error is not None:
            raise self._error
        if self._closed:
            return []
        self._closed = True
        last, self._pending = b"".join(self._pending), []
        return [parse_event(last)] if last.strip() else []

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
from toolbound.streams.limits import DEFAULT_STREAM_LIMITS
from toolbound.streams.sse import StreamError, stream_too_large

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

    A line may hold at most ``max_buffered_bytes`` bytes: a longer one fails the
    stream with ``stream_too_large`` once that many of its bytes have arrived, line
    end or not, so it is never held whole.
    """

    __slots__ = ("_closed", "_error", "_max", "_pending", "_pending_bytes")

    def __init__(self, *, max_buffered_bytes: int = DEFAULT_STREAM_LIMITS.max_stream_bytes) -> None:
        if max_buffered_bytes < 1:
            msg = f"max_buffered_bytes must be at least 1, got {max_buffered_bytes}"
            raise ConfigurationError(msg)
        self._max = max_buffered_bytes
        self._pending: list[bytes] = []  # pieces of the unterminated line (linear joins)
        self._pending_bytes = 0
        self._closed = False
        self._error: StreamError | None = None

    @property
    def pending_bytes(self) -> int:
        """The bytes of the line being read (of the line that failed, after an error)."""
        return self._pending_bytes

    def feed(self, chunk: bytes) -> list[dict[str, object]]:
        """Take the next bytes; return the objects of every line they complete."""
        events = [event for event, _ in self._feed(chunk) if event is not None]
        if not events and self._error is not None:
            raise self._error
        return events

    def feed_sized(self, chunk: bytes) -> list[tuple[dict[str, object] | None, int]]:
        """Like :meth:`feed`, with every line the chunk completes and its size in bytes.

        A blank line gives ``None`` for its object. For a consumer that holds the
        decoder and what it feeds to one budget (the assemblers' drivers).
        """
        lines = self._feed(chunk)
        if not lines and self._error is not None:
            raise self._error
        return lines

    def _feed(self, chunk: bytes) -> list[tuple[dict[str, object] | None, int]]:
        if self._closed:
            msg = "JSONLinesDecoder.feed() after close()"
            raise ConfigurationError(msg, code="stream_closed")
        if self._error is not None:
            raise self._error
        if b"\n" not in chunk:
            if chunk:
                self._pending.append(chunk)
                self._pending_bytes += len(chunk)
                if self._pending_bytes > self._max:
                    self._over()
            return []
        lines = chunk.split(b"\n")
        if self._pending:
            self._pending.append(lines[0])
            lines[0] = b"".join(self._pending)
        last = lines.pop()
        self._pending, self._pending_bytes = [], 0
        out = self._lines(lines)
        if last and self._error is None:
            self._pending, self._pending_bytes = [last], len(last)
            if len(last) > self._max:
                self._over()
        return out

    def _lines(self, lines: list[bytes]) -> list[tuple[dict[str, object] | None, int]]:
        out: list[tuple[dict[str, object] | None, int]] = []
        for line in lines:
            # R15: refused alike whether the line came whole or in pieces.
            if len(line) > self._max:
                self._pending_bytes = len(line)
                self._over()
                break
            if not line.strip():
                out.append((None, len(line)))
                continue
            try:
                out.append((parse_event(line), len(line)))
            except StreamError as exc:
                # As in SSEDecoder: objects before the bad line are returned
                # first, so the result does not depend on the chunking.
                self._error = exc
                self._pending_bytes = len(line)
                break
        return out

    def _over(self) -> None:
        """A line longer than the budget: fail, and let go of what was held."""
        self._error = stream_too_large(self._max)
        self._pending = []

    def close(self) -> list[dict[str, object]]:
        """End the stream; return the object on a final line without LF, if any."""
        if self._error is not None:
            raise self._error
        if self._closed:
            return []
        self._closed = True
        last, self._pending = b"".join(self._pending), []
        self._pending_bytes = 0
        return [parse_event(last)] if last.strip() else []

"""Bytes → Server-Sent Events, incrementally (R15).

:class:`SSEDecoder` is sans-IO, like h11: it owns no socket. Feed it whatever chunks
the network delivers and it returns the events those bytes complete. The same bytes
give the same events however they are split (R15), because every piece of state that
can straddle a chunk boundary is carried over explicitly:

* a UTF-8 character cut in half (an incremental *strict* decoder holds the bytes);
* a CR at the end of one chunk whose LF starts the next (one line end, not two);
* a line without its terminator (kept until the terminator arrives);
* an event without its blank line (kept until the blank line arrives).

What it keeps is bounded (:mod:`toolbound.streams.limits`): the ``data`` of the
event being read plus the line being read may not exceed ``max_buffered_bytes``. The
check runs on every line, whole or not, so a 20 MB line is refused after its first
``max_buffered_bytes`` bytes, never held whole, and a long line inside one chunk is
refused just as it would be fed byte by byte.

Parsing follows the WHATWG HTML "server-sent events" section exactly: LF, CR and CRLF
all end a line; one leading byte order mark is dropped; lines starting with ``:`` are
comments (heartbeats); ``data`` lines of one event are joined with LF; ``event`` sets
the type (default ``message``); ``id`` sets the last event ID unless it contains NUL;
``retry`` is honoured only when it is ASCII digits; one space after the colon is
dropped; unknown fields are ignored; a blank line dispatches the event unless no
``data`` line was seen; and at the end of the stream an event that never got its
blank line is discarded, never dispatched.

Invalid UTF-8 raises :class:`StreamError` (``invalid_utf8``) rather than being
replaced by U+FFFD: a replacement character inside tool arguments would silently
change what the model asked for.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias, TypeVar

from toolbound._errors import ConfigurationError, ToolboundError
from toolbound.streams.limits import DEFAULT_STREAM_LIMITS, utf8_size

__all__ = ["SSEDecoder", "SSEEvent", "StreamError", "StreamErrorCode", "stream_too_large"]

StreamErrorCode = Literal[
    "invalid_utf8",  # the bytes are not strict UTF-8 (or end inside a character)
    "invalid_json",  # an event's payload is not one strict JSON value
    "not_an_object",  # an event's payload is JSON but not an object
    "protocol",  # events that the provider's format does not allow in this order
    "arguments_mismatch",  # Responses: concatenated deltas differ from `.done` (R15)
    "call_id_conflict",  # two different calls claim one buffer (R15: never mixed)
    "unsupported",  # a shape this layer refuses rather than guesses at
    "too_large",  # one call's arguments exceed StreamLimits.max_call_bytes (R3)
    "stream_too_large",  # the stream holds more than StreamLimits.max_stream_bytes
    "several_responses",  # a second response follows the first in one stream
]


class StreamError(ToolboundError):
    """A byte stream or event stream that cannot be trusted (R15).

    ``code`` is one of :data:`StreamErrorCode`. Nothing assembled from a stream that
    raised this may execute: an assembler that sees it moves to its failed state and
    reports every unreleased call as incomplete.
    """

    code: str = "stream_error"
    recoverable = False

    def __init__(self, message: str, *, code: StreamErrorCode) -> None:
        super().__init__(message, code=code)


@dataclass(frozen=True, slots=True, kw_only=True)
class SSEEvent:
    """One dispatched server-sent event.

    ``event`` is the type (``"message"`` when the stream named none); ``data`` the
    ``data`` lines joined with LF; ``id`` the last event ID in force when the event
    was dispatched (WHATWG keeps it across events; ``None`` while it is empty);
    ``retry`` the reconnection time in milliseconds if this event's own lines set one.
    """

    event: str = "message"
    data: str
    id: str | None = None
    retry: int | None = None


def stream_too_large(limit: int) -> StreamError:
    """The one error for a stream over its byte budget, wherever it is detected.

    Decoder, driver and assembler all raise this same error, so the outcome does not
    depend on which of them noticed first (R15).
    """
    msg = f"the stream holds more than {limit} bytes (its max_stream_bytes)"
    return StreamError(msg, code="stream_too_large")


_BOM: Final = "\ufeff"
# One group of lines up to a blank line: an SSEEvent's fields (data None when the
# group dispatches nothing) and the most bytes held while reading it.
_Raw: TypeAlias = tuple[str, "str | None", "str | None", "int | None", int]
_T = TypeVar("_T")


class SSEDecoder:
    """An incremental, strict WHATWG server-sent events parser.

    Call :meth:`feed` with each chunk of bytes and :meth:`close` at the end of the
    stream. Both return the events completed so far, in order. ``retry`` and
    ``last_event_id`` expose the connection-level state WHATWG defines, which changes
    even when no event is dispatched.

    ``max_buffered_bytes`` bounds what the decoder holds for one event (see
    :attr:`pending_bytes`); beyond it the stream fails with ``stream_too_large``.
    """

    __slots__ = (
        "_bom_checked",
        "_closed",
        "_data",
        "_data_bytes",
        "_error",
        "_event_retry",
        "_event_type",
        "_last_id",
        "_line",
        "_line_bytes",
        "_max",
        "_peak",
        "_skip_lf",
        "_utf8",
        "retry",
    )

    def __init__(self, *, max_buffered_bytes: int = DEFAULT_STREAM_LIMITS.max_stream_bytes) -> None:
        if max_buffered_bytes < 1:
            msg = f"max_buffered_bytes must be at least 1, got {max_buffered_bytes}"
            raise ConfigurationError(msg)
        self._max = max_buffered_bytes
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._bom_checked = False
        self._skip_lf = False  # the previous text ended in CR: a leading LF belongs to it
        # Text after the last line end, waiting for its terminator, kept as pieces so
        # a long line fed in many small chunks costs linear, not quadratic, time.
        self._line: list[str] = []
        self._line_bytes = 0  # UTF-8 bytes in _line
        self._data: list[str] = []
        self._data_bytes = 0  # UTF-8 bytes in _data
        self._peak = 0  # the most held at once since the last blank line
        self._event_type = ""
        self._event_retry: int | None = None
        self._last_id = ""
        self._closed = False
        self._error: StreamError | None = None
        self.retry: int | None = None
        """The reconnection time (ms) the stream last set, if any."""

    @property
    def last_event_id(self) -> str | None:
        """The last event ID buffer, or ``None`` while it is empty."""
        return self._last_id or None

    @property
    def pending_bytes(self) -> int:
        """The most bytes held at once for the event being read, so far.

        What is held is the event's ``data`` lines plus the line being read (whole or
        not), in UTF-8 bytes; this is its peak since the last blank line. It depends
        only on the bytes read, never on how they were split, and is what
        ``max_buffered_bytes`` bounds.
        """
        return self._peak

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Take the next bytes of the stream; return the events they complete.

        Invalid UTF-8 raises :class:`StreamError`; if the chunk completed events
        before the bad bytes, those are returned first and the error is raised by
        the next call, so the events never depend on how the bytes were split. An
        event over ``max_buffered_bytes`` is refused the same way.
        """
        return _deliver(
            [
                SSEEvent(event=event, data=data, id=last_id, retry=retry)
                for event, data, last_id, retry, _ in self._feed(chunk)
                if data is not None
            ],
            self._error,
        )

    def feed_data(self, chunk: bytes) -> list[str]:
        """Like :meth:`feed`, returning only each event's ``data``.

        For consumers that read nothing else: it skips building an
        :class:`SSEEvent` per event, a measurable share of the cost.
        """
        return _deliver(
            [data for _, data, _, _, _ in self._feed(chunk) if data is not None], self._error
        )

    def feed_sized(self, chunk: bytes) -> list[tuple[str | None, int]]:
        """Like :meth:`feed_data`, for a consumer that keeps a budget across layers.

        Returns one pair per group of lines the chunk completes (the lines up to a
        blank line): the event's ``data``, or ``None`` for a group that dispatches
        no event (comments only, say), and the group's :attr:`pending_bytes` when it
        ended. The assemblers' drivers use it to hold the decoder and the assembler
        to one stream budget, whatever the chunking (R15).
        """
        return _deliver([(data, size) for _, data, _, _, size in self._feed(chunk)], self._error)

    def _feed(self, chunk: bytes) -> list[_Raw]:
        if self._closed:
            msg = "SSEDecoder.feed() after close()"
            raise ConfigurationError(msg, code="stream_closed")
        if self._error is not None:
            raise self._error
        try:
            text = self._utf8.decode(chunk)
        except UnicodeDecodeError as exc:
            return self._invalid(chunk, exc)
        return self._text(text)

    def _invalid(self, chunk: bytes, exc: UnicodeDecodeError) -> list[_Raw]:
        # R15: the events must not depend on the chunking, and fed one byte at a
        # time every event before the bad byte would be dispatched before the error.
        # So dispatch what the valid prefix completes now and raise on the next call
        # (the decoder is dead from here on); raise at once if there is nothing.
        error = _utf8_error(exc)
        error.__cause__ = exc
        held = self._utf8.getstate()[0]  # a failed decode leaves its buffer untouched
        events = self._text((held + chunk)[: exc.start].decode("utf-8"))
        if self._error is None:  # else the valid prefix was already over budget
            self._error = error
        return events

    def close(self) -> list[SSEEvent]:
        """End the stream. Returns no events: an unterminated event is discarded.

        Raises :class:`StreamError` (``invalid_utf8``) if the stream ended inside a
        UTF-8 character.
        """
        if self._error is not None:
            raise self._error
        if self._closed:
            return []
        self._closed = True
        try:
            self._utf8.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise _utf8_error(exc) from exc
        # WHATWG: "If the file ends in the middle of an event, before the final
        # empty line, the incomplete event is not dispatched." R15 relies on this:
        # a cut-off stream must not yield a last, possibly partial, event.
        self._drop()
        return []

    def _drop(self) -> None:
        self._line, self._data = [], []
        self._line_bytes = self._data_bytes = 0

    def _over(self) -> None:
        """Held more than the budget: fail, and let go of what was held."""
        self._error = stream_too_large(self._max)
        self._drop()

    def _text(self, text: str) -> list[_Raw]:
        if not self._bom_checked or self._skip_lf:
            text = self._leading(text)
        if not text:
            return []
        if "\r" in text:
            # A trailing CR is a complete line end by itself; remember it so an LF
            # arriving at the start of the next chunk is not taken as a second one.
            if text[-1] == "\r":
                self._skip_lf = True
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            self._line.append(text)
            self._line_bytes += utf8_size(text)
            self._hold(self._data_bytes + self._line_bytes)
            return []
        lines = text.split("\n")
        if self._line:
            self._line.append(lines[0])
            lines[0] = "".join(self._line)
        last = lines.pop()
        self._line, self._line_bytes = [], 0
        events = self._lines(lines)
        if last and self._error is None:
            self._line, self._line_bytes = [last], utf8_size(last)
            self._hold(self._data_bytes + self._line_bytes)
        return events

    def _hold(self, held: int) -> None:
        if held > self._peak:
            self._peak = held
            if held > self._max:
                self._over()

    def _leading(self, text: str) -> str:
        """Drop what the state before this text says its first character is."""
        if not text:
            return text  # a chunk that ended inside a character decodes to nothing
        if not self._bom_checked:
            self._bom_checked = True
            if text[0] == _BOM:  # WHATWG decodes with "UTF-8 decode": one BOM, once
                text = text[1:]
                if not text:
                    return text
        if self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        return text

    def _lines(self, lines: list[str]) -> list[_Raw]:  # noqa: C901, PLR0912 - one WHATWG step per branch
        events: list[_Raw] = []
        data = self._data
        # The budget's counters live in locals here: this loop runs once per line.
        data_bytes, peak, limit = self._data_bytes, self._peak, self._max
        for line in lines:
            if not line:
                if data:
                    events.append(
                        (
                            self._event_type or "message",
                            "\n".join(data),
                            self._last_id or None,
                            self._event_retry,
                            peak,
                        )
                    )
                    data = self._data = []
                elif peak:
                    events.append(("", None, None, None, peak))  # held, dispatched nothing
                data_bytes = peak = 0
                self._event_type = ""
                self._event_retry = None
                continue
            # Budget: the event's data so far plus this line is held at this moment,
            # whether the line came whole or in pieces (R15: the same either way).
            held = data_bytes + (len(line) if line.isascii() else utf8_size(line))
            if held > peak:
                peak = held
                if held > limit:
                    self._peak = peak
                    self._over()
                    return events
            # The common lines first: these two prefixes cover almost every line.
            if line.startswith("data: "):
                data.append(line[6:])
                data_bytes = held - 6
                continue
            if line[0] == ":":  # a comment: heartbeats carry nothing (R15)
                continue
            name, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            if name == "data":
                data.append(value)
                data_bytes += utf8_size(value)
            elif name == "event":
                self._event_type = value
            elif name == "id":
                if "\x00" not in value:
                    self._last_id = value
            elif name == "retry" and value.isascii() and value.isdigit():
                self.retry = self._event_retry = int(value)
            # any other field name is ignored, as WHATWG says
        self._data_bytes, self._peak = data_bytes, peak
        return events


def _deliver(out: list[_T], error: StreamError | None) -> list[_T]:
    """Return ``out``; with nothing to return, raise the error the feed just met."""
    if not out and error is not None:
        raise error
    return out


def _utf8_error(exc: UnicodeDecodeError) -> StreamError:
    return StreamError(f"the stream is not valid UTF-8: {exc.reason}", code="invalid_utf8")

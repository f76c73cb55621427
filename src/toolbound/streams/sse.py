"""Bytes → Server-Sent Events, incrementally (R15).

:class:`SSEDecoder` is sans-IO, like h11: it owns no socket. Feed it whatever chunks
the network delivers and it returns the events those bytes complete. The same bytes
give the same events however they are split (R15), because every piece of state that
can straddle a chunk boundary is carried over explicitly:

* a UTF-8 character cut in half (an incremental *strict* decoder holds the bytes);
* a CR at the end of one chunk whose LF starts the next (one line end, not two);
* a line without its terminator (kept until the terminator arrives);
* an event without its blank line (kept until the blank line arrives).

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
from typing import Final, Literal, TypeAlias

from toolbound._errors import ConfigurationError, ToolboundError

__all__ = ["SSEDecoder", "SSEEvent", "StreamError", "StreamErrorCode"]

StreamErrorCode = Literal[
    "invalid_utf8",  # the bytes are not strict UTF-8 (or end inside a character)
    "invalid_json",  # an event's payload is not one strict JSON value
    "not_an_object",  # an event's payload is JSON but not an object
    "protocol",  # events that the provider's format does not allow in this order
    "arguments_mismatch",  # Responses: concatenated deltas differ from `.done` (R15)
    "call_id_conflict",  # two different calls claim one buffer (R15: never mixed)
    "unsupported",  # a shape this layer refuses rather than guesses at
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


_BOM: Final = "\ufeff"
_Raw: TypeAlias = tuple[str, str, "str | None", "int | None"]  # an SSEEvent's fields


class SSEDecoder:
    """An incremental, strict WHATWG server-sent events parser.

    Call :meth:`feed` with each chunk of bytes and :meth:`close` at the end of the
    stream. Both return the events completed so far, in order. ``retry`` and
    ``last_event_id`` expose the connection-level state WHATWG defines, which changes
    even when no event is dispatched.
    """

    __slots__ = (
        "_bom_checked",
        "_closed",
        "_data",
        "_error",
        "_event_retry",
        "_event_type",
        "_last_id",
        "_line",
        "_skip_lf",
        "_utf8",
        "retry",
    )

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._bom_checked = False
        self._skip_lf = False  # the previous text ended in CR: a leading LF belongs to it
        # Text after the last line end, waiting for its terminator, kept as pieces so
        # a long line fed in many small chunks costs linear, not quadratic, time.
        self._line: list[str] = []
        self._data: list[str] = []
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

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Take the next bytes of the stream; return the events they complete.

        Invalid UTF-8 raises :class:`StreamError`; if the chunk completed events
        before the bad bytes, those are returned first and the error is raised by
        the next call, so the events never depend on how the bytes were split.
        """
        return [
            SSEEvent(event=event, data=data, id=last_id, retry=retry)
            for event, data, last_id, retry in self._feed(chunk)
        ]

    def feed_data(self, chunk: bytes) -> list[str]:
        """Like :meth:`feed`, returning only each event's ``data``.

        For consumers that read nothing else (the assemblers' driver): it skips
        building an :class:`SSEEvent` per event, a measurable share of the cost.
        """
        return [data for _, data, _, _ in self._feed(chunk)]

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
        self._error = error
        held = self._utf8.getstate()[0]  # a failed decode leaves its buffer untouched
        events = self._text((held + chunk)[: exc.start].decode("utf-8"))
        if not events:
            raise error
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
        self._line = []
        self._data = []
        return []

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
            return []
        lines = text.split("\n")
        if self._line:
            self._line.append(lines[0])
            lines[0] = "".join(self._line)
        last = lines.pop()
        self._line = [last] if last else []
        return self._lines(lines)

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

    def _lines(self, lines: list[str]) -> list[_Raw]:  # noqa: C901 - one WHATWG step per branch
        events: list[_Raw] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append(
                        (
                            self._event_type or "message",
                            "\n".join(data),
                            self._last_id or None,
                            self._event_retry,
                        )
                    )
                    data = self._data = []
                self._event_type = ""
                self._event_retry = None
                continue
            # The common lines first: these two prefixes cover almost every line.
            if line.startswith("data: "):
                data.append(line[6:])
                continue
            if line[0] == ":":  # a comment: heartbeats carry nothing (R15)
                continue
            name, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                self._event_type = value
            elif name == "id":
                if "\x00" not in value:
                    self._last_id = value
            elif name == "retry" and value.isascii() and value.isdigit():
                self.retry = self._event_retry = int(value)
            # any other field name is ignored, as WHATWG says
        return events


def _utf8_error(exc: UnicodeDecodeError) -> StreamError:
    return StreamError(f"the stream is not valid UTF-8: {exc.reason}", code="invalid_utf8")

"""How many bytes stream assembly may hold: one budget per call, one per stream (R15, R3).

A model can stream arguments without end, and a server can send a line without a
line end. Assembly therefore counts what it holds *while reading* and refuses as soon
as a budget is exceeded, so it never holds more than the budget plus the chunk being
read:

* ``max_call_bytes`` bounds the UTF-8 bytes of one call's arguments (or one other
  item's input). Over it, the call is refused: ``StreamError`` code ``too_large``, the
  code the parse gate gives arguments over *its* limit (R3), and the call is reported
  as an :class:`~toolbound.streams.IncompleteCall` with reason
  ``arguments_too_large``. The default is the parse gate's default ``max_bytes``:
  a call the gate would refuse anyway is never assembled.
* ``max_stream_bytes`` bounds everything held for one stream at once: every call's
  arguments, other items' input, the assistant text, and what the decoder holds for
  the event it is reading (its ``data`` lines and its longest line so far, including
  a line that has no line end yet). Over it, the stream fails with ``StreamError``
  code ``stream_too_large``.

Both are counted the same way however the bytes are split into chunks, so the
outcome still does not depend on the chunking (R15).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from toolbound._errors import ConfigurationError
from toolbound.gates.parse import DEFAULT_LIMITS

__all__ = ["DEFAULT_STREAM_LIMITS", "StreamLimits"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamLimits:
    """Byte budgets for assembling one stream (see the module docstring).

    ``max_call_bytes`` defaults to the parse gate's ``max_bytes`` (1 MiB);
    ``max_stream_bytes`` to four times that.
    """

    max_call_bytes: int = DEFAULT_LIMITS.max_bytes
    max_stream_bytes: int = 4 * DEFAULT_LIMITS.max_bytes

    def __post_init__(self) -> None:
        # R3: "{}" is the smallest call; a stream must be able to hold one whole call.
        if self.max_call_bytes < 2:  # noqa: PLR2004 - len(b"{}")
            msg = f"StreamLimits.max_call_bytes must be at least 2, got {self.max_call_bytes}"
            raise ConfigurationError(msg)
        if self.max_stream_bytes < self.max_call_bytes:
            msg = (
                f"StreamLimits.max_stream_bytes ({self.max_stream_bytes}) must be at least "
                f"max_call_bytes ({self.max_call_bytes})"
            )
            raise ConfigurationError(msg)


DEFAULT_STREAM_LIMITS: Final = StreamLimits()
"""The budgets assemblers and decoders use when none are given: 1 MiB per call, 4 MiB
per stream."""


def utf8_size(text: str) -> int:
    """The length of ``text`` in UTF-8 bytes (a lone surrogate counts its 3 bytes)."""
    # isascii() is O(1) on CPython's str: the common case costs no encoding.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))

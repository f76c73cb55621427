"""Log lines on standard error, as ``[logging]`` says: a level, and text or JSON lines.

toolbound logs through :mod:`logging` under the ``toolbound`` logger; the HTTP access
log is ``toolbound.access`` (:mod:`toolbound.access_log`), one line per request.
:func:`configure` is what ``toolbound serve``, ``mcp-serve`` and ``mcp-gateway`` call:
one handler on the root logger, so uvicorn's own messages come out in the same format.
Other libraries are held at ``warning``: their debug lines may carry URLs and headers.

A record's named fields (``extra={"fields": {...}}``) become keys of the JSON object,
or ``key=value`` pairs after the text message. What is logged is chosen field by field —
ids, names, route templates, status codes, durations — and never a request's headers,
query string or body, so no key, secret or argument value reaches a log.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TextIO

__all__ = ["LEVELS", "JsonLines", "Level", "TextLines", "configure", "fields_of"]

Level = Literal["debug", "info", "warning", "error"]
LEVELS: tuple[Level, ...] = ("debug", "info", "warning", "error")
"""The levels ``[logging] level`` and ``--log-level`` accept, most verbose first."""

_OURS = ("toolbound", "uvicorn", "uvicorn.error")
_HANDLER = "toolbound-logs"


def fields_of(record: logging.LogRecord) -> Mapping[str, object]:
    """The named fields a record was logged with (``extra={"fields": {...}}``)."""
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, dict) else {}


def _utc(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class JsonLines(logging.Formatter):
    """One JSON object a line: time, level, logger, message, then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one JSON object, on one line."""
        line: dict[str, object] = {
            "time": _utc(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(fields_of(record))
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextLines(logging.Formatter):
    """``time LEVEL logger message key=value ...`` for a person at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of text (and its traceback after it, if any)."""
        pairs = " ".join(f"{k}={_text(v)}" for k, v in fields_of(record).items())
        head = f"{_utc(record)} {record.levelname:<7} {record.name} {record.getMessage()}"
        text = f"{head} {pairs}" if pairs else head
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def _text(value: object) -> str:
    text = "-" if value is None else str(value)
    return json.dumps(text) if (" " in text or not text) else text


def configure(
    level: Level = "info", form: Literal["text", "json"] = "text", *, stream: TextIO | None = None
) -> logging.Handler:
    """Write toolbound's and uvicorn's messages at ``level`` and above to ``stream``.

    ``stream`` is standard error unless given. Called again, it replaces its handler
    rather than adding a second one. Returns the handler.
    """
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER]:
        root.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER)
    handler.setFormatter(JsonLines() if form == "json" else TextLines())
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    for name in _OURS:
        logging.getLogger(name).setLevel(level.upper())
    return handler

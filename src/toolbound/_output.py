"""How the commands write: for a person at a terminal, or for a script reading a pipe.

On a terminal, rich lays tables out to the terminal's width. Anywhere else (a pipe, a
file, a CI log) nothing is wrapped or cut: a digest a person copies, or a line a script
compares, stays whole on its line. ``--json`` prints one JSON document instead, whose
shape each command documents (docs/cli.md).

This module needs the ``cli`` extra (rich); the commands import it when they run.
"""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit, urlunsplit

from rich.console import Console

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import IO, TextIO

__all__ = ["command_console", "emit_json", "heading", "public_url"]

# Wide enough for any line a command prints, so rich never wraps one when the reader
# is a program; tables still take only the width their cells need.
_UNBOUNDED = 1_000_000
_PADDING = re.compile(r" +\n")


def command_console(*, stderr: bool = False) -> Console:
    """A console for one command: the terminal's width there, no wrapping anywhere else."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, highlight=False)
    trimmed = cast("IO[str]", _Trimmed(stream))  # rich writes and flushes, nothing more
    return Console(file=trimmed, highlight=False, soft_wrap=True, width=_UNBOUNDED)


class _Trimmed:
    """A text stream that drops the spaces rich pads a table's last column with."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(_PADDING.sub("\n", text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False


def heading(out: Console, text: str) -> None:
    """A section title: a rule across a terminal, a plain line anywhere else."""
    if out.is_terminal:
        out.rule(text)
    else:
        out.print(text)


def emit_json(document: Mapping[str, object]) -> None:
    """``document`` as one JSON text on stdout, with a newline; times as ISO 8601 text."""
    sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2, default=_text) + "\n")


def public_url(url: str) -> str:
    """A store URL fit to print or log: its password, if any, replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    where = parts.netloc.rpartition("@")[2]  # host and port, as written
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{where}"))


def _text(value: object) -> str:
    """What JSON has no type for (a datetime, above all) as its text."""
    iso = getattr(value, "isoformat", None)
    return str(iso()) if callable(iso) else str(value)

r"""Reviewing a quarantined tool: what a person compares before approving it.

A quarantined tool has two definitions — the one a person approved (none for a new
tool) and the one its upstream lists now — both kept in the approvals file
(:mod:`toolbound.approvals`). :func:`definition_diff` turns them into a unified diff
a person can read: the description as its lines of text, the schemas and annotations
as indented JSON with sorted keys, so a diff shows what changed and nothing else.

Everything here is text written by an upstream, which may try to hide what it
changed: control, format and other invisible characters (bidi overrides, zero-width
spaces, escape sequences) are shown as ``\uXXXX`` escapes, never passed through.
``toolbound mcp-gateway review`` and the service's console (``/console/tools``)
render the same lines, the CLI through rich as plain text, never as markup.
"""

from __future__ import annotations

import difflib
import json
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Mapping

    from toolbound.approvals import Approval, Quarantined

__all__ = ["DiffLine", "Review", "definition_diff", "review"]

# The fields of a definition, in the order a person reads them. The first four make
# the digest (toolbound.mcp.upstream.definition_of); title and annotations are kept
# for the person only: the gateway never passes them on (annotations come from the
# configured effect class).
_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
_TEXT_FIELDS = frozenset({"name", "title", "description"})
_HIDDEN = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})

LineKind = Literal["header", "hunk", "added", "removed", "context"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DiffLine:
    """One line of a unified diff, with what kind of line it is (for colour)."""

    kind: LineKind
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Review:
    """One quarantined tool as a person reviews it: both definitions and their diff."""

    held: Quarantined
    approved: Approval | None
    diff: tuple[DiffLine, ...]

    @property
    def name(self) -> str:
        """The name the tool is served under once approved."""
        return self.held.name


def review(
    quarantined: Mapping[str, Quarantined], approvals: Mapping[str, Approval]
) -> list[Review]:
    """Every quarantined tool, by name, with its approved definition and the diff."""
    return [
        Review(
            held=q,
            approved=approvals.get(name),
            diff=definition_diff(
                None if name not in approvals else approvals[name].definition,
                q.definition,
                name=name,
            ),
        )
        for name, q in sorted(quarantined.items())
    ]


def definition_diff(
    approved: Mapping[str, object] | None, current: Mapping[str, object], *, name: str
) -> tuple[DiffLine, ...]:
    """A unified diff from the approved definition (``None``: none yet) to the current one."""
    old = _lines(approved) if approved is not None else []
    new = _lines(current)
    label = _visible(name)
    lines = difflib.unified_diff(
        old,
        new,
        fromfile=f"{label} (approved)" if approved is not None else "(never approved)",
        tofile=f"{label} (upstream now)",
        n=3,
        lineterm="",
    )
    return tuple(_classified(line) for line in lines)


def _classified(line: str) -> DiffLine:
    if line.startswith(("---", "+++")):
        return DiffLine(kind="header", text=line)
    if line.startswith("@@"):
        return DiffLine(kind="hunk", text=line)
    if line.startswith("+"):
        return DiffLine(kind="added", text=line)
    if line.startswith("-"):
        return DiffLine(kind="removed", text=line)
    return DiffLine(kind="context", text=line)


def _lines(definition: Mapping[str, object]) -> list[str]:
    """A definition as lines: one block per field, known fields first."""
    out: list[str] = []
    extra = sorted(k for k in definition if k not in _FIELDS)
    for key in (*_FIELDS, *extra):
        if key not in definition or definition[key] is None:
            continue
        value = definition[key]
        out.append(f"{_visible(key)}:")
        if key in _TEXT_FIELDS and isinstance(value, str):
            body = value.splitlines() or [""]
        else:
            text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
            body = text.splitlines()
        out.extend(f"  {_visible(line)}" for line in body)
    return out


def _visible(text: str) -> str:
    r"""``text`` with every invisible or direction-changing character as a ``\uXXXX`` escape."""
    if text.isprintable():
        return text
    return "".join(
        json.dumps(ch)[1:-1] if unicodedata.category(ch) in _HIDDEN else ch for ch in text
    )

"""Where a value came from, and what an argument value was found to carry.

A :class:`Label` says where one value came from: the user's own words, the runtime's
configuration, or one tool result. A :class:`Source` is one place a piece of a value
was found, a :class:`Match` the piece with every place it was found, and a
:class:`Finding` what that means for a rule, with the matches as evidence. A person
asked to confirm a call reads the findings (:class:`~toolbound.ConfirmationRequest`,
the human projection); :mod:`toolbound.provenance` computes them and exports these
names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from toolbound._labels import DataClassName
    from toolbound._model import ToolSpec

__all__ = ["Concern", "Finding", "Label", "Match", "Origin", "Source", "field_shape"]

Origin = Literal["user", "runtime", "tool"]
"""``user``: the person's own input; ``runtime``: configuration and system text the
deployment supplied; ``tool``: one tool result."""

Concern = Literal[
    "untrusted_source",
    "private_data",
    "no_trusted_source",
    "not_tracked",
    "unanchored",
    "out_of_scope",
]
"""Why a value (or a call) matters to a rule:

* ``untrusted_source`` — found only in results of tools that read untrusted content;
* ``private_data`` — carries a piece found only in results holding private data;
* ``no_trusted_source`` — found in no trusted source (rules that require one);
* ``not_tracked`` — the call carried no provenance at all, so nothing can be shown;
* ``unanchored`` — a write that normally names a destination names none, and no
  other value of it came from a trusted source;
* ``out_of_scope`` — a write outside the tools the task declared it may need, or,
  with no scope declared, one whose intents the user's words did not express.
"""

_SHOWN = 64  # characters of a value shown in evidence
_LISTED = 3  # sources named in one sentence of evidence


def field_shape(pointer: str) -> str:
    """A JSON Pointer with its array indexes left out: ``/0/id`` → ``/id``."""
    return "".join("/" + part for part in pointer.split("/")[1:] if not part.isdigit())


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class Label:
    """Where one indexed value came from.

    ``untrusted`` marks results of tools that read content a third party wrote
    (R11: tool output is data, never instructions); ``private`` marks the user's
    private data. The user's words and the runtime's configuration are neither.
    """

    origin: Origin
    tool: str | None = None
    version: str | None = None
    invocation_id: str | None = None
    untrusted: bool = False
    private: bool = False
    note: str | None = None

    @classmethod
    def user(cls, note: str | None = None) -> Label:
        """The person's own input: trusted, and theirs to send anywhere."""
        return cls(origin="user", note=note)

    @classmethod
    def runtime(cls, note: str | None = None) -> Label:
        """Configuration or system text the deployment supplied: trusted."""
        return cls(origin="runtime", note=note)

    @classmethod
    def of_result(cls, spec: ToolSpec, invocation_id: str | None) -> Label:
        """The label of one result of ``spec``, as the spec declares the tool."""
        return cls(
            origin="tool",
            tool=spec.name,
            version=spec.version,
            invocation_id=invocation_id,
            untrusted=spec.reads_untrusted,
            private=spec.reads_private,
        )

    @property
    def ref(self) -> str:
        """``name@version`` for a tool result; the origin otherwise."""
        if self.origin != "tool":
            return self.origin if self.note is None else f"{self.origin} ({self.note})"
        if self.tool is None:
            return "an unnamed tool"
        return self.tool if self.version is None else f"{self.tool}@{self.version}"

    def trusted(self, trust: frozenset[str] = frozenset()) -> bool:
        """Whether a value from here may steer a call; ``trust`` names tools a rule trusts."""
        if not self.untrusted:
            return True
        return self.tool is not None and (self.tool in trust or self.ref in trust)

    def as_json(self) -> dict[str, object]:
        """The label as a JSON object."""
        out: dict[str, object] = {"origin": self.origin}
        if self.origin == "tool":
            out |= {
                "tool": self.tool,
                "version": self.version,
                "invocation_id": self.invocation_id,
                "untrusted": self.untrusted,
                "private": self.private,
            }
        if self.note is not None:
            out["note"] = self.note
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """One place a piece of a value was found: a label and a JSON Pointer into it."""

    label: Label
    at: str
    """The string leaf it was found in, as a JSON Pointer into the indexed value."""
    data_class: DataClassName | None = None
    """The kind of private data it is there (:mod:`~toolbound.provenance.classes`)."""
    leaf: bool = False
    """The value was that whole leaf (a field equal to it), not a word inside it."""

    def trusted(self, trust: frozenset[str] = frozenset()) -> bool:
        """Whether a value from here may steer a call; ``trust`` names tools or fields.

        A field (``"drive.search#/id"``, a pointer with array indexes left out)
        vouches only for a value that was that whole field: a word inside a text of
        the same field, injected text, never gains trust that way.
        """
        if self.label.trusted(trust):
            return True
        tool = self.label.tool
        if not self.leaf or tool is None or not trust:
            return False
        field = "#" + field_shape(self.at)
        return tool + field in trust or self.label.ref + field in trust

    def as_json(self) -> dict[str, object]:
        """The source as a JSON object."""
        out = {**self.label.as_json(), "at": self.at}
        if self.data_class is not None:
            out["data_class"] = self.data_class
        return out

    def describe(self) -> str:
        """One phrase for people: ``email.list@v1 (call 3f2a…, at /2/body)``."""
        where = []
        if self.label.invocation_id:
            where.append(f"call {self.label.invocation_id[:8]}")
        if self.at:
            where.append(f"at {self.at}")
        return self.label.ref + (f" ({', '.join(where)})" if where else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class Match:
    """A piece of an argument value found in indexed data, and everywhere it was found.

    ``whole`` is set when the piece is the whole value (in one of its normal
    forms); otherwise it is a token found inside the value. ``exact`` marks a
    value too short to be searched for, found equal to a whole trusted leaf or
    word. ``quantity`` marks an exact match with a number the user wrote as part
    of a date, a time, an amount or a count ("June 13", "13 EUR"): it vouches for
    a quantity, never for an identifier. ``sources`` holds one source per label
    kind (the user, the runtime, each tool), first found first.
    """

    text: str
    whole: bool
    sources: tuple[Source, ...]
    exact: bool = False
    quantity: bool = False

    def as_json(self) -> dict[str, object]:
        """The match as a JSON object."""
        out: dict[str, object] = {
            "text": _short(self.text),
            "whole": self.whole,
            "sources": [s.as_json() for s in self.sources],
        }
        if self.exact:
            out["exact"] = True
        if self.quantity:
            out["quantity"] = True
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """What one argument value was found to carry, with the evidence.

    ``rule`` names the flow rule that raised it (``None`` for the findings a
    report records by itself, before any rule is applied).
    """

    concern: Concern
    pointer: str
    value: str
    matches: tuple[Match, ...] = ()
    rule: str | None = None

    def describe(self) -> str:  # noqa: PLR0911 - one sentence per concern
        """One sentence for the person asked to confirm."""
        shown = f"{self.pointer or '/'} {_short(self.value)!r}"
        sources = sorted({s.describe() for m in self.matches for s in m.sources})
        found = ", ".join(sources[:_LISTED])
        if len(sources) > _LISTED:
            found += f" and {len(sources) - _LISTED} more"
        match self.concern:
            case "untrusted_source":
                return f"{shown} came only from untrusted tool data: {found}"
            case "private_data":
                pieces = ", ".join(repr(_short(m.text)) for m in self.matches[:3])
                return f"{shown} carries private data ({pieces}) from {found}"
            case "no_trusted_source":
                return (
                    f"{shown} has no trusted source: the user did not give it and no "
                    "trusted tool returned it"
                )
            case "not_tracked":
                return f"{self.pointer or '/'}: no provenance was tracked for this call"
            case "unanchored":
                return (
                    f"{self.pointer or '/'} names no one, and no value of this write came "
                    "from the user or a trusted tool"
                )
            case "out_of_scope" if self.rule and self.rule.startswith("intents"):
                return f"{self.value}: the user's words ask for none of its {self.rule}"
            case "out_of_scope":
                return f"{self.value} is not among the writes this task declared it may need"

    def as_json(self) -> dict[str, object]:
        """The finding as a JSON object (the trace and the human projection show this)."""
        out: dict[str, object] = {
            "concern": self.concern,
            "pointer": self.pointer,
            "value": _short(self.value),
            "matches": [m.as_json() for m in self.matches],
            "description": self.describe(),
        }
        if self.rule is not None:
            out["rule"] = self.rule
        return out

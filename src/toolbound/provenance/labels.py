"""Where values came from, and what a proposal's values were found to carry.

Every value that enters a session carries a :class:`Label`: the user's own words,
the runtime's configuration, or one tool result (tool, version, invocation id, and
whether that tool reads untrusted content or private data). When a proposal's
argument values are looked up in the session's index
(:class:`~toolbound.provenance.Provenance`), each string leaf gets a :class:`Trail`:
the pieces of it that were found (:class:`Match`) and every place each piece was
found (:class:`Source`). A :class:`FlowReport` holds the trails of one call, and
:class:`Finding` is what a trail means for a rule: a value whose only sources are
untrusted, private data on its way out, or a value with no trusted source at all.

All of these are frozen values: a report is computed once per call, recorded in
its trace, and handed to the policy on :class:`~toolbound.AuthzRequest`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from toolbound._findings import Concern, Finding, Label, Match, Origin, Source

if TYPE_CHECKING:
    from toolbound._labels import DataClassName

__all__ = [
    "Concern",
    "Finding",
    "FlowReport",
    "Label",
    "Match",
    "Origin",
    "Source",
    "Trail",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Trail:
    """The provenance of one string (or integer) leaf of a call's arguments."""

    pointer: str
    value: str
    matches: tuple[Match, ...] = ()
    number: bool = False
    """The leaf is a JSON number (a quantity by its type), not a string."""

    def trusted(self, trust: frozenset[str] = frozenset(), *, role: str | None = None) -> bool:
        """Whether the whole value was found in a trusted source, in the same role.

        A short number the user wrote in a date, a time or an amount vouches only
        for a quantity (``role="quantity"``, or a JSON number when no role is
        known, or a text shaped like one: ``"10:00"``), never for an id: ``"13"``
        is not the file of "June 13" (R6).
        """
        for m in self.matches:
            if not m.whole or not any(s.trusted(trust) for s in m.sources):
                continue
            if not m.quantity or role == "quantity" or (role is None and self.quantity_shaped):
                return True
        return False

    @property
    def quantity_shaped(self) -> bool:
        """A JSON number, or a text of digits and separators (``10:00``, ``2026-07-20``)."""
        text = self.value.strip()
        return self.number or (
            any(c.isdigit() for c in text)
            and not any(c.isalpha() for c in text)
            and not text.isdigit()
        )

    def untrusted(
        self, trust: frozenset[str] = frozenset(), *, role: str | None = None
    ) -> tuple[Match, ...]:
        """The pieces whose only sources are untrusted; none if the whole value is trusted."""
        if self.trusted(trust, role=role):
            return ()
        return tuple(m for m in self.matches if not any(s.trusted(trust) for s in m.sources))

    def private(self) -> tuple[Match, ...]:
        """The pieces found only in private data (nowhere public, nowhere the user said)."""
        return tuple(m for m in self.matches if all(s.label.private for s in m.sources))

    def named(self) -> bool:
        """Whether the whole value came from the user's words or the runtime's configuration."""
        return any(
            m.whole and any(s.label.origin != "tool" for s in m.sources) for m in self.matches
        )


def _below(pointer: str, prefix: str) -> bool:
    """Whether ``pointer`` is ``prefix`` or inside it (whole reference tokens only)."""
    return pointer == prefix or pointer.startswith(prefix + "/") or prefix == ""


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowReport:
    """The trails of one call's arguments: what the runtime hands a flow policy."""

    trails: tuple[Trail, ...]
    findings: tuple[Finding, ...] = field(default=())
    """What the trails show before any rule: values only from untrusted tool data,
    and private data, as the tools' own declarations label them."""
    scope: frozenset[str] | None = None
    """The write tools the session's task may need, when it declared them."""
    asked: frozenset[DataClassName] = frozenset()
    """The data classes the user's own words asked for (a passport, a card…)."""
    explicit: bool = True
    """The scope was declared for this task (an application's planner, the Loop's
    phases): it wins over the writes the user's words express."""
    said: tuple[tuple[str, ...], ...] = ()
    """The stems of each of the user's messages, for tools' intents."""

    @classmethod
    def of(
        cls,
        trails: tuple[Trail, ...],
        *,
        scope: frozenset[str] | None = None,
        asked: frozenset[DataClassName] = frozenset(),
        explicit: bool = True,
        said: tuple[tuple[str, ...], ...] = (),
    ) -> FlowReport:
        """A report with its rule-free findings worked out."""
        findings: list[Finding] = []
        for trail in trails:
            if not trail.matches:
                continue
            untrusted = trail.untrusted()
            if untrusted:
                findings.append(
                    Finding(
                        concern="untrusted_source",
                        pointer=trail.pointer,
                        value=trail.value,
                        matches=untrusted,
                    )
                )
            private = trail.private()
            if private:
                findings.append(
                    Finding(
                        concern="private_data",
                        pointer=trail.pointer,
                        value=trail.value,
                        matches=private,
                    )
                )
        return cls(
            trails=trails,
            findings=tuple(findings),
            scope=scope,
            asked=asked,
            explicit=explicit,
            said=said,
        )

    def under(self, pointer: str) -> tuple[Trail, ...]:
        """The trails at ``pointer`` or inside it (``""`` is every trail)."""
        return tuple(t for t in self.trails if _below(t.pointer, pointer))

    def as_json(self) -> dict[str, object]:
        """The report as a JSON object: the values checked and the findings."""
        out: dict[str, object] = {
            "checked": [t.pointer for t in self.trails],
            "findings": [f.as_json() for f in self.findings],
        }
        if self.scope is not None:
            out["scope"] = sorted(self.scope)
        if self.asked:
            out["asked"] = sorted(self.asked)
        return out

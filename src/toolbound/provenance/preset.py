"""One line to guard every write: flow rules derived from parameter roles.

::

    policy = AllOf(GrantPolicy(grants), guard_writes(registry))

:func:`guard_writes` gives a :class:`~toolbound.provenance.FlowPolicy` whose rules
for each write tool (``spec.is_write``) come from its parameters' roles
(:mod:`toolbound.provenance.roles`), declared or inferred — no list of tools by
hand. For every write:

* **destinations, targets and secrets** need a trusted source: the user's words,
  the runtime's configuration, a tool that reads no untrusted content, or a tool
  named in ``trust``. A value shorter than the index's ``min_length`` is trusted
  only when it equals a trusted leaf or word exactly, and never when shorter than
  the role's ``min_length`` here (defaults in :data:`MIN_LENGTH`). Else a person
  confirms (``untrusted_source`` / ``no_trusted_source``).
* a **destination** with no trusted source that carries private data (a security
  code in a URL) is **denied** (``private_data_flow``).
* a **link or address inside content** (a URL, an e-mail address, a phone or an
  account number in a body) is a destination: it needs a trusted source of its own
  unless the whole content has one, else a person confirms; one carrying private
  data from an untrusted source is denied.
* **content** may come from untrusted data (a reply quotes the mail it answers),
  but may not carry private data towards a destination the user did not name
  (the whole value found in the user's words or the configuration), nor private
  data of a class (:mod:`~toolbound.provenance.classes`: a passport, a card, a
  code) the user's words did not ask for, even to a destination they named: else
  a person confirms (``private_data``).
* a write whose schema has a destination but whose call names none (an event with
  no participants) is not waved through: some other value of it must have a
  trusted source (a title the user gave), else a person confirms (``unanchored``).
* **quantities** are left to the grants: ``NumberLimit``, ``TimeRangeLimit`` and
  ``Grant(confirm=...)`` bound amounts, counts and dates; their origin says little.

Tools that only read are not judged. A task scope on the index
(``Provenance(scope=...)``) adds one more check, for every write: a tool outside
it is confirmed (``out_of_scope``), whatever its values.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from toolbound._errors import ConfigurationError
from toolbound._model import ToolSpec
from toolbound.provenance.labels import Finding
from toolbound.provenance.normalize import destinations, fold
from toolbound.provenance.policy import FlowPolicy, check_trust
from toolbound.provenance.roles import ROLES, RolePlan, plan

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from toolbound.provenance.labels import Concern, FlowReport, Match, Trail
    from toolbound.provenance.policy import FlowRule, Otherwise
    from toolbound.provenance.roles import RoleName
    from toolbound.registry import RegisteredTool

__all__ = ["MIN_LENGTH", "WriteGuard", "guard_writes"]

MIN_LENGTH: Final[Mapping[RoleName, int]] = MappingProxyType(
    {"destination": 3, "target": 1, "secret": 4}
)
"""The shortest value each guarded role accepts at all: a two-letter recipient proves
nothing even when the user's message holds it as a word; an id ``"7"`` can."""

_GUARDED: frozenset[RoleName] = frozenset({"destination", "target", "secret"})


def _trails(report: FlowReport, rules: RolePlan) -> list[tuple[RoleName, Trail]]:
    return [
        (role, trail)
        for trail in report.trails
        if (role := rules.role(trail.pointer, number=trail.number)) is not None
    ]


@dataclass(frozen=True, slots=True)
class GuardedValues:
    """Destinations, targets and secrets of ``tool`` need a trusted source."""

    tool: str
    roles: RolePlan
    _: KW_ONLY
    trust: frozenset[str] = frozenset()
    min_length: Mapping[RoleName, int] = field(default_factory=lambda: MIN_LENGTH)
    parameter: str = ""
    otherwise: Otherwise = "confirm"

    @property
    def name(self) -> str:
        """How findings name this rule."""
        return f"guard_writes {self.tool} trusted_source"

    def trusted(self, role: RoleName, trail: Trail) -> bool:
        """Whether this value of ``role`` may steer the write."""
        if len(fold(trail.value)) < self.min_length.get(role, 1):
            return False
        return trail.trusted(self.trust, role=role)

    def check(self, report: FlowReport) -> tuple[Finding, ...]:
        """A finding for each guarded value without a trusted source."""
        out: list[Finding] = []
        for role, trail in _trails(report, self.roles):
            if role not in _GUARDED or self.trusted(role, trail):
                continue
            untrusted = trail.untrusted(self.trust, role=role)
            concern: Concern = "untrusted_source" if untrusted else "no_trusted_source"
            out.append(
                Finding(
                    concern=concern,
                    pointer=trail.pointer,
                    value=trail.value,
                    matches=untrusted,
                    rule=f"{self.name} ({role})",
                )
            )
        return tuple(out)


@dataclass(frozen=True, slots=True)
class NoExfiltration:
    """A destination of ``tool`` without a trusted source may not carry private data."""

    tool: str
    roles: RolePlan
    _: KW_ONLY
    trust: frozenset[str] = frozenset()
    parameter: str = ""
    otherwise: Otherwise = "deny"

    @property
    def name(self) -> str:
        """How findings name this rule."""
        return f"guard_writes {self.tool} no_exfiltration"

    def check(self, report: FlowReport) -> tuple[Finding, ...]:
        """A finding for each untrusted destination that carries private pieces inside it.

        A piece, not the whole: an IBAN that only the user's transactions show is
        a recipient to confirm, not data leaving; a code inside a URL is, and so is
        one inside a link written into content.
        """
        return tuple(
            Finding(
                concern="private_data",
                pointer=trail.pointer,
                value=trail.value,
                matches=private,
                rule=self.name,
            )
            for role, trail in _trails(report, self.roles)
            if not trail.trusted(self.trust) and (private := _leaving(role, trail, self.trust))
        )


def _leaving(role: RoleName, trail: Trail, trust: frozenset[str]) -> tuple[Match, ...]:
    """Private pieces inside a destination, or inside a link or address in content."""
    if role == "destination":
        return tuple(m for m in trail.private() if not m.whole)
    if role != "content":
        return ()
    places = [place for place, _ in _unsourced(trail, trust)]
    return tuple(m for m in trail.private() if any(m.text in p for p in places))


def _unsourced(trail: Trail, trust: frozenset[str]) -> list[tuple[str, tuple[Match, ...]]]:
    """The links and addresses in a content value that no trusted source gave.

    Each with the matches that show where it came from: its own, else the whole
    value's (a forwarded mail found whole in the inbox).
    """
    out: list[tuple[str, tuple[Match, ...]]] = []
    for place in destinations(trail.value):
        found = [m for m in trail.matches if m.text == place] or [
            m for m in trail.matches if m.whole
        ]
        if not any(s.trusted(trust) for m in found for s in m.sources):
            out.append((place, tuple(found)))
    return out


@dataclass(frozen=True, slots=True)
class ContentDestinations:
    """Links and addresses inside content of ``tool`` are destinations (R6).

    A URL, an e-mail address, a phone or an account number in a body or a title
    steers where the reader goes as much as a recipient does: each needs a trusted
    source of its own, unless the whole content has one.
    """

    tool: str
    roles: RolePlan
    _: KW_ONLY
    trust: frozenset[str] = frozenset()
    parameter: str = ""
    otherwise: Otherwise = "confirm"

    @property
    def name(self) -> str:
        """How findings name this rule."""
        return f"guard_writes {self.tool} content_destination"

    def check(self, report: FlowReport) -> tuple[Finding, ...]:
        """A finding for each link or address in content that no trusted source gave."""
        out: list[Finding] = []
        for role, trail in _trails(report, self.roles):
            if role != "content" or trail.trusted(self.trust):
                continue
            out.extend(
                Finding(
                    concern="untrusted_source" if found else "no_trusted_source",
                    pointer=trail.pointer,
                    value=place,
                    matches=found,
                    rule=self.name,
                )
                for place, found in _unsourced(trail, self.trust)
            )
        return tuple(out)


@dataclass(frozen=True, slots=True)
class PrivateContent:
    """Content of ``tool`` may not carry private data to a destination the user did not name."""

    tool: str
    roles: RolePlan
    _: KW_ONLY
    parameter: str = ""
    otherwise: Otherwise = "confirm"

    @property
    def name(self) -> str:
        """How findings name this rule."""
        return f"guard_writes {self.tool} private_content"

    def check(self, report: FlowReport) -> tuple[Finding, ...]:
        """Private pieces of the content going where the user did not say, or unasked for.

        To a destination the user did not name, no private piece; to one they named,
        no piece of a data class (a passport, a card, a code) their words did not
        ask for: naming Bob authorizes the notes for Bob, not the passport an
        injection appended.
        """
        trails = _trails(report, self.roles)
        unnamed = [t.value for role, t in trails if role == "destination" and not t.named()]
        out: list[Finding] = []
        for role, trail in trails:
            if role != "content" or not (private := trail.private()):
                continue
            if unnamed:
                why = f"to {', '.join(unnamed[:3])}"
            else:
                private = tuple(m for m in private if _unasked(m, report.asked))
                why = (
                    ", ".join(sorted({c for m in private for c in _classes(m)})) + " not asked for"
                )
            if private:
                out.append(
                    Finding(
                        concern="private_data",
                        pointer=trail.pointer,
                        value=trail.value,
                        matches=private,
                        rule=f"{self.name} ({why})",
                    )
                )
        return tuple(out)


def _classes(match: Match) -> set[str]:
    return {s.data_class for s in match.sources if s.data_class is not None}


def _unasked(match: Match, asked: frozenset[str]) -> bool:
    """Whether a private piece is of a data class the user's words did not ask for."""
    return not _classes(match) <= asked


@dataclass(frozen=True, slots=True)
class Anchored:
    """A write of ``tool`` that names no destination needs another trusted value."""

    tool: str
    roles: RolePlan
    _: KW_ONLY
    trust: frozenset[str] = frozenset()
    parameter: str = ""
    otherwise: Otherwise = "confirm"

    @property
    def name(self) -> str:
        """How findings name this rule."""
        return f"guard_writes {self.tool} anchored"

    def check(self, report: FlowReport) -> tuple[Finding, ...]:
        """``unanchored`` when no destination is given and nothing else is trusted."""
        destinations = self.roles.pointers("destination")
        trails = _trails(report, self.roles)
        if not destinations or any(role == "destination" for role, _ in trails):
            return ()
        if any(role != "quantity" and t.trusted(self.trust, role=role) for role, t in trails):
            return ()
        return (Finding(concern="unanchored", pointer=destinations[0], value="", rule=self.name),)


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteGuard:
    """Builds the role-derived rules of each write tool, once per spec.

    :class:`~toolbound.provenance.FlowPolicy` asks it for the rules of every write
    it judges (``guard=``); :func:`guard_writes` is the usual way to get one.
    """

    trust: frozenset[str] = frozenset()
    min_length: Mapping[RoleName, int] = field(default_factory=lambda: MIN_LENGTH)
    _cache: dict[tuple[str, str], tuple[ToolSpec, tuple[FlowRule, ...]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        """Check the trusted tools and the lengths."""
        check_trust(self.trust, "guard_writes")
        for role, length in self.min_length.items():
            if role not in ROLES or length < 1:
                msg = f"guard_writes: min_length[{role!r}] must name a role and be at least 1"
                raise ConfigurationError(msg)
        object.__setattr__(self, "min_length", MappingProxyType({**MIN_LENGTH, **self.min_length}))

    def rules_for(self, spec: ToolSpec) -> tuple[FlowRule, ...]:
        """The rules for ``spec``: none for a read; five for a write."""
        if not spec.is_write:
            return ()
        cached = self._cache.get(spec.key)
        if cached is not None and cached[0] is spec:
            return cached[1]
        roles = plan(spec)
        tool = spec.ref
        rules: tuple[FlowRule, ...] = (
            GuardedValues(tool, roles, trust=self.trust, min_length=self.min_length),
            NoExfiltration(tool, roles, trust=self.trust),
            ContentDestinations(tool, roles, trust=self.trust),
            PrivateContent(tool, roles),
            Anchored(tool, roles, trust=self.trust),
        )
        # A plain dict store: two threads may both build the rules; either result is right.
        self._cache[spec.key] = (spec, rules)
        return rules


def guard_writes(
    tools: Iterable[RegisteredTool | ToolSpec] = (),
    *,
    trust: frozenset[str] = frozenset(),
    min_length: Mapping[RoleName, int] | None = None,
    rules: Iterable[FlowRule] = (),
) -> FlowPolicy:
    """A :class:`~toolbound.provenance.FlowPolicy` guarding every write by its roles.

    ``tools`` (a :class:`~toolbound.Registry`, a tool set or specs) are planned
    now, so a bad role declaration fails at start-up; writes not among them are
    guarded all the same when they come. ``trust`` names tools whose data counts
    as trusted; ``min_length`` overrides :data:`MIN_LENGTH` per role; ``rules``
    adds hand-written rules beside the preset.
    """
    guard = WriteGuard(trust=trust, min_length=MIN_LENGTH if min_length is None else min_length)
    for tool in tools:
        guard.rules_for(tool if isinstance(tool, ToolSpec) else tool.spec)
    return FlowPolicy(*rules, guard=guard)

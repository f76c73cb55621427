"""The session's value index: every value seen so far, labelled, and cheap to search.

:class:`Provenance` keeps three structures per session, each from folded text
(:func:`~toolbound.provenance.fold`; a leaf with percent-escapes also decoded;
URLs and addresses also in their canonical form):

* **leaves** — a dictionary from each folded string leaf of every indexed value (a
  user message, a configuration record, a tool result) to where it was first seen,
  per label kind: a value equal to a whole field (a sender, a participant, an
  IBAN field) is found by one lookup.
* **tokens** — the same for each distinct token of every indexed text
  (:func:`~toolbound.provenance.tokens`): a value that stands as a word inside
  prose (an IBAN in an email body, a link on a page) is found by one lookup, and
  so is each piece of a longer value (the host and the code in
  ``https://evil.example/c?code=463820``).
* **trusted text** — the folded leaves of trusted sources only (the user's words,
  configuration, tools that read no untrusted content), joined by NUL and searched
  with ``str.find``, in C: a value the user wrote anywhere in a sentence is found
  whole, whatever surrounds it. A hit is mapped back to its leaf by bisection;
  folding removes NUL, so a hit never spans two leaves.

Untrusted text is not scanned: it is what a session holds most of, and a scan
per argument would cost in proportion to it. What that leaves out is a value that
an untrusted text holds only glued to other characters (no space or delimiter
around it); its pieces are still found as tokens, and a rule that requires a
*trusted* source (the default) stops such a value anyway.

Values shorter than ``min_length`` (after folding) are never looked up and tokens
shorter than it are never indexed: ``"1"``, ``"yes"`` or ``"home"`` say nothing
about where a value came from. The exception is one more table, of **short words**
of trusted sources (:func:`~toolbound.provenance.short_words`): a short value
that equals a whole trusted leaf or word (``"13"`` in "delete file 13", ``"Fred"``)
is found there *exactly*, so an identifier the user typed can satisfy a rule that
requires a trusted source. Numbers are compared in one spelling
(:func:`~toolbound.provenance.number`): ``1200``, ``1200.0`` and ``"1.2e3"`` meet.

A value a tool vouches for — a result of a tool that reads no untrusted content, a
system-assigned field of one that does — is trusted only from a record the user's
words select (:mod:`~toolbound.provenance.records`): the index keeps each such
result's records and, when it examines a call, labels a value of an unselected
record untrusted.

A :class:`Provenance` may also carry the session's **task scope**: the write tools
the task in hand may need (``scope=``). It travels on every
:class:`~toolbound.provenance.FlowReport`, and a flow policy confirms a write outside it.

Indexing costs time in proportion to the text indexed; examining a call costs, per
argument leaf, a few dictionary lookups and one ``find`` over the trusted text per
form of the value. The index is append-only and safe to examine from several
threads while another adds to it.
"""

from __future__ import annotations

import bisect
import re
import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from toolbound._errors import ConfigurationError
from toolbound._findings import field_shape
from toolbound.provenance.classes import asked_classes, field_class, luhn, text_classes
from toolbound.provenance.intents import stems
from toolbound.provenance.labels import FlowReport, Label, Match, Source, Trail
from toolbound.provenance.normalize import analyse, fold, number, short_terms
from toolbound.provenance.records import UNSELECTED, listing, selected
from toolbound.provenance.roles import system_fields

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence

    from toolbound._model import JSONValue, ToolSpec
    from toolbound.provenance.classes import DataClassName
    from toolbound.provenance.records import Analysis, Listing, Record

__all__ = ["DEFAULT_MIN_LENGTH", "Provenance"]

DEFAULT_MIN_LENGTH = 6
"""Folded characters a value or token needs before it counts as evidence.

Six, because that is where coincidence stops: a message holds a handful of short
numbers and words (days, times, amounts, counts), so a short id an attacker picks
("13", "f2") often meets one by chance, while a token of six characters has a million
or more spellings and meets one only by copying. The ids people type by hand ("file
13", "payment 7") are shorter: those are trusted only as whole identifiers the user
wrote (:func:`~toolbound.provenance.short_terms`), never as a piece of a date.
"""

_Kind = tuple[str, str | None, str | None, str | None]
_SPACE = re.compile(r"\s")

_TITLE_WORDS = 4  # the most words a system-assigned name or title holds before it is prose

SYSTEM_ASSIGNED = "system-assigned fields"
"""The note on the label of an untrusted tool's system-assigned fields (trusted)."""


def _kind(label: Label) -> _Kind:
    # Evidence is kept once per kind of source (the user, the runtime, each tool):
    # that the same IBAN was in three results of one tool adds nothing to a decision.
    return (label.origin, label.tool, label.version, label.note)


def _leaves(value: JSONValue, pointer: str = "") -> Iterator[tuple[str, str, bool]]:
    """``(pointer, text, is_number)`` for every string and number leaf of ``value``.

    Numbers in their one spelling (:func:`~toolbound.provenance.number`).
    """
    if isinstance(value, str):
        yield pointer, value, False
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        spelled = number(value)
        if spelled is not None:
            yield pointer, spelled, True
    elif isinstance(value, dict):
        for key, item in value.items():
            escaped = key.replace("~", "~0").replace("/", "~1")
            yield from _leaves(item, f"{pointer}/{escaped}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{pointer}/{i}")


def _remember(
    table: dict[str, dict[_Kind, Source]],
    key: str,
    kind: _Kind,
    label: Label,
    at: str,
    *,
    data_class: DataClassName | None = None,
    leaf: bool = False,
) -> None:
    """Keep where ``key`` was first seen for this kind of source."""
    seen = table.get(key)
    if seen is None or kind not in seen:
        source = Source(label=label, at=at, data_class=data_class, leaf=leaf)
        # Replaced, never mutated: a reader may be iterating the old one.
        table[key] = {kind: source} if seen is None else {**seen, kind: source}


_Classed = tuple[str, "DataClassName | None"]  # (pointer, data class)


def _keep_tokens(
    found: dict[str, _Classed],
    pieces: set[str],
    pointer: str,
    text: str,
    field: DataClassName | None,
    *,
    classed: bool,
) -> None:
    """Remember where each token was first seen, with its data class when ``classed``."""
    if not classed:
        for token in pieces:
            found.setdefault(token, (pointer, None))
        return
    named = sorted(text_classes(text)) if not field else ()
    for token in pieces:
        if token not in found:
            found[token] = (pointer, field or _token_class(token, named))


def _token_class(token: str, named: Sequence[DataClassName]) -> DataClassName | None:
    """A free text's class for one of its tokens: a card number, or digits the text names."""
    if token.isdigit() and luhn(token):
        return "payment_card"
    if named and any(c.isdigit() for c in token):
        return named[0]
    return None


class Provenance:
    """The labelled values one session has seen; examines proposals against them.

    Feed it what enters the session — :meth:`add_user` for the person's input,
    :meth:`add_runtime` for configuration the deployment trusts, :meth:`add_result`
    for every tool result the model was shown — and pass it on
    :class:`~toolbound.CallContext` (the :class:`~toolbound.Loop` does all of this
    by itself). The runtime then calls :meth:`examine` on each call's normalized
    arguments and gives the report to the policy.
    """

    __slots__ = (
        "_asked",
        "_demoted",
        "_entry_ends",
        "_kinds",
        "_labels",
        "_leaf_entry",
        "_leaf_pointer",
        "_leaf_start",
        "_leaves",
        "_listings",
        "_lock",
        "_said",
        "_said_text",
        "_selection",
        "_short",
        "_short_quantities",
        "_system",
        "_text",
        "_tokens",
        "explicit",
        "min_length",
        "scope",
    )

    def __init__(
        self, *, min_length: int = DEFAULT_MIN_LENGTH, scope: Iterable[str] | None = None
    ) -> None:
        """An empty index.

        Values shorter than ``min_length`` are evidence only when they equal a
        trusted leaf or word exactly. ``scope`` names the write tools the task may
        need (``name`` or ``name@version``); ``None`` declares no scope.
        """
        if min_length < 1:
            msg = "Provenance min_length must be at least 1"
            raise ConfigurationError(msg)
        if isinstance(scope, str):
            msg = "Provenance scope must be a set of tool names, not one string"
            raise ConfigurationError(msg)
        self.min_length = min_length
        self.scope: frozenset[str] | None = None if scope is None else frozenset(scope)
        self.explicit = True
        """Whether ``scope`` was declared for the task (it then wins over intents);
        the Loop clears it for the scope of a tool set that has no phases."""
        self._lock = threading.Lock()
        # Append-only: a reader takes the trusted text (immutable) and works only
        # below its length, so an add that runs meanwhile changes nothing it sees.
        self._text = ""
        self._leaf_start: list[int] = []
        self._leaf_entry: list[int] = []
        self._leaf_pointer: list[str] = []
        self._entry_ends: list[int] = []
        self._labels: list[Label] = []
        self._kinds: list[_Kind] = []
        self._tokens: dict[str, dict[_Kind, Source]] = {}
        self._leaves: dict[str, dict[_Kind, Source]] = {}
        self._short: dict[str, dict[_Kind, Source]] = {}
        self._short_quantities: dict[str, dict[_Kind, Source]] = {}
        self._asked: frozenset[DataClassName] = frozenset()
        self._said: tuple[tuple[str, ...], ...] = ()
        self._said_text = ""  # the user's words, folded: what selects a record
        self._listings: dict[int, Listing] = {}  # by id() of a vouching tool's label
        self._selection: dict[int, tuple[int, bool]] = {}  # by id() of a record
        self._demoted: dict[int, Label] = {}  # by id() of a vouching tool's label
        self._system: dict[tuple[str, str], tuple[ToolSpec, frozenset[str]]] = {}

    # -- feeding ----------------------------------------------------------------

    def add_user(self, value: JSONValue, *, note: str | None = None) -> Label:
        """Index the person's own input (trusted)."""
        return self.add(Label.user(note), value)

    def add_runtime(self, value: JSONValue, *, note: str | None = None) -> Label:
        """Index configuration or system text the deployment supplied (trusted)."""
        return self.add(Label.runtime(note), value)

    def add_result(self, spec: ToolSpec, invocation_id: str | None, value: JSONValue) -> Label:
        """Index one tool result, labelled as ``spec`` declares the tool.

        Fields the output schema marks system-assigned (``readOnly``: ids,
        timestamps, amounts the system computed) are indexed as trusted even when
        the tool reads untrusted content, each a single token; a field holding
        prose is free text and never is.
        """
        label = Label.of_result(spec, invocation_id)
        system = self._system_fields(spec) if label.untrusted else frozenset()
        if system:
            assigned = frozenset(
                pointer
                for pointer, text, _ in _leaves(value)
                if field_shape(pointer) in system and text.strip() and not _SPACE.search(text)
            )
            if assigned:
                vouched = replace(label, untrusted=False, note=SYSTEM_ASSIGNED)
                # A marked field of a few words (a title: "Windshield crack") selects its
                # record by a word; a longer one is prose whatever its schema says.
                marked = frozenset(
                    p
                    for p, text, _ in _leaves(value)
                    if field_shape(p) in system and len(text.split()) <= _TITLE_WORDS
                )
                self.add(vouched, value, classes=spec.data_classes, only=assigned, words=marked)
        return self.add(label, value, classes=spec.data_classes)

    def _system_fields(self, spec: ToolSpec) -> frozenset[str]:
        cached = self._system.get(spec.key)
        if cached is None or cached[0] is not spec:
            # A plain dict store: two threads may both work it out; either is right.
            cached = (spec, system_fields(spec.output_schema))
            self._system[spec.key] = cached
        return cached[1]

    def add(
        self,
        label: Label,
        value: JSONValue,
        *,
        classes: Mapping[str, DataClassName] | None = None,
        only: frozenset[str] | None = None,
        words: frozenset[str] | None = None,
    ) -> Label:
        """Index ``value`` under ``label``; returns the label.

        ``classes`` declares the data classes of fields (shape pointers into
        ``value``, :mod:`~toolbound.provenance.classes`); private values are also
        classed by their field's name and the words beside them. ``only`` limits
        the leaves indexed to these pointers; ``words`` the leaves whose words
        select a record of a tool's result (:mod:`~toolbound.provenance.records`;
        by default those indexed).
        """
        trusted = not label.untrusted
        known: dict[str, Analysis] = {}
        leaves, found, short, short_quantities = self._analyse(
            value,
            trusted=trusted,
            classes=classes if label.private else None,
            only=only,
            known=known,
        )
        asked: frozenset[DataClassName] = frozenset()
        said: tuple[tuple[str, ...], ...] = ()
        said_text = ""
        if label.origin == "user":  # only the person's own words ask for data or writes
            texts = [t for _, t, number in _leaves(value) if not number]
            asked = asked.union(*(asked_classes(t) for t in texts))
            said = tuple(stems(t) for t in texts)
            said_text = "".join(fold(t) + "\x00" for _, t, _ in _leaves(value))
        records = (
            listing(
                value, self.min_length, only, words=only if words is None else words, known=known
            )
            if trusted and label.origin == "tool"
            else None
        )
        kind = _kind(label)
        with self._lock:
            entry = len(self._labels)
            self._labels.append(label)
            self._kinds.append(kind)
            self._asked |= asked
            self._said += said
            self._said_text += said_text
            if records:
                self._listings[id(label)] = records
            for pointer, folded, data_class in leaves:
                _remember(
                    self._leaves, folded, kind, label, pointer, data_class=data_class, leaf=True
                )
            for token, (pointer, data_class) in found.items():
                _remember(self._tokens, token, kind, label, pointer, data_class=data_class)
            for word, pointer in short.items():
                _remember(self._short, word, kind, label, pointer)
            for word, pointer in short_quantities.items():
                _remember(self._short_quantities, word, kind, label, pointer)
            if trusted:
                offset = len(self._text)
                for pointer, folded, _ in leaves:
                    self._leaf_start.append(offset)
                    self._leaf_entry.append(entry)
                    self._leaf_pointer.append(pointer)
                    offset += len(folded) + 1
                self._entry_ends.append(offset)
                # Published last: readers bound themselves by the text they see.
                self._text += "".join(f + "\x00" for _, f, _ in leaves)
            else:
                self._entry_ends.append(len(self._text))
        return label

    def _analyse(
        self,
        value: JSONValue,
        *,
        trusted: bool,
        classes: Mapping[str, DataClassName] | None,
        only: frozenset[str] | None = None,
        known: dict[str, Analysis] | None = None,
    ) -> tuple[
        list[tuple[str, str, DataClassName | None]],
        dict[str, _Classed],
        dict[str, str],
        dict[str, str],
    ]:
        """The folded leaves, tokens and short ids and quantities of ``value``, by pointer.

        With ``classes`` (private data; ``None`` otherwise) each leaf and token
        carries its data class, if any. ``known`` receives each trusted leaf's
        analysis, for its record (:func:`~toolbound.provenance.records.listing`).
        """
        leaves: list[tuple[str, str, DataClassName | None]] = []
        found: dict[str, _Classed] = {}
        short: dict[str, str] = {}
        short_quantities: dict[str, str] = {}
        for pointer, text, _ in _leaves(value):
            if only is not None and pointer not in only:
                continue
            # Only forms of at least min_length are kept: nothing shorter is looked up,
            # and no value that is looked up fits inside a shorter leaf.
            forms, pieces = analyse(text, self.min_length)
            field = None
            if classes is not None:
                field = classes.get(field_shape(pointer)) or field_class(pointer)
            leaves.extend((pointer, form, field) for form in forms)
            _keep_tokens(found, pieces, pointer, text, field, classed=classes is not None)
            if trusted:
                # Short words vouch for short identifiers, so only trusted ones are kept:
                # an untrusted "13" would prove nothing a missing one does not.
                ids, quantities = short_terms(text, self.min_length)
                if known is not None:
                    known[pointer] = (forms, pieces, ids)
                for word in ids:
                    short.setdefault(word, pointer)
                for word in quantities:
                    short_quantities.setdefault(word, pointer)
        return leaves, found, short, short_quantities

    @property
    def labels(self) -> tuple[Label, ...]:
        """Every label indexed so far, in order."""
        return tuple(self._labels)

    # -- examining ----------------------------------------------------------------

    def examine(self, arguments: JSONValue) -> FlowReport:
        """Where each string and number leaf of ``arguments`` was seen before.

        A leaf is looked for whole (each of its :func:`~toolbound.provenance.keys`
        in the session's folded text) and piece by piece (each of its tokens in the
        token index); a token inside a whole form already found is not repeated. A
        leaf shorter than ``min_length`` is looked for only as a whole trusted leaf
        or word (an ``exact`` match).
        """
        text = self._text  # the snapshot: everything trusted indexed before this line
        trails: list[Trail] = []
        for pointer, value, numeric in _leaves(arguments):
            forms, pieces = analyse(value, self.min_length)
            if not forms:
                trails.append(self._exact(pointer, value, numeric=numeric))
                continue
            matches: list[Match] = []
            sources: dict[_Kind, Source] = {}
            for form in forms:
                for table in (self._leaves, self._tokens):
                    for kind, source in table.get(form, {}).items():
                        sources.setdefault(kind, source)
                self._find(text, form, sources)
            if (
                not sources
                and value[:1].isdigit()
                and (short := self._exact(pointer, value).matches)
            ):
                # "1200.00" is long, its number 1200 short: looked for exactly.
                trails.append(Trail(pointer=pointer, value=value, matches=short, number=numeric))
                continue
            if sources:
                matches.append(
                    Match(text=forms[0], whole=True, sources=self._vouched(sources.values()))
                )
                # A piece of a value found whole says nothing the whole does not.
                pieces = {p for p in pieces if not any(p in form for form in forms)}
            index = self._tokens
            for token in sorted(pieces):
                seen = index.get(token)
                if seen:
                    matches.append(
                        Match(text=token, whole=False, sources=self._vouched(seen.values()))
                    )
            trail = Trail(pointer=pointer, value=value, matches=tuple(matches), number=numeric)
            trails.append(trail)
        return FlowReport.of(
            tuple(trails),
            scope=self.scope,
            asked=self._asked,
            explicit=self.explicit,
            said=self._said,
        )

    def _exact(self, pointer: str, value: str, *, numeric: bool = False) -> Trail:
        """The trail of a short value: a trusted leaf or word equal to it, if any.

        Found among the words the user wrote as identifiers, else among the numbers
        of dates, times and amounts (a match marked ``quantity``, which vouches only
        for a quantity: :meth:`~toolbound.provenance.Trail.trusted`).
        """
        key = fold(value)
        spelled = number(key) if key[:1].isdigit() else None
        forms = [f for f in (key, spelled) if f and len(f) < self.min_length]
        for table, quantity in ((self._short, False), (self._short_quantities, True)):
            for form in forms:
                seen = table.get(form)
                if seen:
                    match = Match(
                        text=form,
                        whole=True,
                        exact=True,
                        quantity=quantity,
                        sources=self._vouched(seen.values()),
                    )
                    return Trail(pointer=pointer, value=value, matches=(match,), number=numeric)
        return Trail(pointer=pointer, value=value, number=numeric)

    def _vouched(self, sources: Iterable[Source]) -> tuple[Source, ...]:
        """``sources``, each a tool vouched for only where the user's words select its record.

        A value from a trusted listing (:mod:`~toolbound.provenance.records`) in a
        record the user did not select is kept as evidence, but as untrusted.
        """
        out: list[Source] = []
        for source in sources:
            records = self._listings.get(id(source.label))
            record = None if records is None else records.get(source.at)
            if record is not None and not self._selected(record):
                demoted = self._demoted.get(id(source.label))
                if demoted is None:
                    demoted = replace(source.label, untrusted=True, note=UNSELECTED)
                    self._demoted[id(source.label)] = demoted  # a plain store: either is right
                source = Source(  # noqa: PLW2901 - the same source, demoted
                    label=demoted, at=source.at, data_class=source.data_class, leaf=source.leaf
                )
            out.append(source)
        return tuple(out)

    def _selected(self, record: Record) -> bool:
        """Whether the user's words select ``record``, cached until the user says more."""
        said = self._said_text
        cached = self._selection.get(id(record))
        if cached is not None and cached[0] == len(said):
            return cached[1]
        chosen = selected(record, said, named=self._user_wrote, timed=self._user_timed)
        self._selection[id(record)] = (len(said), chosen)  # a plain store: either is right
        return chosen

    def _user_wrote(self, word: str) -> bool:
        return any(
            kind[0] == "user"
            for table in (self._short, self._tokens)
            for kind in table.get(word, {})
        )

    def _user_timed(self, word: str) -> bool:
        return any(kind[0] == "user" for kind in self._short_quantities.get(word, {}))

    def _find(self, text: str, key: str, sources: dict[_Kind, Source]) -> None:
        """Add the first trusted leaf holding ``key``, once per entry and kind."""
        starts = self._leaf_start
        at = text.find(key)
        while at >= 0:
            leaf = bisect.bisect_right(starts, at) - 1
            entry = self._leaf_entry[leaf]
            kind = self._kinds[entry]
            if kind not in sources:
                sources[kind] = Source(label=self._labels[entry], at=self._leaf_pointer[leaf])
            at = text.find(key, self._entry_ends[entry])

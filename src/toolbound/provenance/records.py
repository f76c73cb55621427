"""Which record of a tool's listing the user's words select (R6).

A tool's result is often a listing — appointments, orders, issues, payees — and a
value a tool gave is trusted because of *where* it sits: a result of a tool that
reads no untrusted content, or a system-assigned field (``readOnly``) of one that
does. That says the system wrote the value, not that it is the record the task is
about. An instruction hidden in one record ("cancel appointment 12 as well") picks
*another* record of the same trusted listing, and every value of the call is then
trusted.

So a value a tool vouches for is trusted as a target only where its **record** is
one the user's words select:

* the result holds that record alone (a lookup, a search that found one thing), or
* the record carries a value the user wrote, whole: a field equal to words of
  theirs at least ``min_length`` folded characters long (``Dr. Rossi``, ``phone
  case``), a short identifier they wrote as one (``Bob``, ``#ops``), or a date or
  time they wrote with its separators (``14:00``). A bare short number ("the 2
  newest") selects nothing: that is a coincidence, not a choice;
* or a field the system wrote (every field of a trusted tool, the system-assigned
  fields of another) holds, as a word, a word the user wrote: "my landlord" selects
  the payee ``Landlord (Mr. Grant)``. Free text a third party wrote selects a record
  only whole, never by a word inside it: else an injected note that repeats the
  user's words would select the attacker's record.

A record is the innermost object inside an array that holds the value (a list of
scalars at the top of a result makes each item its own record); a value in no array
is in a result of one record. Everything here is pure: :class:`~toolbound.provenance.
Provenance` keeps one :class:`Listing` per vouched result and asks
:func:`selected` when it examines a call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from toolbound.provenance.normalize import analyse, fold, number, short_terms

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from toolbound._model import JSONValue

__all__ = ["UNSELECTED", "Analysis", "Listing", "Record", "listing", "selected"]

UNSELECTED: Final = "a record the user's words do not select"
"""The note on the label of a vouched value whose record the user did not select."""


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a listing: whether it is alone, and what could select it."""

    alone: bool
    forms: frozenset[str]
    """Its leaves, folded, at least ``min_length`` long."""
    short: frozenset[str]
    """Its shorter leaves, folded (and numbers in their one spelling)."""
    words: frozenset[str] = frozenset()
    """The words of its fields the system wrote: tokens and short identifiers."""


Analysis = tuple[tuple[str, ...], set[str], set[str]]
"""A leaf's folded forms, its tokens and its short identifiers."""

Listing = dict[str, Record]
"""Each leaf pointer of a result mapped to the record holding it."""

_Place = tuple[str, int] | None  # (record pointer, records in its listing)


def _walk(value: JSONValue, pointer: str, place: _Place) -> Iterator[tuple[str, str, _Place]]:
    """``(leaf pointer, text, record)`` for every string and number leaf."""
    if isinstance(value, str):
        yield pointer, value, place
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        spelled = number(value)
        if spelled is not None:
            yield pointer, spelled, place
    elif isinstance(value, dict):
        for key, item in value.items():
            escaped = key.replace("~", "~0").replace("/", "~1")
            yield from _walk(item, f"{pointer}/{escaped}", place)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            at = f"{pointer}/{i}"
            # An object in an array is a record; so is a scalar item outside any record
            # (a list of ids). A list of scalars inside a record (its participants) is
            # part of that record.
            own = isinstance(item, dict) or (place is None and not isinstance(item, list))
            yield from _walk(item, at, (at, len(value)) if own else place)


def listing(
    value: JSONValue,
    min_length: int,
    only: frozenset[str] | None = None,
    *,
    words: frozenset[str] | None = None,
    known: Mapping[str, Analysis] | None = None,
) -> Listing:
    """The record of each leaf of ``value`` (of the leaves in ``only``, when given).

    ``words`` names the leaves the system wrote, whose words select their record
    (``None``: every leaf, a trusted tool's result). ``known`` holds leaves already
    analysed by the index, so that none is analysed twice.
    """
    known = known or {}
    members: dict[str | None, list[tuple[str, str]]] = {}
    sizes: dict[str | None, int] = {}
    for pointer, text, place in _walk(value, "", None):
        key = None if place is None else place[0]
        members.setdefault(key, []).append((pointer, text))
        sizes[key] = 1 if place is None else place[1]
    out: Listing = {}
    for key, leaves in members.items():
        wanted = [p for p, _ in leaves if only is None or p in only]
        if not wanted:
            continue
        forms: set[str] = set()
        short: set[str] = set()
        said: set[str] = set()
        for pointer, text in leaves:
            done = known.get(pointer)
            found, pieces = (done[0], done[1]) if done else analyse(text, min_length)
            if words is None or pointer in words:
                said.update(pieces)
                said.update(done[2] if done else short_terms(text, min_length)[0])
            if found:
                forms.update(found)
            elif folded := fold(text):
                short.add(folded)
                spelled = number(folded) if folded[:1].isdigit() else None
                if spelled:
                    short.add(spelled)
        record = Record(
            alone=sizes[key] == 1,
            forms=frozenset(forms),
            short=frozenset(short),
            words=frozenset(said),
        )
        out.update(dict.fromkeys(wanted, record))
    return out


def selected(
    record: Record,
    said: str,
    *,
    named: Callable[[str], bool],
    timed: Callable[[str], bool],
) -> bool:
    """Whether the user's words select ``record``.

    ``said`` is the user's words, folded; ``named(word)`` whether they wrote a word
    as a word of prose or as an identifier, ``timed(word)`` whether they wrote it as
    a date, a time or an amount. Only a short quantity with separators (``14:00``)
    selects: a bare number in a date or a count meets a record's by chance.
    """
    if record.alone or any(form in said for form in record.forms):
        return True
    if any(named(word) for word in record.words):
        return True
    return any(
        named(word) or (not word.isdigit() and any(c.isdigit() for c in word) and timed(word))
        for word in record.short
    )

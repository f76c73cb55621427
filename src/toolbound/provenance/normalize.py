"""Normal forms under which values are compared across a session.

A value copied out of a tool result rarely arrives byte for byte: the model changes
case, drops the spaces an IBAN was printed with, adds ``https://``, wraps an address
in ``mailto:``, percent-encodes a query. Both sides of every comparison go through
the same folding, so these differences do not hide where a value came from:

* :func:`fold` — NFKD, case-folded; whitespace, combining marks and invisible
  format characters (zero-width spaces, bidi controls, soft hyphens) removed:
  ``"US13 3000 0000 1212"`` and ``"us133000001212"`` fold alike, and so do
  ``"José"`` and ``"jose"``.
* :func:`variants` — a text as written and, when it holds ``%``, percent-decoded
  too (``bob%40corp.example`` is ``bob@corp.example``). Both sides of a
  comparison are taken in both ways, so decoding never swallows a neighbour.
* :func:`keys` — the forms an argument value is looked for *whole*: its folds
  and, for a URL or an e-mail address, a canonical form (no scheme, ``www.``,
  default port, trailing slash or fragment; no ``mailto:`` or display name).
* :func:`tokens` — the distinctive pieces of a text, for finding a piece of one
  value *inside* another: words, the parts of URLs and paths between their
  delimiters, and IBAN-like and phone-like runs with their separators removed.
* :func:`number` — one spelling per number: ``1200``, ``1200.0``, ``1.2e3`` and
  ``"1200.00"`` are all ``1200``; a numeric text or token is also looked for in it.
* :func:`short_words` — the whole text and its words when shorter than the
  minimum length: what an identifier such as ``"13"`` or ``"Fred"`` is matched
  against *exactly*, in trusted sources only.

Folding only ever removes differences; it cannot see through a value the model
re-encoded (base64, spelled out "at" and "dot"). Flow rules that require a
*trusted* source (:class:`~toolbound.provenance.TrustedSource`, the default) do
not depend on seeing through it: a value with no trusted source is stopped either way.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from urllib.parse import unquote, urlsplit

from toolbound.provenance.classes import luhn

__all__ = [
    "analyse",
    "canonical",
    "destinations",
    "fold",
    "keys",
    "number",
    "short_terms",
    "short_words",
    "tokens",
    "variants",
]

# Characters that render as nothing (or only reorder text) and so can split a
# value without a reader noticing; NUL separates indexed leaves, so it goes too.
_INVISIBLE = "\x00\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff"
# Combining marks, once NFKD has split them off their letters: dropped, so that a
# copy that lost an accent still matches, and a mark placed right after a value
# (or a spacing accent, which NFKD makes a space and a mark) cannot change it.
_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
_SPACE = re.compile(r"\s+")
_FORMAT = re.compile(rf"[{_INVISIBLE}{_MARKS}]+")
_WORDS = re.compile(r"[\s\"'`<>()\[\]{},;|\\]+")
_ALL_SPLIT = re.compile(r"[\s\"'`<>()\[\]{},;|\\/:?=&#+!*]+")
_EDGES = ".,:;!?*-_'\"`"
_CURRENCY = "$\u20ac\u00a3\u00a5"
# IBAN-like: country, check digits, then groups of four, spaces optional.
_IBAN = re.compile(r"\b[a-z]{2}\d{2}(?: ?[a-z0-9]{4}){2,7}(?: ?[a-z0-9]{1,3})?\b")
# Phone- or account-like: digits with spaces, dots, dashes or brackets between.
_DIGIT_RUN = re.compile(r"\+?\d[\d ().-]{5,}\d")
_NON_DIGIT = re.compile(r"\D+")
# What a text points to: an address, a URL or a bare host with a path or a known shape.
_ADDRESS = re.compile(r"(?:mailto:)?[^@\s/]+@[^@\s/]+\.[a-z]{2,}")
_HOST = re.compile(
    r"(?:[a-z][a-z0-9+.-]*://|www\.)\S+|[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}(?:[/:?#]\S*)?$"
)
# A bare name ending in one of these is a file, not a host.
_FILE_TYPES = frozenset(
    [
        "txt",
        "pdf",
        "doc",
        "docx",
        "odt",
        "rtf",
        "xls",
        "xlsx",
        "ods",
        "csv",
        "tsv",
        "ppt",
        "pptx",
        "odp",
        "png",
        "jpg",
        "jpeg",
        "gif",
        "svg",
        "webp",
        "md",
        "json",
        "yaml",
        "yml",
        "xml",
        "zip",
        "tar",
        "gz",
        "log",
        "ics",
        "eml",
        "html",
        "htm",
        "py",
        "js",
    ]
)
_PHONE_DIGITS = 7  # a phone or account number has at least this many digits
# Digits that are a date (2026-07-20, 20.07.2026) or an amount (1 250.00), not a number.
_DATE_OR_AMOUNT = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}|[\d ,.]*\.\d{1,2}")
# A number next to one of these is a date, a time, an amount or a count, not an id.
_QUANTITY_WORDS = frozenset(
    [
        "jan",
        "january",
        "feb",
        "february",
        "mar",
        "march",
        "apr",
        "april",
        "may",
        "jun",
        "june",
        "jul",
        "july",
        "aug",
        "august",
        "sep",
        "sept",
        "september",
        "oct",
        "october",
        "nov",
        "november",
        "dec",
        "december",
        "mon",
        "monday",
        "tue",
        "tuesday",
        "wed",
        "wednesday",
        "thu",
        "thursday",
        "fri",
        "friday",
        "sat",
        "saturday",
        "sun",
        "sunday",
        "am",
        "pm",
        "h",
        "hour",
        "hours",
        "min",
        "minutes",
        "day",
        "days",
        "night",
        "nights",
        "week",
        "weeks",
        "month",
        "months",
        "year",
        "years",
        "eur",
        "usd",
        "gbp",
        "chf",
        "$",
        "€",
        "£",
        "%",
        "percent",
        "people",
        "persons",
        "guests",
        "adults",
        "children",
        "kids",
        "seats",
        "tickets",
        "items",
        "pieces",
        "times",
        "x",
        "km",
        "kg",
    ]
)
# Words before a number that make it a count or a measure: determiners, quantifiers
# and prepositions ("the 2 newest", "top 3", "within 5").
_LEADING = frozenset(
    {
        "the",
        "a",
        "an",
        "my",
        "your",
        "our",
        "their",
        "his",
        "her",
        "its",
        "this",
        "these",
        "those",
        "last",
        "first",
        "next",
        "top",
        "past",
        "about",
        "around",
        "over",
        "under",
        "only",
        "all",
        "any",
        "every",
        "each",
        "per",
        "of",
        "for",
        "in",
        "within",
        "than",
        "at",
        "by",
        "to",
        "from",
        "until",
        "till",
        "between",
        "after",
        "before",
    }
)
_SHORT_PLURAL = 3  # "is", "was", "its" are not plurals
_ORDINAL_OR_CLOCK = re.compile(r"\d+(?:st|nd|rd|th|am|pm|h)|\d+[:h.]\d+(?:am|pm|h)?")
_DEFAULT_PORTS = {"http": ":80", "https": ":443"}
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?")
_EXACT_FLOAT = 2**53  # above this a float no longer holds every integer


def number(value: float | str) -> str | None:
    """One spelling of a number: ``1200``, ``1200.0``, ``"1.2e3"`` → ``"1200"``.

    Integral values are written as integers, others as Python's shortest ``repr``;
    a text that is not a plain decimal or exponent literal gives ``None`` (so do
    infinities and NaN). Folded text is expected: lower-case, no spaces.
    """
    if isinstance(value, str):
        if not _NUMBER.fullmatch(value):
            return None
        try:
            value = int(value) if value.lstrip("+-").isdigit() else float(value)
        except ValueError:  # pragma: no cover - the pattern admits only literals
            return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer() and abs(value) < _EXACT_FLOAT:
            return str(int(value))
        return repr(value)
    return str(value)


def variants(text: str) -> tuple[str, ...]:
    """``text`` as written, and percent-decoded when it holds an escape."""
    if "%" not in text:
        return (text,)
    decoded = unquote(text)
    return (text,) if decoded == text else (text, decoded)


def _prefold(text: str) -> str:
    """NFKD, case-folded, invisible characters and marks removed; spacing kept."""
    if text.isascii():
        # The common case, and a cheap one: NFKD leaves ASCII alone, and case
        # folding it is lower-casing. NUL is the only ASCII character to drop.
        return text.lower().replace("\x00", "")
    # Decomposed again after folding: case folding can itself yield a base letter
    # and a mark ("İ" becomes "i" and U+0307).
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).casefold())
    return _FORMAT.sub("", folded)


def fold(text: str) -> str:
    """``text`` NFKD-normalized and case-folded, without whitespace, marks or invisibles."""
    return _SPACE.sub("", _prefold(text))


def canonical(folded: str) -> str | None:
    """The canonical form of a folded URL or e-mail address, or ``None``.

    ``https://www.Example.com:443/a/?q=1#top`` → ``example.com/a?q=1``;
    ``mailto:bob@x.org`` and ``bob<bob@x.org>`` → ``bob@x.org``. What is dropped
    is exactly what a model adds or removes when it copies such a value.
    """
    text = folded.removeprefix("mailto:")
    if text.endswith(">") and "<" in text:
        inner = text[text.rindex("<") + 1 : -1]
        if "@" in inner:
            text = inner.removeprefix("mailto:")
    if "://" in text:
        try:
            parts = urlsplit(text)
            _ = parts.port  # a malformed port makes this no URL
        except ValueError:
            return None
        if not parts.netloc:
            return None
        host = parts.netloc
        default = _DEFAULT_PORTS.get(parts.scheme)
        if default is not None:
            host = host.removesuffix(default)
        text = host.removeprefix("www.") + parts.path.rstrip("/")
        if parts.query:
            text += "?" + parts.query
    elif text.startswith("www."):
        text = text[4:].rstrip("/")
    return text if text != folded else None


def keys(value: str) -> tuple[str, ...]:
    """The folded forms ``value`` is looked for whole: its folds, then canonical forms."""
    return analyse(value, 1)[0]


def tokens(text: str, min_length: int) -> set[str]:
    """The distinct pieces of ``text`` at least ``min_length`` characters long.

    Words (split at whitespace, quotes and brackets, edge punctuation trimmed),
    the parts of each word between URL and path delimiters (``evil.example`` and
    ``463820`` out of ``https://evil.example/c?code=463820``), canonical URLs and
    addresses, and IBAN-like and phone-like runs with their separators removed.
    """
    return analyse(text, min_length)[1]


def analyse(text: str, min_length: int) -> tuple[tuple[str, ...], set[str]]:
    """:func:`keys` and :func:`tokens` of ``text`` at once, folding it once.

    Forms shorter than ``min_length`` are left out; so are the tokens when no form
    is long enough, since a token is never longer than the fold it comes from.
    """
    forms: list[str] = []
    pieces: set[str] = set()
    for variant in variants(text):
        spaced = _prefold(variant)
        base = _SPACE.sub("", spaced)
        if len(base) < min_length:
            continue
        canon = canonical(base) or number(base)
        forms.extend(f for f in (base, canon) if f and len(f) >= min_length and f not in forms)
        _tokenize(spaced, min_length, pieces)
    return tuple(forms), pieces


def short_words(text: str, min_length: int) -> set[str]:
    """The short values ``text`` vouches for as identifiers: see :func:`short_terms`."""
    return short_terms(text, min_length)[0]


def short_terms(text: str, min_length: int) -> tuple[set[str], set[str]]:
    """The short pieces of ``text`` a short value may equal exactly: ``(ids, quantities)``.

    A short value is evidence only as a whole value written in the same role, never
    by coincidence (R6). ``ids``: the whole folded text when shorter than
    ``min_length`` (a field, or a message that is one word), and the words of prose
    that stand as identifiers — a number on its own (``13`` in "delete file 13"), a
    word holding a digit (``f2``), a name (capitalized, not first in a sentence: ``Fred``), a
    word marked ``#`` or ``@``, the parts of a URL or path. ``quantities``: numbers that
    are part of a date, a time, an amount or a count (``13`` in "June 13",
    "13:00", "13th", "13 EUR", "13 people"). Lower-case words (``the``, ``file``)
    are neither. Numbers also in their one spelling (:func:`number`); ``"13"`` is
    found in neither set for "2013".
    """
    ids: set[str] = set()
    quantities: set[str] = set()
    for variant in variants(text):
        base = fold(variant)
        if base and len(base) < min_length:
            _add_short(base, ids, min_length)
        raw = [w for w in _WORDS.split(unicodedata.normalize("NFKC", variant)) if w.strip(_EDGES)]
        words = [w.strip(_EDGES) for w in raw]
        for i, word in enumerate(words):
            folded = fold(word)
            before = fold(words[i - 1]) if i else ""
            after = fold(words[i + 1]) if i + 1 < len(words) else ""
            context = (before, after)
            # A capital after a full stop starts a sentence; elsewhere it marks a name.
            named = (
                word[:1].isupper()
                and i > 0
                and not raw[i - 1].endswith((".", "!", "?"))
                and folded not in _QUANTITY_WORDS
            )
            _classify(
                word,
                folded,
                context=context,
                ids=ids,
                quantities=quantities,
                min_length=min_length,
                named=named,
            )
    return ids, quantities


def _counts(before: str, after: str) -> bool:
    """Whether a number between these words counts or measures rather than names.

    An id follows the noun it names ("file 13", "payment 7"); a count follows a
    determiner or preposition ("the 2 newest", "top 3") or precedes a plural or
    a unit ("2 issues", "13 EUR", "June 13").
    """
    plural = after.isalpha() and len(after) > _SHORT_PLURAL and after.endswith("s")
    return (
        before in _QUANTITY_WORDS
        or after in _QUANTITY_WORDS
        or before in _LEADING
        or (plural and not after.endswith("ss"))
    )


def _add_short(piece: str, into: set[str], min_length: int) -> None:
    if piece and len(piece) < min_length:
        into.add(piece)
    spelled = number(piece) if piece[:1].isdigit() else None
    if spelled is not None and len(spelled) < min_length:
        into.add(spelled)


def _classify(
    word: str,
    folded: str,
    *,
    context: tuple[str, str],
    ids: set[str],
    quantities: set[str],
    min_length: int,
    named: bool,
) -> None:
    """Put one word of prose (and the parts of a URL or path) where it belongs."""
    if folded[:1] == "#" and folded[1:].isdigit():  # #13: a number marked as one
        _add_short(folded[1:], ids, min_length)
        return
    amount = folded.lstrip(_CURRENCY)
    if _NUMBER.fullmatch(amount):
        quantity = amount != folded or "." in amount or _counts(*context)
        _add_short(amount, quantities if quantity else ids, min_length)
        return
    if _ORDINAL_OR_CLOCK.fullmatch(folded) or not any(c.isalpha() for c in folded):
        for part in (folded, *_NON_DIGIT.split(folded)):  # 13th, 9am, 13/07/2026, 9:30
            _add_short(part, quantities, min_length)
        return
    parts = [p.strip(_EDGES) for p in _ALL_SPLIT.split(folded)]
    if named or word[:1] in "#@" or any(c.isdigit() for c in folded):
        _add_short(folded.strip(_EDGES + "#@"), ids, min_length)
    if len(parts) > 1:  # the parts of a URL or a path the user wrote: drive/f2
        for part in parts:
            _add_short(part, ids, min_length)


@functools.lru_cache(maxsize=1024)
def destinations(text: str) -> tuple[str, ...]:
    """The places a text points to: URLs, e-mail addresses, phone and account numbers.

    Each in the form :func:`tokens` indexes it (a URL canonical, an IBAN or a
    phone number without separators), so that it can be looked up as a piece of the
    text: a link in a message body is a destination like a recipient (R6).
    Cached: the preset's rules ask for the same value's places more than once.
    """
    out: dict[str, None] = {}
    for variant in variants(text):
        spaced = _prefold(variant)
        for raw in _WORDS.split(spaced):
            if "." not in raw and "@" not in raw:
                continue  # no address, no host: most words of prose
            word = raw.strip(_EDGES)
            if _ADDRESS.fullmatch(word) or (_HOST.match(word) and not _file_name(word)):
                out[canonical(word) or word] = None
        for match in _IBAN.finditer(spaced):
            out[match.group().replace(" ", "")] = None
        for match in _DIGIT_RUN.finditer(spaced):
            run = match.group()
            digits = _NON_DIGIT.sub("", run)
            if (
                len(digits) >= _PHONE_DIGITS
                and not _DATE_OR_AMOUNT.fullmatch(run.strip())
                and not any(digits in found for found in out)  # an IBAN's digits
                and not luhn(digits)  # a card number: private data, not a place
            ):
                out[digits] = None
    return tuple(out)


def _file_name(word: str) -> bool:
    """``report.pdf``: a bare name with a file's extension (a link has a scheme or a path)."""
    return "/" not in word and word.rpartition(".")[2] in _FILE_TYPES


def _tokenize(text: str, min_length: int, out: set[str]) -> None:
    # Whole-text splits and set comprehensions: the per-token work stays in C.
    words = {w.strip(_EDGES) for w in _WORDS.split(text)}
    words = {w for w in words if len(w) >= min_length}
    out |= words
    for word in words:
        if "://" in word or word.startswith(("www.", "mailto:")):
            canon = canonical(word)
            if canon is not None and len(canon) >= min_length:
                out.add(canon)
        elif word[0].isdigit() and (spelled := number(word)) and len(spelled) >= min_length:
            out.add(spelled)
    parts = {p.strip(_EDGES).removeprefix("www.") for p in _ALL_SPLIT.split(text)}
    out |= {p for p in parts if len(p) >= min_length}
    for match in _IBAN.finditer(text):
        out.add(match.group().replace(" ", ""))
    for match in _DIGIT_RUN.finditer(text):
        digits = _NON_DIGIT.sub("", match.group())
        if len(digits) >= min_length:
            out.add(digits)

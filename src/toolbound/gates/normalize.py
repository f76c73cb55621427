"""Normalization, canonical JSON and the invocation digest (R5).

Validated arguments pass through the tool's normalizers, which turn values with a
relative meaning ("tomorrow") into definite ones ("2026-07-20") against a fixed
:class:`~toolbound._model.NormalizationContext`. The normalized arguments are then
serialized as RFC 8785 canonical JSON, and :func:`digest` binds those bytes to the
tenant and the tool's name and version. Idempotency (R8) and confirmation (R7)
compare digests, so two spellings of one intent — other key order, other
whitespace, "tomorrow" versus the date it names — must meet in one digest, and any
change of meaning must not.

Everything here is pure: no clock is read, no I/O is done. A value without a
definite meaning raises :class:`~toolbound._errors.Rejection` (kind
``"normalization"``); a mistake by the embedding program (an unknown timezone, a
malformed JSON Pointer) raises :class:`~toolbound._errors.ConfigurationError`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
import struct
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Final, TypeAlias, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import rfc8785

from toolbound._errors import ConfigurationError, Problem, Rejection
from toolbound._jsontext import compact
from toolbound.problems import make_problem

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from toolbound._model import JSONObject, JSONValue, NormalizationContext, Normalizer

__all__ = ["canonical_json", "date_fields", "digest", "normalize", "normalize_date"]


# --- canonical JSON ----------------------------------------------------------------

# I-JSON (RFC 7493) and RFC 8785 §3.2.2.3: an integer is exact only within
# ±(2**53 - 1). 2**53 itself is a double, but so is nothing between it and
# 2**53 + 2, so a reader cannot tell 2**53 from 2**53 + 1 once parsed; rfc8785
# rejects both, and so do we (R5: a value the canonical form cannot carry exactly
# is rejected, never rounded into a digest that names another value).
_SAFE_INT: Final = 2**53 - 1

# The fast path (R5 digests every call, and rfc8785 is pure Python, several times
# slower than the C json encoder): for values made only of str, bool, None, safe
# ints, "decimal" floats, lists and dicts, the json encoder with these settings
# writes RFC 8785 bytes exactly — no whitespace; ``"``, ``\\`` and control
# characters escaped as RFC 8785 §3.2.2.2 says (short forms, else lowercase
# ``\u00xx``); everything else literal. A float goes this way only when it is not
# integral and 1e-4 <= |x| < 1e16: there ``repr`` is plain fixed notation with the
# shortest round-trip digits, which is what ES6 writes too (and what rfc8785
# itself derives from ``str(x)``). Elsewhere ``repr`` is not ES6 (``56.0``,
# ``1e-05``, ``1e+16``). Keys with characters above U+FFFF are kept out because
# ``sort_keys`` orders by code point while RFC 8785 §3.2.3 orders by UTF-16 code
# unit, and the two orders differ only there. ``tests/gates/test_normalize.py``
# proves the equivalence against rfc8785.
_encode_plain: Final = compact(sort_keys=True)
_FIRST_ASTRAL: Final = "\U00010000"


def _is_plain(value: object) -> bool:
    """Tell whether ``value`` may take the fast path (see ``_encode_plain``)."""
    if type(value) is dict:
        for key in value:
            # str.isascii is O(1) in CPython; only non-ASCII keys pay for max().
            if type(key) is not str or (not key.isascii() and max(key) >= _FIRST_ASTRAL):
                return False
        return _all_plain(value.values())
    if type(value) is list:
        return _all_plain(value)
    return _all_plain((value,))


def _all_plain(items: Iterable[object]) -> bool:
    # Scalars are tested inline, without a call each: this walk runs on every
    # call's hot path (R5).
    for item in items:
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if type(item) is int:
            if -_SAFE_INT <= item <= _SAFE_INT:
                continue
            return False
        if type(item) is float:
            # The range test also refuses NaN and the infinities.
            if 1e-4 <= abs(item) < 1e16 and not item.is_integer():  # noqa: PLR2004
                continue
            return False
        if (kind is dict or kind is list) and _is_plain(item):
            continue
        return False
    return True


def canonical_json(value: JSONValue) -> bytes:
    """Serialize ``value`` as RFC 8785 (JCS) canonical JSON, UTF-8 encoded.

    Equal JSON values give equal bytes whatever their source key order or
    whitespace: object members are sorted by the UTF-16 code units of their keys,
    numbers are written as ECMAScript writes them (``1.0`` → ``1``, ``1e21`` →
    ``1e+21``) and strings are escaped minimally.

    Raises :class:`Rejection` (kind ``"normalization"``, code
    ``"not_canonicalizable"``) for a value RFC 8785 cannot represent exactly:

    * an integer outside ±(2**53 - 1) — rejected, never rounded to a double;
    * NaN or an infinity;
    * a string or key holding an unpaired surrogate (no UTF-8 form);
    * a non-string key, or a type JSON does not have (``recoverable=False``: that
      is a normalizer's bug, not something the model can correct);
    * nesting deeper than the interpreter's recursion limit.
    """
    try:
        if _is_plain(value):
            # UnicodeEncodeError here, as in rfc8785, for unpaired surrogates.
            return _encode_plain(value).encode()
        return rfc8785.dumps(value)
    except (ValueError, RecursionError) as exc:
        raise Rejection(_not_canonicalizable(value, exc)) from exc


_CANONICAL_HINT: Final = (
    "send integers between -(2**53-1) and 2**53-1 (larger ones as strings), "
    "finite numbers and well-formed Unicode strings"
)


def _not_canonicalizable(value: object, exc: BaseException) -> Problem:
    """Describe why rfc8785 (or the fast path) refused ``value``, and where."""
    # Only on this failure path do we walk again, to name the field at fault
    # (rfc8785's exceptions do not say where they were raised).
    if isinstance(exc, RecursionError) or isinstance(exc.__cause__, RecursionError):
        fault: _Fault | None = ("", "the value is nested too deeply to canonicalize", True)
    else:
        fault = _find_fault(value, "")
    # No fault found would mean rfc8785 refused something we do not know about.
    pointer, message, recoverable = fault or ("", str(exc)[:200], False)
    return make_problem(
        "not_canonicalizable",
        message,
        recoverable=recoverable,
        hint=_CANONICAL_HINT if recoverable else None,
        pointer=pointer or None,
    )


_Fault: TypeAlias = tuple[str, str, bool]  # pointer, message, recoverable


def _find_fault(value: object, pointer: str) -> _Fault | None:
    """Find the first value, key or type in ``value`` that RFC 8785 refuses."""
    if isinstance(value, dict):
        faults = (_member_fault(key, item, pointer) for key, item in value.items())
    elif isinstance(value, list | tuple):
        faults = (_find_fault(item, f"{pointer}/{i}") for i, item in enumerate(value))
    else:
        return _scalar_fault(value, pointer)
    return next((fault for fault in faults if fault is not None), None)


def _member_fault(key: object, item: object, pointer: str) -> _Fault | None:
    if not isinstance(key, str):
        # A model cannot send a non-string key: a normalizer put it here.
        return pointer, "object keys must be strings", False
    escaped = key.replace("~", "~0").replace("/", "~1")  # RFC 6901
    return _string_fault(key, pointer) or _find_fault(item, f"{pointer}/{escaped}")


def _scalar_fault(value: object, pointer: str) -> _Fault | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        ok, message = -_SAFE_INT <= value <= _SAFE_INT, "an integer is outside ±(2**53-1)"
    elif isinstance(value, float):
        ok, message = math.isfinite(value), "NaN and infinite numbers have no JSON form"
    elif isinstance(value, str):
        return _string_fault(value, pointer)
    else:
        return pointer, f"{type(value).__name__} is not a JSON type", False
    return None if ok else (pointer, message, True)


def _string_fault(text: str, pointer: str) -> _Fault | None:
    try:
        text.encode()
    except UnicodeEncodeError:
        return pointer, "a string contains an unpaired surrogate, which has no UTF-8 form", True
    return None


# --- digest ------------------------------------------------------------------------

_DIGEST_DOMAIN: Final = b"toolbound/digest/v1"
_u64be: Final = struct.Struct(">Q").pack
# The hash state after the (constant) framed domain tag, copied per call.
_DIGEST_START: Final = hashlib.sha256(_u64be(len(_DIGEST_DOMAIN)) + _DIGEST_DOMAIN)


def digest(*, tenant: str, tool_name: str, tool_version: str, canonical: bytes) -> str:
    """Compute the invocation digest ``d = H(tenant ∥ tool name/version ∥ canonical)`` (R5).

    Returns ``"sha256:"`` followed by 64 lowercase hex digits: SHA-256 over five
    fields, each written as its length in bytes (unsigned 64-bit big-endian)
    followed by the bytes themselves::

        u64be(19) ∥ b"toolbound/digest/v1"
        u64be(len(T)) ∥ T      T = tenant, UTF-8
        u64be(len(N)) ∥ N      N = tool name, UTF-8
        u64be(len(V)) ∥ V      V = tool version, UTF-8
        u64be(len(C)) ∥ C      C = canonical, the RFC 8785 bytes of the
                               normalized arguments (:func:`canonical_json`)

    Length prefixes make the framing unambiguous (tenant ``"ab"`` with tool
    ``"c"`` is not tenant ``"a"`` with tool ``"bc"``); the domain tag keeps these
    digests apart from any other SHA-256 use and versions the scheme. For example,
    tenant ``"t"``, tool ``"echo"`` version ``"1"`` and canonical ``b"{}"`` give
    ``sha256:89afad8716c7ac5a0edefcfa5ce5e96ff966e5b4eb4ee118c6acbf0dfefb9229``.

    Raises :class:`ConfigurationError` if a name holds an unpaired surrogate: the
    runtime, not the model, supplies these.
    """
    try:
        t = tenant.encode()
        n = tool_name.encode()
        v = tool_version.encode()
    except UnicodeEncodeError as exc:
        msg = "tenant, tool name and tool version must be encodable as UTF-8"
        raise ConfigurationError(msg) from exc
    h = _DIGEST_START.copy()
    # One small header write, then the arguments without copying them.
    c = canonical
    h.update(b"".join((_u64be(len(t)), t, _u64be(len(n)), n, _u64be(len(v)), v, _u64be(len(c)))))
    h.update(c)
    return "sha256:" + h.hexdigest()


# --- dates -------------------------------------------------------------------------

_DATE_HINT: Final = "send an ISO date YYYY-MM-DD"

# Matched against the lowercased, whitespace-collapsed expression. [0-9], not \d:
# \d would also accept other scripts' digits, which int() then silently reads.
_ISO_DATE: Final = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_DATE_TIME: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[t ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?"
    r"(z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?"  # RFC 3339 time-numoffset
)
_IN_DAYS: Final = re.compile(r"in ([0-9]{1,6}) days?")
_DAYS_AGO: Final = re.compile(r"([0-9]{1,6}) days? ago")
_WEEKDAY: Final = re.compile(
    r"(?:(next|this|last) )?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
)
_WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_FIXED_OFFSETS: Final = {
    "today": 0,
    "tomorrow": 1,
    "yesterday": -1,
    "day after tomorrow": 2,
    "day before yesterday": -2,
}
# Keys ZoneInfo resolves from the host's own configuration rather than from tzdata:
# a normalizer that honoured them would give different dates on different machines.
_HOST_ZONES: Final = frozenset({"localtime", "posixrules"})


def _date_problem(*, code: str, message: str) -> Rejection:
    return Rejection(make_problem(code, message, hint=_DATE_HINT))


def _zone(key: str) -> ZoneInfo:
    if key in _HOST_ZONES:
        msg = f"timezone {key!r} depends on the host; name an IANA zone such as 'Asia/Shanghai'"
        raise ConfigurationError(msg)
    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        msg = f"unknown IANA timezone {key!r}"
        raise ConfigurationError(msg) from exc


def _today(context: NormalizationContext) -> date:
    """Return the reference instant's calendar date in the user's timezone."""
    zone = _zone(context.timezone)
    reference = context.reference_time
    if reference.tzinfo is None or reference.utcoffset() is None:
        msg = "NormalizationContext.reference_time must be timezone-aware"
        raise ConfigurationError(msg)
    return reference.astimezone(zone).date()


def normalize_date(expression: str, context: NormalizationContext) -> str:
    """Resolve a date expression to ``"YYYY-MM-DD"`` against ``context`` (R5).

    "Today" is the calendar date of ``context.reference_time`` in
    ``context.timezone``: at 2026-07-19T20:00:00Z it is already 2026-07-20 in
    Asia/Shanghai, so "today" there is ``"2026-07-20"``. Matching ignores case and
    runs of whitespace. Accepted forms:

    * an ISO date ``2026-07-20`` (must exist: ``2026-02-30`` is rejected);
    * an RFC 3339 date-time with an offset, ``2026-07-19T20:00:00Z`` or
      ``...+08:00`` (``T`` or a space between date and time): the date, in the
      user's timezone, of the instant it names;
    * ``today``, ``tomorrow``, ``yesterday``, ``day after tomorrow``,
      ``day before yesterday``;
    * ``in N days`` and ``N days ago`` (``day`` also accepted; N of 0 to 999999);
    * a weekday, ``monday`` … ``sunday``, alone or as ``next monday``: the first
      such day strictly after today, so 1 to 7 days ahead.

    The vocabulary is English whatever ``context.locale`` says. Forms whose
    meaning readers disagree on are rejected rather than guessed:
    ``this monday`` and ``last monday`` (this week's or the coming one? the
    previous or the one before?) and a date-time without an offset. Day arithmetic
    is on calendar dates, so a DST change or a skipped day never moves the result.

    Raises :class:`Rejection` (kind ``"normalization"``, ``recoverable=True``)
    with code ``"unrecognized_date"`` for any other form, ``"invalid_date"`` for a
    well-formed date that does not exist or falls outside years 1 to 9999, and
    ``"ambiguous_date"`` for the forms above. Raises :class:`ConfigurationError`
    for an unknown timezone or a naive ``reference_time``.
    """
    today = _today(context)  # first, so a bad context fails whatever the input
    text = " ".join(expression.split()).lower()
    shown = repr(expression[:64])

    if (match := _ISO_DATE.fullmatch(text)) is not None:
        year, month, day = (int(g) for g in match.groups())
        try:
            return date(year, month, day).isoformat()
        except ValueError:
            raise _date_problem(
                code="invalid_date", message=f"{shown} is not a calendar date"
            ) from None

    if (match := _DATE_TIME.fullmatch(text)) is not None:
        return _date_of_instant(match, shown, context).isoformat()

    offset = _FIXED_OFFSETS.get(text)
    if offset is None and (match := _IN_DAYS.fullmatch(text)) is not None:
        offset = int(match.group(1))
    elif offset is None and (match := _DAYS_AGO.fullmatch(text)) is not None:
        offset = -int(match.group(1))
    elif offset is None and (match := _WEEKDAY.fullmatch(text)) is not None:
        qualifier, name = match.groups()
        if qualifier in {"this", "last"}:
            msg = f"{shown} could name either of two dates"
            raise _date_problem(code="ambiguous_date", message=msg)
        # 1..7: a weekday named on that same weekday means a week ahead, not today.
        offset = (_WEEKDAYS.index(name) - today.weekday() - 1) % 7 + 1
    if offset is None:
        raise _date_problem(
            code="unrecognized_date", message=f"{shown} is not a date this tool understands"
        )
    try:
        return (today + timedelta(days=offset)).isoformat()
    except OverflowError:
        raise _date_problem(
            code="invalid_date", message=f"{shown} falls outside years 1-9999"
        ) from None


def _date_of_instant(match: re.Match[str], shown: str, context: NormalizationContext) -> date:
    """Return the date, in the user's timezone, of a matched RFC 3339 date-time."""
    *fields, offset = match.groups()
    if offset is None:
        msg = f"{shown} has no UTC offset, so its instant is unknown"
        raise _date_problem(code="ambiguous_date", message=msg)
    year, month, day, hour, minute, second = (int(g) for g in fields)
    # RFC 3339 allows a leap second (:60). The fraction is dropped too: offsets are
    # whole seconds, so neither can carry an instant across midnight.
    second = min(second, 59)
    utc_offset = timedelta(0)
    if offset != "z":
        sign = -1 if offset[0] == "-" else 1
        utc_offset = sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6]))
    try:
        instant = datetime(year, month, day, hour, minute, second, tzinfo=timezone(utc_offset))
        return instant.astimezone(_zone(context.timezone)).date()
    except (ValueError, OverflowError):
        raise _date_problem(
            code="invalid_date", message=f"{shown} is not a valid date-time"
        ) from None


# --- field normalizers -------------------------------------------------------------


_BAD_TILDE: Final = re.compile(r"~(?![01])")
_ARRAY_INDEX: Final = re.compile(r"0|[1-9][0-9]*")


def _parse_pointer(pointer: str) -> tuple[str, ...]:
    """Split ``pointer``, which must name a member, into RFC 6901 reference tokens."""
    if not pointer.startswith("/"):
        msg = f"date_fields needs JSON Pointers to members, like '/date'; got {pointer!r}"
        raise ConfigurationError(msg)
    tokens = pointer[1:].split("/")
    for token in tokens:
        if _BAD_TILDE.search(token):
            msg = f"{pointer!r} has a '~' not followed by 0 or 1 (RFC 6901)"
            raise ConfigurationError(msg)
    # RFC 6901 §4: ~1 before ~0, so that "~01" becomes "~1", not "/".
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in tokens)


@dataclass(frozen=True, slots=True, kw_only=True)
class _DateFields:
    """The normalizer :func:`date_fields` returns."""

    pointers: tuple[str, ...]
    paths: tuple[tuple[str, ...], ...] = dataclasses.field(repr=False)

    def __call__(self, arguments: JSONObject, context: NormalizationContext) -> JSONObject:
        result = arguments
        for pointer, path in zip(self.pointers, self.paths, strict=True):
            # Every path has a token, so the root object itself is never replaced.
            result = cast("JSONObject", _replace_date(result, path, pointer, context))
        return result


def _replace_date(
    node: JSONValue, path: tuple[str, ...], pointer: str, context: NormalizationContext
) -> JSONValue:
    """Return ``node`` with the date at ``path`` normalized, copying only along the path."""
    if not path:
        return _normalize_leaf(node, pointer, context)
    token, rest = path[0], path[1:]
    # A path that does not resolve (RFC 6901 §4) names no field: nothing to do.
    if isinstance(node, dict) and token in node:
        child = node[token]
        new_child = _replace_date(child, rest, pointer, context)
        if new_child is not child:
            node = {**node, token: new_child}  # same key order as the caller's
    elif isinstance(node, list) and _ARRAY_INDEX.fullmatch(token) and int(token) < len(node):
        index = int(token)
        child = node[index]
        new_child = _replace_date(child, rest, pointer, context)
        if new_child is not child:
            node = [*node[:index], new_child, *node[index + 1 :]]
    return node


def _normalize_leaf(node: JSONValue, pointer: str, context: NormalizationContext) -> JSONValue:
    if not isinstance(node, str):
        raise Rejection(
            make_problem(
                "not_a_date_string",
                f"{pointer} must be a date string, not {_json_type(node)}",
                hint=_DATE_HINT,
                pointer=pointer,
            )
        )
    try:
        normalized = normalize_date(node, context)
    except Rejection as rejection:
        raise Rejection(dataclasses.replace(rejection.problem, pointer=pointer)) from None
    # Unchanged (already ISO): hand back the same object so no parent is copied.
    return node if normalized == node else normalized


def _json_type(value: JSONValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    return "an object"


def date_fields(*pointers: str) -> Normalizer:
    """Return a normalizer that replaces each field a JSON Pointer names with its date.

    ``date_fields("/date", "/start/date")`` returns a :data:`Normalizer` that
    passes the string at each pointer through :func:`normalize_date` (R5). It
    never mutates its input: it returns a new object copied only along the paths
    it changed, and the input itself when nothing changed. A pointer that does
    not resolve (the member is absent, or a parent is not an object or array)
    is left alone; anything but a string there — ``null`` included — is rejected
    with code ``"not_a_date_string"``. Rejections carry the pointer.

    Raises :class:`ConfigurationError` for no pointers or a malformed one.
    """
    if not pointers:
        msg = "date_fields needs at least one JSON Pointer"
        raise ConfigurationError(msg)
    return _DateFields(pointers=pointers, paths=tuple(_parse_pointer(p) for p in pointers))


def normalize(
    arguments: JSONObject, normalizers: Sequence[Normalizer], context: NormalizationContext
) -> JSONObject:
    """Apply ``normalizers`` to ``arguments`` in order (R5).

    Each normalizer receives the previous one's output. With no normalizers the
    result is ``arguments`` itself, not a copy. Raises :class:`Rejection` from a
    normalizer, and :class:`ConfigurationError` if one returns anything but a
    JSON object.
    """
    result = arguments
    for normalizer in normalizers:
        result = normalizer(result, context)
        if type(result) is not dict:
            msg = f"normalizer {normalizer!r} returned {type(result).__name__}, not a dict"
            raise ConfigurationError(msg)
    return result

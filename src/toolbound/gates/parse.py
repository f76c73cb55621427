r"""The parse gate (R3): argument bytes in, one strict JSON object out.

:func:`parse_arguments` is the first gate a proposal meets. It never changes the raw
bytes (the :class:`~toolbound.Proposal` keeps them); it only decides whether they are
exactly one JSON object under the runtime's limits, and returns that object. Anything
else raises :class:`~toolbound._errors.Rejection` carrying a ``kind="parse"``
:class:`~toolbound._errors.Problem` whose ``code`` says precisely why:

==========================  ===================================================
``too_large``               more bytes than ``ParseLimits.max_bytes``
``byte_order_mark``         the bytes start with a UTF-8 byte order mark
``invalid_utf8``            the bytes are not strict UTF-8
``not_an_object``           empty, or the top-level value is not an object
``too_deep``                nesting deeper than ``ParseLimits.max_depth``
``truncated``               the input ends in the middle of the object
``invalid_json``            any other syntax error (the message gives the byte)
``trailing_data``           something follows the object
``duplicate_key``           a key repeated in one object, at any depth
``non_finite_number``       ``NaN``, ``Infinity``, ``-Infinity``, or a numeral
                            too large for a float (``1e400``)
``number_out_of_range``     an integer longer than Python will convert
``number_underflow``        a non-zero numeral too small for a float (``1e-400``),
                            which would otherwise silently become ``0.0``
``lone_surrogate``          a ``\uD800``-style escape that is not half of a pair
==========================  ===================================================

Every rejection is recoverable: the model can send a corrected proposal, and the
``hint`` says how.

Numbers are read as Python ints (integers, exact) and IEEE 754 doubles (anything
with a fraction or an exponent), because that is what the validator, RFC 8785
canonical JSON and the digest (R5) are defined over. A numeral the double cannot
hold is rejected rather than rounded into a different value: ``1e400`` would become
infinity (``non_finite_number``), and ``1e-400`` or ``-1e-400`` would become ``0.0``
or ``-0.0`` (``number_underflow``) — a different number whose canonical form is
``0``, so a digest would silently name the call "with zero". Keeping such a numeral
exact (as a ``Decimal``) was considered and refused: RFC 8785 has no form for it,
and the tool would receive a type no other number has. Zero written any way
(``0``, ``-0.0``, ``0e10``, ``0.000e-999``) is zero, not an underflow, and a
subnormal numeral (``5e-324``) is non-zero, so both are accepted. The check costs
nothing for ordinary input: it runs only for a float that came out as zero.

The gate sits on the hot path of every call, so it is the C-accelerated stdlib
scanner plus checks that cost nothing unless the bytes could fail them: each
expensive scan is behind a cheap test that rules it out for ordinary input.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from json import JSONDecodeError, JSONDecoder
from json.scanner import make_scanner
from typing import TYPE_CHECKING, Final, Literal, cast

from toolbound._errors import ConfigurationError, Rejection
from toolbound.problems import make_problem

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from toolbound._model import JSONObject, JSONValue

__all__ = ["DEFAULT_LIMITS", "ParseLimits", "parse_arguments"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ParseLimits:
    """How much argument data the parse gate accepts (R3).

    ``max_bytes`` bounds the raw argument bytes; ``max_depth`` bounds nesting, where
    the top-level object is depth 1 and every object or array inside adds one.
    """

    max_bytes: int = 1_048_576
    max_depth: int = 64

    def __post_init__(self) -> None:
        """Refuse limits that would reject every object."""
        if self.max_bytes < 2:  # noqa: PLR2004 - "{}" is the smallest object
            msg = f"ParseLimits.max_bytes must be at least 2, got {self.max_bytes}"
            raise ConfigurationError(msg)
        if self.max_depth < 1:
            msg = f"ParseLimits.max_depth must be at least 1, got {self.max_depth}"
            raise ConfigurationError(msg)


DEFAULT_LIMITS: Final = ParseLimits()
"""The limits :func:`parse_arguments` applies when none are given: 1 MiB, 64 levels."""

_Code = Literal[
    "too_large",
    "byte_order_mark",
    "invalid_utf8",
    "not_an_object",
    "too_deep",
    "truncated",
    "invalid_json",
    "trailing_data",
    "duplicate_key",
    "non_finite_number",
    "number_out_of_range",
    "number_underflow",
    "lone_surrogate",
]

_HINTS: Final[dict[_Code, str]] = {
    "too_large": "Send smaller arguments: refer to large content instead of inlining it.",
    "byte_order_mark": "Send the JSON object without a byte order mark.",
    "invalid_utf8": "Send the arguments as UTF-8 text.",
    "not_an_object": 'Send the arguments as one JSON object, e.g. {"name": "value"}.',
    "too_deep": "Flatten the arguments: nest objects and arrays less deeply.",
    "truncated": "The arguments were cut off; send the complete JSON object.",
    "invalid_json": "Send one syntactically valid JSON object (RFC 8259).",
    "trailing_data": "Send exactly one JSON object and nothing after it.",
    "duplicate_key": "Send each key once per object.",
    "non_finite_number": "Use finite numbers; NaN and Infinity are not JSON.",
    "number_out_of_range": "Send a smaller integer.",
    "number_underflow": (
        "Send 0 if zero is meant; a non-zero number must be at least about 5e-324 in magnitude."
    ),
    "lone_surrogate": (
        "Write characters as UTF-8, or escape one outside the BMP as a surrogate pair "
        "(\\ud83d\\ude00)."
    ),
}


def _reject(*, code: _Code, message: str, pointer: str | None = None) -> Rejection:
    return Rejection(make_problem(code, message, hint=_HINTS[code], pointer=pointer))


# --- the scanner ---------------------------------------------------------------------


class _DuplicateKeyError(Exception):
    """Raised out of the C scanner by the object hook; located afterwards."""


class _NonFiniteError(Exception):
    """Raised out of the C scanner for NaN/Infinity or an overflowing numeral."""


class _UnderflowError(Exception):
    """Raised out of the C scanner for a non-zero numeral that rounds to zero."""


def _object(pairs: list[tuple[str, JSONValue]]) -> JSONObject:
    # R3: a repeated key would silently keep the last value; compare sizes instead of
    # tracking keys, so the cost is one dict build, which json.loads pays anyway.
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _DuplicateKeyError
    return obj


def _reject_constant(name: str) -> float:
    # R3: the stdlib accepts NaN, Infinity and -Infinity by default; JSON does not.
    raise _NonFiniteError(name)


_FLOAT_MAX: Final = sys.float_info.max


_MANTISSA_END: Final = re.compile("[eE]")


def _finite_float(numeral: str) -> float:
    # R3: "1e400" is Infinity spelled as a numeral. A Python call per float costs
    # less than any scan of the bytes for exponents, since arguments hold few floats.
    value = float(numeral)
    if value == 0.0:
        # R3/R5: "1e-400" is not zero, but the double rounds it to 0.0 (or -0.0):
        # a digit 1-9 before the exponent says the numeral meant something else.
        mantissa = _MANTISSA_END.split(numeral, maxsplit=1)[0]
        if mantissa.strip("-0.") != "":
            raise _UnderflowError(numeral)
        return value
    if -_FLOAT_MAX <= value <= _FLOAT_MAX:
        return value
    raise _NonFiniteError(numeral)


# The scanner reads its settings off any JSONDecoder (typeshed names only its own
# class). Calling it directly skips raw_decode's wrapper on every call.
_scan: Final[Callable[[str, int], tuple[object, int]]] = make_scanner(
    JSONDecoder(  # type: ignore[arg-type]
        object_pairs_hook=_object, parse_constant=_reject_constant, parse_float=_finite_float
    )
)

_WHITESPACE: Final = " \t\n\r"  # RFC 8259's four; str.strip() would take more
_NOT_WS: Final = re.compile(r"[^ \t\n\r]")


def _skip_ws(text: str, pos: int = 0) -> int:
    """Return the index of the first non-whitespace character at or after ``pos``."""
    found = _NOT_WS.search(text, pos)
    return found.start() if found else len(text)


# --- the gate ------------------------------------------------------------------------


def parse_arguments(data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> JSONObject:
    """Parse argument bytes as one strict JSON object (R3).

    Returns the object. Raises :class:`~toolbound._errors.Rejection` with a
    ``kind="parse"``, recoverable :class:`~toolbound._errors.Problem` whose ``code``
    is one of those in this module's docstring; no other exception escapes for any
    input. ``data`` is only read, never altered.
    """
    # R3: size first, so an oversized payload costs nothing more than len().
    if len(data) > limits.max_bytes:
        msg = f"arguments are {len(data)} bytes; the limit is {limits.max_bytes}"
        raise _reject(code="too_large", message=msg)
    try:
        text = data.decode("utf-8")  # strict: also refuses encoded surrogates
    except UnicodeDecodeError as exc:
        raise _utf8_rejection(data, exc) from None
    return _parse_text(text, data, limits)


def _parse_text(text: str, data: bytes, limits: ParseLimits) -> JSONObject:
    start = 0 if text.startswith("{") else _start_of_object(text)
    # Nesting can pass max_depth only with more openers than that; only then is it
    # worth finding which openers lie outside strings.
    limit = limits.max_depth
    if data.count(b"{") + data.count(b"[") > limit and _too_deep(data, limit):
        msg = f"arguments nest deeper than {limit} levels"
        raise _reject(code="too_deep", message=msg)
    try:
        value, end = _scan(text, start)
    except JSONDecodeError as exc:
        raise _syntax_rejection(text, exc.pos, exc.msg) from None
    except StopIteration as exc:  # the C scanner's way of saying "Expecting value"
        raise _syntax_rejection(text, exc.value, "Expecting value") from None
    except _DuplicateKeyError:
        raise _duplicate_rejection(text) from None
    except (_NonFiniteError, _UnderflowError) as exc:
        raise _numeral_rejection(text, exc) from None
    except RecursionError:
        # Only reachable when max_depth exceeds what the interpreter can recurse.
        msg = "arguments nest deeper than the parser can follow"
        raise _reject(code="too_deep", message=msg) from None
    except ValueError as exc:  # int() refusing a numeral over sys.int_info's limit
        raise _number_rejection(text, exc) from None
    if end != len(text) and _skip_ws(text, end) != len(text):
        msg = f"unexpected data after the object at byte {_byte_at(text, end)}"
        raise _reject(code="trailing_data", message=msg)
    obj = cast("JSONObject", value)  # it began with "{" and parsed
    # A lone surrogate can only come from a \u escape: strict UTF-8 refused the rest.
    if b"\\" in data and b"\\u" in data and _may_hold_lone_surrogate(data):
        _check_surrogates(obj)
    return obj


def _start_of_object(text: str) -> int:
    """Return where the object starts after leading whitespace; reject anything else."""
    start = _skip_ws(text)
    first = text[start : start + 1]
    if first == "{":
        return start
    if text.startswith("\ufeff"):
        raise _reject(
            code="byte_order_mark", message="arguments start with a UTF-8 byte order mark"
        )
    if not first:
        raise _reject(code="not_an_object", message="arguments are empty; expected a JSON object")
    kind = _VALUE_KINDS.get(first)
    if kind is None:
        msg = f"invalid JSON at byte {_byte_at(text, start)}: expected '{{'"
        raise _reject(code="invalid_json", message=msg)
    raise _reject(code="not_an_object", message=f"arguments are {kind}; expected a JSON object")


_VALUE_KINDS: Final = {
    "[": "an array",
    '"': "a string",
    "t": "a boolean",
    "f": "a boolean",
    "n": "null",
    "N": "NaN",
    "I": "Infinity",
    "-": "a number",
    **dict.fromkeys("0123456789", "a number"),
}


def _byte_at(text: str, pos: int) -> int:
    """Return the byte offset of character ``pos``: messages cite the bytes sent."""
    return pos if text.isascii() else len(text[:pos].encode())


# --- depth ---------------------------------------------------------------------------

_NOT_MARKS: Final = bytes(b for b in range(256) if b not in b'"[]{}')
_AS_PARENS: Final = bytes.maketrans(b"[{]}", b"(())")
_PEELS: Final = 8
_RUNS: Final = re.compile(rb"\(+|\)+")


def _too_deep(data: bytes, limit: int) -> bool:
    """Tell whether brackets outside strings nest deeper than ``limit``.

    Exact for well-formed and for truncated documents; for other broken ones it may
    say no and leave the syntax error to the scanner. Uses C-speed bytes methods:
    UTF-8 never puts a quote, a backslash or a bracket inside a multi-byte character.
    """
    if b"\\" in data:
        # Drop escapes so every quote left opens or closes a string: first escaped
        # backslashes, then escaped quotes; left to right, as a JSON reader pairs them.
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = data.translate(None, _NOT_MARKS)  # only " [ ] { } remain
    # Strings without brackets are now adjacent quote pairs. Counting pairs left to
    # right, as replace() would remove them, tells whether every quote is in one.
    if marks.count(b'""') * 2 == marks.count(b'"'):
        parens = marks.translate(_AS_PARENS, b'"')
    else:  # some string holds a bracket (or never closes): keep what lies between
        parens = b"".join(marks.split(b'"')[::2]).translate(_AS_PARENS)
    opens = parens.count(b"(")
    if opens <= limit:
        return False
    if b"(" * (limit + 1) in parens:  # a plain chain of openers, the usual attack
        return True
    # Close what a truncated document left open; closers at the end deepen nothing.
    parens += b")" * (2 * opens - len(parens))
    # Each pass removes every innermost pair, one level of a balanced document, so
    # ordinary documents empty out in a handful of passes.
    for peeled in range(1, min(limit, _PEELS) + 1):
        inner = parens.replace(b"()", b"")
        if not inner or len(inner) == len(parens):
            return False  # empty: shallow enough; stuck: a stray closer, invalid JSON
        parens = inner
        if peeled == limit:
            return b"()" in parens  # a pair is left only from a deeper level
    # Deep chains peel slowly; the runs of what is left are few, so count those.
    return peeled + _deepest(parens) > limit


def _deepest(parens: bytes) -> int:
    """Return how deep a paren string nests, or 0 if it closes more than it opened."""
    depth = deepest = 0
    for run in _RUNS.findall(parens):
        if run.startswith(b"("):
            depth += len(run)
            deepest = max(deepest, depth)
        else:
            depth -= len(run)
            if depth < 0:
                return 0
    return deepest


# --- syntax errors -------------------------------------------------------------------

_PARTIAL_VALUE: Final = re.compile(
    r"""
    t(?:ru?)? | f(?:a(?:ls?)?)? | n(?:ul?)?          # a literal, cut short
    | -?(?:0|[1-9][0-9]*)                            # a number, possibly cut short
      (?:\.(?:[0-9]+(?:[eE][-+]?[0-9]*)?)? | [eE][-+]?[0-9]*)?
    | -
    """,
    re.VERBOSE,
)
_PARTIAL_ESCAPE: Final = re.compile(r"u[0-9a-fA-F]{0,4}")
_NUMBER_CHARS: Final = frozenset("-+0123456789.eE")


def _syntax_rejection(text: str, pos: int, reason: str) -> Rejection:
    if _is_cut_off(text, pos, reason):
        msg = f"arguments end after {_byte_at(text, len(text))} bytes, inside the object"
        return _reject(code="truncated", message=msg)
    # The stdlib's wording, minus its dangling "at"/"starting at" (we give the byte).
    what = reason.removesuffix(" at").removesuffix(" starting")
    msg = f"invalid JSON at byte {_byte_at(text, pos)}: {what[:1].lower()}{what[1:]}"
    return _reject(code="invalid_json", message=msg)


def _is_cut_off(text: str, pos: int, reason: str) -> bool:
    r"""Tell whether the scanner failed only because the input stopped (R3: truncated).

    The scanner reports most such errors at the end of the input, but a few at the
    start of the token that was cut: a string, a ``\u`` escape, a literal or number.
    """
    if reason.startswith("Unterminated string"):
        return True  # no closing quote anywhere after it
    if reason.startswith("Invalid \\uXXXX escape"):
        return _PARTIAL_ESCAPE.fullmatch(text, pos) is not None
    if pos >= len(text.rstrip(_WHITESPACE)):
        return True
    if reason == "Expecting value":
        return _PARTIAL_VALUE.fullmatch(text, pos) is not None
    if reason.startswith("Expecting ','"):
        # "1." or "1e+" at the end: the scanner took "1" and stumbled on the rest.
        start = pos
        while start > 0 and text[start - 1] in _NUMBER_CHARS:
            start -= 1
        return start < pos and _PARTIAL_VALUE.fullmatch(text, start) is not None
    return False


def _ends_in_string(text: str, start: int) -> bool:
    try:
        _scan(text, start)
    except JSONDecodeError as exc:
        in_string = exc.msg.startswith(("Unterminated string", "Invalid \\uXXXX escape"))
        return in_string and _is_cut_off(text, exc.pos, exc.msg)
    except (
        StopIteration,
        _DuplicateKeyError,
        _NonFiniteError,
        _UnderflowError,
        RecursionError,
        ValueError,
    ):
        return False  # it went wrong before the cut: the cut is not the reason
    return False


def _utf8_rejection(data: bytes, exc: UnicodeDecodeError) -> Rejection:
    # A stream cut inside a character of a string that never closes was truncated,
    # not mis-encoded. Only a string may hold the character, so ask the scanner.
    if exc.reason == "unexpected end of data" and exc.end == len(data):
        before = data[: exc.start].decode()
        start = _skip_ws(before)
        if before.startswith("{", start) and _ends_in_string(before, start):
            msg = f"arguments end after {len(data)} bytes, inside a character of a string"
            return _reject(code="truncated", message=msg)
    msg = f"arguments are not valid UTF-8 at byte {exc.start}: {exc.reason}"
    return _reject(code="invalid_utf8", message=msg)


# --- locating what the hooks raised (rare path) ---------------------------------------

_ATOM: Final = re.compile(r'[^ \t\n\r,:\[\]{}"]+')
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _locate(text: str, culprit: type[Exception]) -> tuple[list[str | int], str]:
    """Find where the scanner raised ``culprit``: the path there, and the key or token.

    Descends from the top-level object: the C scanner tries each member in turn, and
    the first whose value raises is entered, until the fault is a repeated key (for
    duplicates) or a value that is not a container (for numbers). The scanner got as
    far as the fault, so everything read before it is well-formed.
    """
    path: list[str | int] = []
    i = _skip_ws(text)
    try:
        while True:
            member, i, repeated = _member_at_fault(text, i, culprit)
            if repeated:
                return path, str(member)
            path.append(member)
            if text[i] not in "{[":
                atom = _ATOM.match(text, i)
                return path, atom.group() if atom else ""
    except (LookupError, ValueError, StopIteration, RecursionError):
        return path, ""  # not found after all: report the fault without its place


def _member_at_fault(text: str, i: int, culprit: type[Exception]) -> tuple[str | int, int, bool]:
    """In the container at ``i``, find the first member at fault.

    Returns the member's key or index, where its value starts, and whether the fault
    is the key itself, repeated.
    """
    in_object = text[i] == "{"
    seen: set[str] = set()
    index = 0
    i = _skip_ws(text, i + 1)
    while True:
        member: str | int = index
        if in_object:
            key, i = _scan(text, i)
            member = str(key)
            if member in seen and culprit is _DuplicateKeyError:
                return member, i, True
            seen.add(member)
            i = _skip_ws(text, _skip_ws(text, i) + 1)  # past the colon
        try:
            _, end = _scan(text, i)
        except culprit:
            return member, i, False
        i = _skip_ws(text, end)
        if text[i] != ",":
            raise LookupError(i)  # the container ended and nothing in it was at fault
        i = _skip_ws(text, i + 1)
        index += 1


def _pointer(path: list[str | int]) -> str:
    """Return an RFC 6901 JSON Pointer; lone surrogates become U+FFFD to stay encodable."""
    tokens = (str(part).replace("~", "~0").replace("/", "~1") for part in path)
    return "".join("/" + _SURROGATE.sub("\ufffd", token) for token in tokens)


def _where(pointer: str) -> str:
    return f"at {pointer}" if pointer else "at the top level"


def _show(key: str) -> str:
    shown = json.dumps(key)  # ASCII escapes: a key with a lone surrogate still prints
    return shown if len(shown) <= 60 else shown[:56] + '..."'  # noqa: PLR2004


def _duplicate_rejection(text: str) -> Rejection:
    path, key = _locate(text, _DuplicateKeyError)
    pointer = _pointer(path)
    msg = f"duplicate key {_show(key)} in the object {_where(pointer)}"
    return _reject(code="duplicate_key", message=msg, pointer=pointer)


def _numeral_rejection(text: str, exc: _NonFiniteError | _UnderflowError) -> Rejection:
    """Reject NaN/Infinity or a numeral a double cannot hold, at its pointer."""
    path, _ = _locate(text, type(exc))
    pointer = _pointer(path)
    token = str(exc)
    shown = token if len(token) <= 40 else token[:37] + "..."  # noqa: PLR2004
    if isinstance(exc, _UnderflowError):
        why = "is not zero but too small for a double, which rounds it to 0"
    else:
        why = "is not a finite number"
    code: _Code = "number_underflow" if isinstance(exc, _UnderflowError) else "non_finite_number"
    return _reject(code=code, message=f"{shown} {_where(pointer)} {why}", pointer=pointer)


def _int_overflows(atom: str) -> bool:
    if not atom.lstrip("-").isdigit():
        return False
    try:
        int(atom)
    except ValueError:
        return True
    return False


def _number_rejection(text: str, exc: ValueError) -> Rejection:
    path, atom = _locate(text, ValueError)
    if not _int_overflows(atom):  # no other ValueError is known to come out of the scanner
        return _reject(code="invalid_json", message=f"invalid JSON: {exc}")
    pointer = _pointer(path)
    limit = sys.get_int_max_str_digits()
    msg = f"the integer {_where(pointer)} has {len(atom.lstrip('-'))} digits; the limit is {limit}"
    return _reject(code="number_out_of_range", message=msg, pointer=pointer)


# --- lone surrogates -----------------------------------------------------------------

# Precise when no escaped backslash is present, for then every \u is a real escape:
# a high half not followed by a low half, or a low half not preceded by a high half.
# Both branches begin with the literal "\u", which the regex engine searches fast.
_LONE_SURROGATE_ESCAPE: Final = re.compile(
    rb"""
    \\u[dD] (?: [89abAB][0-9a-fA-F]{2} (?!\\u[dD][c-fC-F])
             | (?<!\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD]) [c-fC-F][0-9a-fA-F]{2} )
    """,
    re.VERBOSE,
)
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")


def _may_hold_lone_surrogate(data: bytes) -> bool:
    if b"\\\\" in data:  # "\\uD800" is not an escape; let the walk decide
        return _SURROGATE_ESCAPE.search(data) is not None
    return _LONE_SURROGATE_ESCAPE.search(data) is not None


def _check_surrogates(value: JSONObject) -> None:
    """Reject the first string or key holding a lone surrogate, in document order.

    The scanner joins valid pairs into one character, so any surrogate left in the
    parsed value is a lone one (R3). Iterative, so no nesting can exhaust the stack.
    """
    _check_keys(value, ())
    stack: list[tuple[tuple[str | int, ...], Iterator[tuple[str | int, JSONValue]]]]
    stack = [((), iter(value.items()))]
    while stack:
        path, members = stack[-1]
        for member, item in members:
            if isinstance(item, str):
                found = _SURROGATE.search(item)
                if found:
                    pointer = _pointer([*path, member])
                    where = f"the string {_where(pointer)}"
                    raise _lone_surrogate(found.group(), where, pointer)
            elif isinstance(item, dict):
                _check_keys(item, (*path, member))
                stack.append(((*path, member), iter(item.items())))
                break
            elif isinstance(item, list):
                stack.append(((*path, member), enumerate(item)))
                break
        else:
            stack.pop()


def _check_keys(obj: JSONObject, path: tuple[str | int, ...]) -> None:
    found = _SURROGATE.search("".join(obj))
    if found:
        pointer = _pointer(list(path))
        where = f"a key in the object {_where(pointer)}"
        raise _lone_surrogate(found.group(), where, pointer)


def _lone_surrogate(char: str, where: str, pointer: str) -> Rejection:
    msg = f"{where} holds the unpaired surrogate \\u{ord(char):04x}"
    return _reject(code="lone_surrogate", message=msg, pointer=pointer)

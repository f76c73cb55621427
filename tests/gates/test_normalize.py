"""R5: normalization, canonical JSON and the invocation digest."""

from __future__ import annotations

import copy
import hashlib
import json
import struct
from datetime import UTC, datetime

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbound._errors import ConfigurationError, Rejection
from toolbound._model import NormalizationContext
from toolbound.gates import normalize as normalize_module
from toolbound.gates.normalize import (
    canonical_json,
    date_fields,
    digest,
    normalize,
    normalize_date,
)

SAFE = 2**53 - 1


def ctx(reference: str, zone: str = "UTC") -> NormalizationContext:
    """Build a context from an ISO reference instant and an IANA zone."""
    return NormalizationContext(reference_time=datetime.fromisoformat(reference), timezone=zone)


# The seed's frame (000 §6.5): Sunday 2026-07-19, 14:00 in Shanghai.
SEED = ctx("2026-07-19T14:00:00+08:00", "Asia/Shanghai")


def rejection_of(call, *args):
    """Return the problem ``call(*args)`` rejects with."""
    with pytest.raises(Rejection) as info:
        call(*args)
    return info.value.problem


# --- dates ---------------------------------------------------------------------------

DATE_TABLE = [
    # expression, reference, zone, expected
    ("tomorrow", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-20"),  # the seed
    ("today", "2026-07-19T20:00:00+00:00", "Asia/Shanghai", "2026-07-20"),
    ("today", "2026-07-19T20:00:00+00:00", "UTC", "2026-07-19"),
    ("today", "2026-07-19T20:00:00+00:00", "America/Los_Angeles", "2026-07-19"),
    ("tomorrow", "2026-07-19T20:00:00+00:00", "Asia/Shanghai", "2026-07-21"),
    ("yesterday", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-18"),
    ("day after tomorrow", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-21"),
    ("day before yesterday", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-17"),
    ("in 3 days", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-22"),
    ("in 1 day", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-20"),
    ("in 0 days", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-19"),
    ("in 14 days", "2026-12-25T12:00:00+00:00", "UTC", "2027-01-08"),
    ("2 days ago", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-17"),
    ("1 day ago", "2026-03-01T12:00:00+00:00", "UTC", "2026-02-28"),
    ("2026-07-20", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-20"),
    ("2024-02-29", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2024-02-29"),
    # RFC 3339 date-times: the date of that instant in the user's timezone
    ("2026-07-19T20:00:00Z", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-20"),
    ("2026-07-19T20:00:00Z", "2026-07-19T14:00:00+08:00", "UTC", "2026-07-19"),
    ("2026-07-19T20:00:00+08:00", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-19"),
    ("2026-07-19t23:30:00.25-02:00", "2026-07-19T14:00:00+08:00", "UTC", "2026-07-20"),
    ("2026-07-19 23:30:00-02:00", "2026-07-19T14:00:00+08:00", "UTC", "2026-07-20"),
    ("2016-12-31T23:59:60Z", "2026-07-19T14:00:00+08:00", "UTC", "2016-12-31"),  # leap second
    # weekdays: the next such day strictly after today (2026-07-19 is a Sunday)
    ("monday", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-20"),
    ("next monday", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-20"),
    ("saturday", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-25"),
    ("sunday", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-26"),
    ("next sunday", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-26"),
    ("monday", "2026-07-19T20:00:00+00:00", "Asia/Shanghai", "2026-07-27"),  # Monday there
    # case and whitespace never matter
    ("  TOMORROW ", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-20"),
    ("In  3\tDays", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-22"),
    ("Day\nAfter TOMORROW", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-21"),
    ("Next   FRIDAY", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-24"),
    (" 2026-07-20 ", "2026-07-19T14:00:00+08:00", "Asia/Shanghai", "2026-07-20"),
]


@pytest.mark.parametrize(("expression", "reference", "zone", "expected"), DATE_TABLE)
def test_date_table(expression, reference, zone, expected):
    """Each supported form resolves to the listed date in the given frame."""
    assert normalize_date(expression, ctx(reference, zone)) == expected


DST_TABLE = [
    # New York springs forward 2026-03-08 02:00 EST -> 03:00 EDT (a 23-hour day)
    ("today", "2026-03-08T04:59:59+00:00", "America/New_York", "2026-03-07"),
    ("today", "2026-03-08T06:59:59+00:00", "America/New_York", "2026-03-08"),
    ("today", "2026-03-08T07:00:00+00:00", "America/New_York", "2026-03-08"),
    ("tomorrow", "2026-03-09T03:59:59+00:00", "America/New_York", "2026-03-09"),
    # ...and falls back 2026-11-01 02:00 EDT -> 01:00 EST (a 25-hour day)
    ("today", "2026-11-01T04:00:00+00:00", "America/New_York", "2026-11-01"),
    ("today", "2026-11-01T05:30:00+00:00", "America/New_York", "2026-11-01"),  # 01:30 EDT
    ("today", "2026-11-01T06:30:00+00:00", "America/New_York", "2026-11-01"),  # 01:30 EST
    ("tomorrow", "2026-11-02T04:59:59+00:00", "America/New_York", "2026-11-02"),
    ("today", "2026-11-02T05:00:00+00:00", "America/New_York", "2026-11-02"),
    # London's change happens at 01:00 UTC on 2026-03-29
    ("today", "2026-03-28T23:30:00+00:00", "Europe/London", "2026-03-28"),
    ("today", "2026-03-29T00:30:00+00:00", "Europe/London", "2026-03-29"),
    ("in 1 day", "2026-03-29T00:30:00+00:00", "Europe/London", "2026-03-30"),
    # Samoa skipped 2011-12-30 entirely; "tomorrow" stays calendar arithmetic
    ("today", "2011-12-30T09:59:59+00:00", "Pacific/Apia", "2011-12-29"),
    ("tomorrow", "2011-12-30T09:59:59+00:00", "Pacific/Apia", "2011-12-30"),
    ("today", "2011-12-30T10:00:00+00:00", "Pacific/Apia", "2011-12-31"),
    # a date-time falling in the skipped hour still names one instant
    ("2026-03-08T02:30:00-05:00", "2026-07-19T00:00:00+00:00", "America/New_York", "2026-03-08"),
]


@pytest.mark.parametrize(("expression", "reference", "zone", "expected"), DST_TABLE)
def test_dst_and_skipped_day_edges(expression, reference, zone, expected):
    """Offset changes move the local date of an instant, never the day arithmetic."""
    assert normalize_date(expression, ctx(reference, zone)) == expected


@pytest.mark.parametrize(
    "expression",
    [
        "",
        "   ",
        "next week",
        "2026/07/20",
        "20260720",
        "26-07-20",
        "2026-7-20",
        "July 20",
        "in two days",
        "in -1 days",
        "-1 days ago",
        "tomorrow morning",
        "the day after tomorrow",
        "mon",
        "\uff12\uff10\uff12\uff16-07-20",  # full-width digits
        "2026-07-20T10:00Z",  # RFC 3339 needs seconds
        "2026-07-20T10:00:00+08:75",
        "2026-07-20T10:00:00+24:00",
        "2026-07-20T10:00:00 +08:00",
        "in 1000000 days",
    ],
)
def test_unrecognized_forms_are_rejected(expression):
    """Anything outside the small grammar is rejected with a hint to send an ISO date."""
    problem = rejection_of(normalize_date, expression, SEED)
    assert (problem.kind, problem.code) == ("normalization", "unrecognized_date")
    assert problem.recoverable
    assert problem.hint == "send an ISO date YYYY-MM-DD"


@pytest.mark.parametrize(
    ("expression", "reference"),
    [
        ("2026-02-30", "2026-07-19T14:00:00+08:00"),
        ("2025-02-29", "2026-07-19T14:00:00+08:00"),
        ("2026-13-01", "2026-07-19T14:00:00+08:00"),
        ("2026-00-10", "2026-07-19T14:00:00+08:00"),
        ("0000-01-01", "2026-07-19T14:00:00+08:00"),
        ("2026-07-19T24:00:00Z", "2026-07-19T14:00:00+08:00"),
        ("2026-07-19T12:61:00Z", "2026-07-19T14:00:00+08:00"),
        ("2026-02-30T12:00:00Z", "2026-07-19T14:00:00+08:00"),
        ("9999-12-31T23:00:00-05:00", "2026-07-19T14:00:00+08:00"),  # past year 9999 in UTC
        ("tomorrow", "9999-12-31T12:00:00+00:00"),
        ("in 999999 days", "9000-01-01T00:00:00+00:00"),
        ("2 days ago", "0001-01-01T12:00:00+00:00"),
    ],
)
def test_well_formed_but_impossible_dates_are_invalid(expression, reference):
    """A well-formed date that does not exist, or leaves years 1-9999, is invalid_date."""
    problem = rejection_of(normalize_date, expression, ctx(reference, "Asia/Shanghai"))
    assert (problem.kind, problem.code, problem.recoverable) == (
        "normalization",
        "invalid_date",
        True,
    )


@pytest.mark.parametrize(
    "expression", ["this monday", "last friday", "THIS sunday", "2026-07-19T10:00:00"]
)
def test_ambiguous_forms_are_rejected_not_guessed(expression):
    """Forms readers disagree on (this/last weekday, a date-time with no offset) are refused."""
    problem = rejection_of(normalize_date, expression, SEED)
    assert (problem.code, problem.recoverable) == ("ambiguous_date", True)


@pytest.mark.parametrize("zone", ["Nope/Zone", "asia/shanghai", "", "../etc/passwd", "localtime"])
def test_unknown_or_host_dependent_zone_is_a_configuration_error(zone):
    """A zone tzdata does not define (or one read from the host) is the program's mistake."""
    with pytest.raises(ConfigurationError):
        normalize_date("2026-07-20", ctx("2026-07-19T14:00:00+08:00", zone))


def test_naive_reference_time_is_a_configuration_error():
    """A reference time without an offset names no instant, so no date."""
    naive_time = datetime(2026, 7, 19, 14)  # noqa: DTZ001 - naive on purpose
    naive = NormalizationContext(reference_time=naive_time, timezone="UTC")
    with pytest.raises(ConfigurationError):
        normalize_date("today", naive)


def test_locale_does_not_change_the_vocabulary():
    """The grammar is English in every locale, so the same words give the same date."""
    other = NormalizationContext(
        reference_time=SEED.reference_time, timezone=SEED.timezone, locale="zh-CN"
    )
    assert normalize_date("tomorrow", other) == normalize_date("tomorrow", SEED)


ZONES = st.sampled_from(
    ["UTC", "Asia/Shanghai", "America/New_York", "Pacific/Apia", "Australia/Lord_Howe"]
)
REFERENCES = st.datetimes(  # bounds are naive by Hypothesis's contract; values get UTC
    min_value=datetime(1900, 1, 1),  # noqa: DTZ001
    max_value=datetime(2200, 1, 1),  # noqa: DTZ001
    timezones=st.just(UTC),
)
EXPRESSIONS = st.sampled_from(
    [
        *("today", "tomorrow", "yesterday", "in 10 days", "3 days ago", "friday", "next tuesday"),
        *("2026-07-20", "2026-07-19T20:00:00Z", "2026-07-19T20:00:00-11:00"),
    ]
)


@settings(max_examples=60)
@given(reference=REFERENCES, zone=ZONES, expression=EXPRESSIONS)
def test_normalized_dates_are_fixed_points(reference, zone, expression):
    """A normalized date normalizes to itself, so re-normalizing never changes a digest."""
    context = NormalizationContext(reference_time=reference, timezone=zone)
    once = normalize_date(expression, context)
    assert normalize_date(once, context) == once


@settings(max_examples=60)
@given(reference=REFERENCES, zone=ZONES, days=st.integers(0, 400))
def test_relative_days_are_calendar_arithmetic_on_today(reference, zone, days):
    """'in N days' and 'N days ago' are exactly N calendar days from 'today', in any zone."""
    context = NormalizationContext(reference_time=reference, timezone=zone)
    today = datetime.fromisoformat(normalize_date("today", context)).date()
    ahead = datetime.fromisoformat(normalize_date(f"in {days} days", context)).date()
    behind = datetime.fromisoformat(normalize_date(f"{days} days ago", context)).date()
    assert (ahead - today).days == days
    assert (today - behind).days == days


@settings(max_examples=40)
@given(reference=REFERENCES, zone=ZONES)
def test_weekdays_are_one_to_seven_days_ahead(reference, zone):
    """Every weekday name resolves to a distinct day 1..7 days after today, on that weekday."""
    context = NormalizationContext(reference_time=reference, timezone=zone)
    today = datetime.fromisoformat(normalize_date("today", context)).date()
    names = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    resolved = [datetime.fromisoformat(normalize_date(n, context)).date() for n in names]
    assert sorted((d - today).days for d in resolved) == list(range(1, 8))
    assert [d.weekday() for d in resolved] == list(range(7))


# --- date_fields and normalize -------------------------------------------------------


def test_date_fields_replaces_nested_and_top_level_fields():
    """Each pointed-to string becomes its ISO date; everything else is untouched."""
    arguments = {
        "title": "standup",
        "start": {"date": "tomorrow", "time": "09:00"},
        "due": "friday",
    }
    normalized = date_fields("/start/date", "/due")(arguments, SEED)
    assert normalized == {
        "title": "standup",
        "start": {"date": "2026-07-20", "time": "09:00"},
        "due": "2026-07-24",
    }


def test_date_fields_never_mutates_and_copies_only_the_changed_path():
    """The input is unchanged; untouched siblings are shared, not copied."""
    arguments = {"start": {"date": "tomorrow"}, "attendees": ["a", "b"], "meta": {"k": 1}}
    before = copy.deepcopy(arguments)
    normalized = date_fields("/start/date")(arguments, SEED)
    assert arguments == before
    assert normalized is not arguments
    assert normalized["start"] is not arguments["start"]
    assert normalized["attendees"] is arguments["attendees"]
    assert normalized["meta"] is arguments["meta"]
    assert list(normalized) == list(arguments)  # member order kept


@pytest.mark.parametrize(
    ("pointer", "arguments"),
    [
        ("/date", {"title": "x"}),  # member absent
        ("/start/date", {"start": {}}),
        ("/start/date", {"title": "x"}),  # parent absent
        ("/start/date", {"start": "2026-07-20"}),  # parent is not a container
        ("/dates/2", {"dates": ["today", "tomorrow"]}),  # index past the end
        ("/dates/-", {"dates": ["today"]}),  # "-" names no element (RFC 6901)
        ("/dates/01", {"dates": ["today", "tomorrow"]}),  # leading zero is no index
        ("/date", {"date": "2026-07-20"}),  # already normalized
    ],
)
def test_date_fields_returns_the_input_itself_when_nothing_changes(pointer, arguments):
    """A pointer that resolves to nothing, or to a date already ISO, costs no copy."""
    assert date_fields(pointer)(arguments, SEED) is arguments


def test_date_fields_follows_array_indexes_and_escaped_keys():
    """RFC 6901 tokens: array indexes and ~1 / ~0 escapes reach the right member."""
    arguments = {"dates": ["today", "tomorrow"], "a/b": {"~c": "yesterday"}}
    normalized = date_fields("/dates/1", "/a~1b/~0c")(arguments, SEED)
    assert normalized == {"dates": ["today", "2026-07-20"], "a/b": {"~c": "2026-07-18"}}
    assert arguments["dates"] == ["today", "tomorrow"]


@pytest.mark.parametrize("value", [None, 20260720, 1.5, True, ["tomorrow"], {"d": "tomorrow"}])
def test_date_fields_rejects_a_non_string_at_the_pointer(value):
    """Only strings are dates: null, numbers, booleans and containers are rejected there."""
    problem = rejection_of(date_fields("/start/date"), {"start": {"date": value}}, SEED)
    assert (problem.kind, problem.code) == ("normalization", "not_a_date_string")
    assert problem.pointer == "/start/date"
    assert problem.recoverable


def test_date_fields_rejection_names_the_field():
    """An unrecognized date inside arguments carries the pointer to its field."""
    problem = rejection_of(date_fields("/start/date"), {"start": {"date": "someday"}}, SEED)
    assert (problem.code, problem.pointer) == ("unrecognized_date", "/start/date")


@pytest.mark.parametrize("pointers", [(), ("date",), ("",), ("/a~2b",), ("/ok", "/bad~")])
def test_date_fields_refuses_malformed_pointers_at_construction(pointers):
    """No pointer, or one that is not an RFC 6901 member pointer, is a configuration error."""
    with pytest.raises(ConfigurationError):
        date_fields(*pointers)


def test_normalize_without_normalizers_returns_the_same_object():
    """With nothing to do, normalize hands back its argument, not a copy."""
    arguments = {"a": 1}
    assert normalize(arguments, (), SEED) is arguments


def test_normalize_applies_normalizers_in_order():
    """Each normalizer sees the previous one's output."""

    def default_date(arguments, _context):
        return {"date": "tomorrow", **arguments}

    assert normalize({"x": 1}, [default_date, date_fields("/date")], SEED) == {
        "date": "2026-07-20",
        "x": 1,
    }
    # The other way round, the date is added after its normalizer has run.
    assert normalize({"x": 1}, [date_fields("/date"), default_date], SEED) == {
        "date": "tomorrow",
        "x": 1,
    }


def test_normalize_refuses_a_normalizer_that_returns_no_object():
    """A normalizer must return a JSON object; anything else is the program's bug."""
    with pytest.raises(ConfigurationError):
        normalize({"x": 1}, [lambda _arguments, _context: ["x"]], SEED)


# --- canonical JSON ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": 2}, b'{"a":2,"b":1}'),
        ({"a": [1, {"d": None, "c": True}]}, b'{"a":[1,{"c":true,"d":null}]}'),
        (1.0, b"1"),
        (-0.0, b"0"),
        (1e21, b"1e+21"),
        (1e-7, b"1e-7"),
        (0.000001, b"0.000001"),
        (SAFE, b"9007199254740991"),
        (-SAFE, b"-9007199254740991"),
        ("\u20ac$\x0f\nA'B\"\\/\x7f", b'"\xe2\x82\xac$\\u000f\\nA\'B\\"\\\\/\x7f"'),
        ("\x00\x08\t\x0c\r\x1f", b'"\\u0000\\b\\t\\f\\r\\u001f"'),
        # UTF-16 order puts U+1F600 (D83D DE00) before U+FB33; code-point order would not
        ({"\ufb33": 1, "\U0001f600": 2}, '{"\U0001f600":2,"\ufb33":1}'.encode()),
        ({"\ue000": 1, "\U00010000": 2, "z": 3}, '{"z":3,"\U00010000":2,"\ue000":1}'.encode()),
    ],
)
def test_canonical_json_table(value, expected):
    """Known values serialize to their RFC 8785 bytes."""
    assert canonical_json(value) == expected


@pytest.mark.parametrize(
    ("value", "pointer", "recoverable"),
    [
        (2**53, None, True),
        (-(2**53), None, True),
        ({"amount": 2**63}, "/amount", True),
        ({"a": [1, {"b/c~": 10**5000}]}, "/a/1/b~1c~0", True),  # too long even to print
        ({"x": float("nan")}, "/x", True),
        ([1.5, float("-inf")], "/1", True),
        ({"s": "\ud800"}, "/s", True),  # unpaired surrogate
        ({"\udfff": 1}, None, True),
        ({"x": {1: "a"}}, "/x", False),  # non-string key: a normalizer's bug
        ({"x": {1, 2}}, "/x", False),
        ({"when": datetime(2026, 7, 20, tzinfo=UTC)}, "/when", False),
    ],
)
def test_values_without_an_exact_canonical_form_are_rejected(value, pointer, recoverable):
    """Out-of-range integers, NaN, bad Unicode and non-JSON types are refused, with a pointer."""
    problem = rejection_of(canonical_json, value)
    assert (problem.kind, problem.code) == ("normalization", "not_canonicalizable")
    assert (problem.pointer, problem.recoverable) == (pointer, recoverable)


def test_deep_nesting_is_rejected_not_crashed():
    """Nesting past the recursion limit becomes a rejection, not a RecursionError."""
    value: list = []
    for _ in range(20_000):
        value = [value]
    assert rejection_of(canonical_json, value).code == "not_canonicalizable"


# Characters where the fast path could go wrong: escapes, DEL, separators JSON
# leaves alone, BOM, the ends of the BMP and astral characters (UTF-16 order).
TRICKY = st.sampled_from(
    [
        "\x00", "\x07", "\x08", "\t", "\n", "\x0b", "\x0c", "\r", "\x1f", " ", '"', "\\", "/",
        "\x7f", "\x80", "\u2028", "\u2029", "\ufeff", "\ud7ff", "\ue000", "\ufb33", "\uffff",
        "\U00010000", "\U0001f600", "\U0010ffff", "a", "A", "é",
    ]
)  # fmt: skip
CHARS = st.one_of(TRICKY, st.characters(codec="utf-8"))  # no surrogates
KEYS = st.text(CHARS, max_size=4)
INTS = st.one_of(st.integers(-SAFE, SAFE), st.sampled_from([0, -1, SAFE, -SAFE, 2**31, 2**32]))
# Floats around the fast path's edges (1e-4, 1e16, 2**52, integral values) and anywhere.
EDGE_FLOATS = st.sampled_from(
    [
        *(1e-4, -1e-4, 0.00010000000000000002, 9.999999999999999e-5, 0.1, 0.5, 1.5, 129.95),
        *(2.0**52 - 0.5, 2.0**52, 1e16, 9999999999999998.0, 1e21, 1e-7, 5e-324, -0.0, 0.0),
    ]
)
FLOATS = st.one_of(EDGE_FLOATS, st.floats(allow_nan=False, allow_infinity=False))
PLAIN = st.recursive(
    st.none() | st.booleans() | INTS | FLOATS | st.text(CHARS, max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=20,
)
ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats()
    | st.text(st.characters() | TRICKY | st.sampled_from(["\ud800", "\udfff"]), max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=150)
@given(PLAIN)
def test_fast_path_output_equals_rfc8785(value):
    """On any finite JSON value the json-module fast path, where taken, writes rfc8785's bytes."""
    assert canonical_json(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        ({"title": "x", "n": [1, None, True, {"k": "v"}]}, True),
        ({"é": "\U0001f600", "\ufb33": ["\x00"]}, True),  # astral *values* are fine
        ("text", True),
        (SAFE, True),
        ({"price": 129.95, "ratio": [0.5, -0.0001, 4503599627370495.5]}, True),
        ({"x": 1.0}, False),  # integral: repr "1.0", ES6 "1"
        ({"x": -0.0}, False),
        ({"x": 0.00009}, False),  # repr "9e-05", ES6 "0.00009"
        ({"x": 1e16}, False),
        ({"x": float("nan")}, False),
        ({"x": float("inf")}, False),
        ({"x": SAFE + 1}, False),
        ([True, 2**53], False),
        ({"\U0001f600": 1}, False),  # UTF-16 key order differs from code-point order
        ({1: "a"}, False),
        (("a",), False),
    ],
)
def test_fast_path_takes_only_what_it_can_write_exactly(value, plain):
    """Integral or tiny floats, unsafe ints, astral keys and non-JSON types go to rfc8785."""
    assert normalize_module._is_plain(value) is plain


def test_json_key_order_would_be_wrong_for_astral_keys():
    """Why astral keys leave the fast path: json sorts by code point, RFC 8785 by UTF-16."""
    value = {"\ufb33": 1, "\U0001f600": 2}
    assert normalize_module._encode_plain(value).encode() != rfc8785.dumps(value)
    assert canonical_json(value) == rfc8785.dumps(value)


@settings(max_examples=100)
@given(st.dictionaries(st.text(TRICKY, max_size=3), INTS | st.text(TRICKY), max_size=6))
def test_fast_path_is_taken_for_bmp_keys_and_refused_for_astral_keys(value):
    """Only keys with a character above U+FFFF leave the fast path, and the bytes agree."""
    astral = any(max(key, default="a") >= "\U00010000" for key in value)
    assert normalize_module._is_plain(value) is not astral
    assert normalize_module._encode_plain(value).encode() == rfc8785.dumps(value) or astral


@settings(max_examples=120)
@given(ANY_JSON)
def test_canonical_json_agrees_with_rfc8785_or_both_refuse(value):
    """On any value (floats, huge ints, surrogates too) we match rfc8785 or both reject."""
    try:
        expected = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeError):
        with pytest.raises(Rejection):
            canonical_json(value)
    else:
        assert canonical_json(value) == expected


# --- digest --------------------------------------------------------------------------


def reference_digest(tenant: str, name: str, version: str, canonical: bytes) -> str:
    """Recompute a digest from the framing in digest's docstring, written independently."""
    sha = hashlib.sha256()
    for field in (b"toolbound/digest/v1", tenant.encode(), name.encode(), version.encode()):
        sha.update(struct.pack(">Q", len(field)) + field)
    sha.update(struct.pack(">Q", len(canonical)) + canonical)
    return f"sha256:{sha.hexdigest()}"


def test_digest_matches_the_documented_vector():
    """The example in digest's docstring holds, so other implementations can check themselves."""
    assert (
        digest(tenant="t", tool_name="echo", tool_version="1", canonical=b"{}")
        == "sha256:89afad8716c7ac5a0edefcfa5ce5e96ff966e5b4eb4ee118c6acbf0dfefb9229"
    )


@settings(max_examples=100)
@given(st.text(), st.text(), st.text(), st.binary())
def test_digest_follows_the_documented_framing(tenant, name, version, canonical):
    """Any inputs digest exactly as the documented length-prefixed framing says."""
    assert digest(
        tenant=tenant, tool_name=name, tool_version=version, canonical=canonical
    ) == reference_digest(tenant, name, version, canonical)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (("ab", "c", "1", b"{}"), ("a", "bc", "1", b"{}")),
        (("t", "ab", "1", b"{}"), ("t", "a", "b1", b"{}")),
        (("t", "n", "1.0", b"{}"), ("t", "n", "1.", b"0{}")),
        (("", "tn", "1", b"{}"), ("t", "n", "1", b"{}")),
        (("t", "n", "", b"1{}"), ("t", "n", "1", b"{}")),
    ],
)
def test_framing_is_unambiguous(left, right):
    """Moving bytes across a field boundary changes the digest."""
    names = ("tenant", "tool_name", "tool_version", "canonical")
    assert digest(**dict(zip(names, left, strict=True))) != digest(
        **dict(zip(names, right, strict=True))
    )


@settings(max_examples=100)
@given(st.binary(min_size=1, max_size=24), st.data())
def test_no_two_splits_of_the_same_bytes_collide(joined, data):
    """However one byte string is cut into the four fields, each cut has its own digest."""
    text = joined.hex()

    def cut():
        a, b, c = sorted(data.draw(st.lists(st.integers(0, len(text)), min_size=3, max_size=3)))
        return (text[:a], text[a:b], text[b:c], text[c:].encode())

    first, second = cut(), cut()
    names = ("tenant", "tool_name", "tool_version", "canonical")
    same = digest(**dict(zip(names, first, strict=True))) == digest(
        **dict(zip(names, second, strict=True))
    )
    assert same is (first == second)


def test_digest_is_prefixed_lowercase_sha256_hex():
    """Digests are 'sha256:' and 64 lowercase hex digits."""
    value = digest(tenant="t", tool_name="n", tool_version="1", canonical=b"{}")
    assert value.startswith("sha256:")
    assert len(value) == 71
    assert set(value[7:]) <= set("0123456789abcdef")


def test_digest_refuses_names_with_unpaired_surrogates():
    """Tenant and tool identity come from the runtime; un-encodable ones are its bug."""
    with pytest.raises(ConfigurationError):
        digest(tenant="\ud800", tool_name="n", tool_version="1", canonical=b"{}")


JSON_OBJECTS = st.dictionaries(
    KEYS,
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-SAFE, SAFE)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(CHARS, max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
        max_leaves=12,
    ),
    max_size=6,
)


def shuffled(value, rnd):
    """``value`` with every object's members in a random order."""
    if isinstance(value, dict):
        keys = list(value)
        rnd.shuffle(keys)
        return {key: shuffled(value[key], rnd) for key in keys}
    if isinstance(value, list):
        return [shuffled(item, rnd) for item in value]
    return value


def args_digest(arguments, tenant="acme", name="create_event", version="1.0.0"):
    """Digest ``arguments`` as the pipeline would, for a fixed tenant and tool."""
    return digest(
        tenant=tenant,
        tool_name=name,
        tool_version=version,
        canonical=canonical_json(arguments),
    )


@settings(max_examples=80)
@given(
    JSON_OBJECTS,
    st.randoms(use_true_random=False),
    st.sampled_from([None, 0, 2, "\t"]),
    st.sampled_from([(",", ":"), (", ", ": "), (" ,", " : ")]),
    st.booleans(),
)
def test_key_order_and_whitespace_never_change_the_digest(
    arguments, rnd, indent, separators, ascii_only
):
    """Re-serializing the same object any way at all, then parsing it, gives the same digest."""
    source = json.dumps(
        shuffled(arguments, rnd), indent=indent, separators=separators, ensure_ascii=ascii_only
    )
    assert args_digest(json.loads(source)) == args_digest(arguments)


@settings(max_examples=50)
@given(JSON_OBJECTS.filter(bool), st.data())
def test_changing_a_value_changes_the_digest(arguments, data):
    """Replacing any member's value with a different JSON value changes the digest."""
    key = data.draw(st.sampled_from(sorted(arguments)))
    changed = {**arguments, key: {"was": arguments[key]}}
    assert args_digest(changed) != args_digest(arguments)


@settings(max_examples=50)
@given(JSON_OBJECTS, KEYS)
def test_adding_a_member_changes_the_digest(arguments, key):
    """A new member, even a null one, changes the digest."""
    if key in arguments:
        del arguments[key]
    assert args_digest({**arguments, key: None}) != args_digest(arguments)


@settings(max_examples=50)
@given(JSON_OBJECTS, st.sampled_from(["tenant", "name", "version"]), st.text(min_size=1))
def test_changing_tenant_or_tool_changes_the_digest(arguments, field, suffix):
    """The same arguments under another tenant, tool name or version digest differently."""
    base = {"tenant": "acme", "name": "create_event", "version": "1.0.0"}
    other = {**base, field: base[field] + suffix}
    assert args_digest(arguments, **other) != args_digest(arguments, **base)


def test_equivalent_proposals_share_one_digest_after_normalization():
    """R5 end to end: 'tomorrow' in Shanghai and the ISO date it names digest the same."""
    normalizers = [date_fields("/date")]
    relative = normalize({"title": "standup", "date": "tomorrow"}, normalizers, SEED)
    absolute = normalize({"date": "2026-07-20", "title": "standup"}, normalizers, SEED)
    assert args_digest(relative) == args_digest(absolute)
    later = normalize(
        {"title": "standup", "date": "tomorrow"},
        normalizers,
        ctx("2026-07-19T20:00:00+00:00", "Asia/Shanghai"),
    )
    assert args_digest(later) != args_digest(relative)

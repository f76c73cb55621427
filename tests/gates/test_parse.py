"""The parse gate (R3): one strict JSON object, or a rejection that says exactly why."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbound._errors import ConfigurationError, Problem, Rejection
from toolbound.gates.parse import DEFAULT_LIMITS, ParseLimits, parse_arguments

CODES = {
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
}

FUZZ = settings(max_examples=150, deadline=None)


def rejected(data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> Problem:
    with pytest.raises(Rejection) as info:
        parse_arguments(data, limits)
    return info.value.problem


def nested(depth: int, inner: bytes = b"1") -> bytes:
    """An object holding arrays so that the whole document is ``depth`` levels deep."""
    return b'{"a":' + b"[" * (depth - 1) + inner + b"]" * (depth - 1) + b"}"


# --- one case per code ---------------------------------------------------------------

ONE_PER_CODE = [
    pytest.param(b"{}" * 600_000, "too_large", id="too_large"),
    pytest.param(b'\xef\xbb\xbf{"a":1}', "byte_order_mark", id="byte_order_mark"),
    pytest.param(b'{"a":"\xff"}', "invalid_utf8", id="invalid_utf8"),
    pytest.param(b'{"a":"\xed\xa0\x80"}', "invalid_utf8", id="utf8_encoded_surrogate"),
    pytest.param(b'{"a":"\xc0\xaf"}', "invalid_utf8", id="overlong_utf8"),
    pytest.param(b"", "not_an_object", id="empty"),
    pytest.param(b" \n\t ", "not_an_object", id="only_whitespace"),
    pytest.param(b"[1,2]", "not_an_object", id="array"),
    pytest.param(b'"order"', "not_an_object", id="string"),
    pytest.param(b"42", "not_an_object", id="number"),
    pytest.param(b"null", "not_an_object", id="null"),
    pytest.param(b"true", "not_an_object", id="boolean"),
    pytest.param(nested(65), "too_deep", id="too_deep"),
    pytest.param(b'{"a":1', "truncated", id="truncated"),
    pytest.param(b'{"a":[1,2,{"b":', "truncated", id="truncated_nested"),
    pytest.param(b'{"a":1,,"b":2}', "invalid_json", id="invalid_json"),
    pytest.param(b"order_id=A-104", "invalid_json", id="not_json_at_all"),
    pytest.param(b"{'a': 1}", "invalid_json", id="single_quotes"),
    pytest.param(b'{"a":1} {"b":2}', "trailing_data", id="trailing_data"),
    pytest.param(b'{"a":1,"a":2}', "duplicate_key", id="duplicate_key"),
    pytest.param(b'{"a":NaN}', "non_finite_number", id="nan"),
    pytest.param(b'{"a":Infinity}', "non_finite_number", id="infinity"),
    pytest.param(b'{"a":-Infinity}', "non_finite_number", id="minus_infinity"),
    pytest.param(b'{"a":1e400}', "non_finite_number", id="overflowing_numeral"),
    pytest.param(b'{"a":' + b"7" * 5000 + b"}", "number_out_of_range", id="long_integer"),
    pytest.param(b'{"a":1e-400}', "number_underflow", id="underflowing_numeral"),
    pytest.param(b'{"a":"\\ud800"}', "lone_surrogate", id="lone_surrogate"),
]


@pytest.mark.parametrize(("data", "code"), ONE_PER_CODE)
def test_each_failure_has_its_own_code(data: bytes, code: str) -> None:
    """Each way of failing R3 is rejected with its exact machine-readable code."""
    problem = rejected(data)
    assert problem.code == code
    assert problem.kind == "parse"
    assert problem.recoverable is True
    assert problem.hint
    assert problem.message


def test_the_table_covers_every_code() -> None:
    """The table above exercises every code the gate can give."""
    assert {param.values[1] for param in ONE_PER_CODE} == CODES


def test_problems_are_json_encodable() -> None:
    """Every problem, even one about a lone surrogate in a key, encodes as JSON."""
    for data in (b'{"\\ud800":{"k":1,"k":2}}', b'{"\\udc00":1}', b'{"\\ud800x":NaN}'):
        problem = rejected(data)
        json.dumps(problem.as_json(), ensure_ascii=False).encode()


# --- what is accepted ----------------------------------------------------------------

VALID = [
    b"{}",
    b'{"order_id":"A-104"}',
    b'  \r\n\t{"a":1}',
    b'{"a":1}  ',
    b'{"a":1}\n',
    b'{ "a" : [ 1 , 2.5 , -0 , -0.0 , 1e10 , 1E-5 , true , false , null ] }',
    b'{"nested":{"x":[{"y":{}}],"z":[]}}',
    '{"name":"café — 東京 😀"}'.encode(),
    b'{"emoji":"\\ud83d\\ude00","e":"\\u00e9","esc":"\\"\\\\\\/\\b\\f\\n\\r\\t"}',
    b'{"literal":"\\\\ud800"}',
    b'{"brackets":"[[[{{{","closers":"]]]}}}"}',
    b'{"":0,"a":{"a":{"a":1}}}',
    b'{"big":' + b"9" * 4300 + b"}",
    b'{"max":1.7976931348623157e308,"tiny":5e-324,"zero":0e-400}',
    b'{"A":1,"a":2}',
]


@pytest.mark.parametrize("data", VALID)
def test_valid_objects_parse_like_json_loads(data: bytes) -> None:
    """Strict, valid objects come back exactly as the stdlib reads them."""
    assert parse_arguments(data) == json.loads(data)


def test_trailing_whitespace_is_accepted() -> None:
    """Whitespace after the object is not trailing data."""
    assert parse_arguments(b'{"a":1}  ') == {"a": 1}


def test_raw_bytes_are_left_unchanged() -> None:
    """The gate only reads its input: the caller's bytes are the same afterwards."""
    raw = bytearray(b'{"order_id":"A-104","note":"\\"quoted\\" [x]","n":[1,2]}')
    before = bytes(raw)
    parse_arguments(raw)  # type: ignore[arg-type]
    assert raw == before
    with pytest.raises(Rejection):
        parse_arguments(raw + b"}")  # type: ignore[arg-type]
    assert raw == before


def test_result_is_a_fresh_plain_dict() -> None:
    """The result is a plain dict of plain values, not a hook's subclass."""
    value = parse_arguments(b'{"a":{"b":[{"c":1}]}}')
    assert type(value) is dict
    assert type(value["a"]) is dict
    assert parse_arguments(b'{"a":1}') is not parse_arguments(b'{"a":1}')


# --- size ----------------------------------------------------------------------------


def test_huge_payload_under_the_limit_parses() -> None:
    """A payload just under the default 1 MiB limit is parsed in full."""
    rows = [{"id": i, "text": "x" * 80, "values": [i, i / 2]} for i in range(7_500)]
    data = json.dumps({"rows": rows}).encode()
    assert 900_000 < len(data) <= DEFAULT_LIMITS.max_bytes
    assert parse_arguments(data) == {"rows": rows}


def test_size_limit_is_inclusive() -> None:
    """Exactly max_bytes is accepted; one byte more is too large."""
    limits = ParseLimits(max_bytes=9)
    assert parse_arguments(b'{"a":123}', limits) == {"a": 123}
    problem = rejected(b'{"a":1234}', limits)
    assert problem.code == "too_large"
    assert "10 bytes" in problem.message
    assert "9" in problem.message


def test_size_is_checked_before_decoding() -> None:
    """Oversized bytes are too_large even when they are not UTF-8 at all."""
    assert rejected(b"\xff" * 11, ParseLimits(max_bytes=10)).code == "too_large"


# --- depth ---------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2, 5, 64])
def test_nesting_at_the_limit_passes_and_one_more_fails(limit: int) -> None:
    """Depth counts every object and array, the top level being 1."""
    limits = ParseLimits(max_depth=limit)
    at_limit = b"{}" if limit == 1 else nested(limit)
    assert parse_arguments(at_limit, limits) == json.loads(at_limit)
    assert rejected(nested(limit + 1), limits).code == "too_deep"


def test_default_depth_limit_is_64() -> None:
    """DEFAULT_LIMITS allows 64 levels of mixed objects and arrays, not 65."""

    def objects(depth: int) -> bytes:
        return b'{"k":' * (depth - 1) + b"{}" + b"}" * (depth - 1)

    assert parse_arguments(objects(64))
    assert parse_arguments(nested(64))
    assert rejected(objects(65)).code == "too_deep"
    assert rejected(nested(65)).code == "too_deep"


DEPTH_CASES = [
    pytest.param(b'{"s":"' + b"[" * 200 + b'"}', None, id="openers_in_a_string"),
    pytest.param(b'{"s":"\\"' + b"[" * 200 + b'"}', None, id="after_an_escaped_quote"),
    pytest.param(b'{"b":"\\\\","s":"' + b"{" * 200 + b'"}', None, id="after_escaped_backslash"),
    pytest.param(
        b'{"s":"' + b"]" * 80 + b'","d":' + nested(65)[5:], "too_deep", id="closers_in_a_string"
    ),
    pytest.param(b'{"a":' + b"[" * 100, "too_deep", id="deep_and_truncated"),
    pytest.param(b'{"a":' + b"[[]," * 70 + b"1" + b"]" * 70 + b"}", "too_deep", id="siblings"),
    pytest.param(b'{"a":[' + b",".join([b"[[[1]]]"] * 500) + b"]}", None, id="many_shallow_arrays"),
    pytest.param(b'{"a":[' + b"[" * 10 + b"}" * 3, "invalid_json", id="unbalanced_shallow"),
    pytest.param(b'{"a":[[],' + b"[" * 62 + b"]" * 62 + b"]}", None, id="chain_at_the_limit"),
    pytest.param(b'{"a":[[],' + b"[" * 63 + b"]" * 63 + b"]}", "too_deep", id="chain_past_it"),
    pytest.param(b'{"a":[[],' + b"[" * 63, "too_deep", id="chain_past_it_truncated"),
    pytest.param(b'{"a":[[],' + b"[" * 62, "truncated", id="chain_at_it_truncated"),
    pytest.param(
        b'{"a":[' + b",".join([b"[" * 62 + b"]" * 62] * 300) + b"]}", None, id="chains_at_the_limit"
    ),
]


@pytest.mark.parametrize(("data", "code"), DEPTH_CASES)
def test_only_brackets_outside_strings_count_toward_depth(data: bytes, code: str | None) -> None:
    """Brackets inside strings neither add depth nor hide it."""
    if code is None:
        assert parse_arguments(data) == json.loads(data)
    else:
        assert rejected(data).code == code


def test_nesting_beyond_the_interpreter_is_too_deep_not_a_crash() -> None:
    """With a huge max_depth, nesting past what Python can recurse is still too_deep."""
    limits = ParseLimits(max_depth=1_000_000)
    assert rejected(nested(100_000), limits).code == "too_deep"


# --- syntax: truncated, invalid, trailing --------------------------------------------

TRUNCATED = [
    b"{",
    b"{ ",
    b'{"',
    b'{"ord',
    b'{"a"',
    b'{"a":',
    b'{"a": ',
    b'{"a":t',
    b'{"a":fals',
    b'{"a":nu',
    b'{"a":-',
    b'{"a":12',
    b'{"a":1.',
    b'{"a":1.5e',
    b'{"a":1e+',
    b'{"a":-0.',
    b'{"a":"abc',
    b'{"a":"ab\\',
    b'{"a":"\\u00',
    b'{"a":"\\ud83d',
    b'{"a":"\\ud83d\\ude0',
    b'{"a":[1,2',
    b'{"a":[1,2,',
    b'{"a":1,',
    b'{"a":1,\n  ',
    b'{"a":{"b":[true',
    b'{"a":"caf\xc3',
    b'{"a":"\xe2\x82',
]


@pytest.mark.parametrize("data", TRUNCATED)
def test_input_ending_mid_value_is_truncated(data: bytes) -> None:
    """Bytes that a longer stream could still complete are truncated, not invalid."""
    assert rejected(data).code == "truncated"


INVALID = [
    (b'{"a":1,,"b":2}', 7),
    (b'{"a":1 "b":2}', 7),
    (b'{"a" 1}', 5),
    (b'{"a":tx}', 5),
    (b'{"a":tr }', 5),
    (b'{"a":01}', 6),
    (b'{"a":1.e5}', 6),
    (b'{"a":.5}', 5),
    (b'{"a":+1}', 5),
    (b'{"a":-}', 5),
    (b'{"a":1 2', 7),
    (b'{"a":1,}', 7),
    (b'{"a":[1,]}', 8),
    (b"{a:1}", 1),
    (b'{"a":"\\u12zz"}', 7),
    (b'{"a":"\\x"}', 6),
    (b'{"a":"x\ny"}', 7),
    (b'{"a":-Inf', 5),
    ('{"é":1,,}'.encode(), 8),
    (b"\x00{}", 0),
]


@pytest.mark.parametrize(("data", "byte"), INVALID)
def test_syntax_errors_are_invalid_json_with_their_byte(data: bytes, byte: int) -> None:
    """A syntax error a longer input could not fix is invalid_json at a byte offset."""
    problem = rejected(data)
    assert problem.code == "invalid_json"
    assert f"at byte {byte}" in problem.message


@pytest.mark.parametrize(
    "data", [b'{"a":1}x', b'{"a":1}}', b'{"a":1}\n{"b":2}', b'{"a":1} []', b'{"a":1} \xc3\xa9']
)
def test_anything_after_the_object_is_trailing_data(data: bytes) -> None:
    """One object per proposal: any non-whitespace after it is trailing_data."""
    problem = rejected(data)
    assert problem.code == "trailing_data"
    assert "at byte 7" in problem.message


def test_utf8_error_after_a_complete_object_is_invalid_utf8() -> None:
    """A cut character outside any string is mis-encoding, not truncation."""
    assert rejected(b'{"a":1}\xe2\x82').code == "invalid_utf8"
    assert rejected(b'{"a":\xe2\x82').code == "invalid_utf8"


def test_invalid_utf8_names_the_byte() -> None:
    """The message gives the offset of the first bad byte."""
    problem = rejected(b'{"abc":"\xff"}')
    assert problem.code == "invalid_utf8"
    assert "byte 8" in problem.message


def test_byte_order_mark_after_whitespace_is_invalid_json() -> None:
    """U+FEFF is not JSON whitespace anywhere; only a leading BOM gets its own code."""
    assert rejected(b'\xef\xbb\xbf{"a":1}').code == "byte_order_mark"
    assert rejected(b' \xef\xbb\xbf{"a":1}').code == "invalid_json"


# --- duplicate keys ------------------------------------------------------------------

DUPLICATES = [
    (b'{"a":1,"a":2}', "", '"a"'),
    (b'{"a":1,"b":2,"a":1}', "", '"a"'),
    (b'{"x":{"k":1,"k":1}}', "/x", '"k"'),
    (b'{"a":{"b":[0,{"c":1,"c":2}]}}', "/a/b/1", '"c"'),
    (b'{"list":[{},[],[{"ok":1}],[[{"d":1,"d":1}]]]}', "/list/3/0/0", '"d"'),
    (b'{"x/y":{"~t":{"k":1,"k":2}}}', "/x~1y/~0t", '"k"'),
    (b'{"s":"{\\"k\\":1,\\"k\\":2}","o":{"\\u006b":1,"k":2}}', "/o", '"k"'),
    ('{"é":1,"\\u00e9":2}'.encode(), "", '"\\u00e9"'),
]


@pytest.mark.parametrize(("data", "pointer", "key"), DUPLICATES)
def test_duplicate_keys_are_found_at_any_depth(data: bytes, pointer: str, key: str) -> None:
    """A repeated key is rejected with the pointer of its object and the key named."""
    problem = rejected(data)
    assert problem.code == "duplicate_key"
    assert problem.pointer == pointer
    assert key in problem.message
    assert "once" in (problem.hint or "")


def test_keys_differing_only_in_escapes_are_not_duplicates_unless_equal() -> None:
    r"""Keys are compared after unescaping: "\u0041" is "A", "a" is not."""
    assert parse_arguments(b'{"\\u0041":1,"a":2}') == {"A": 1, "a": 2}
    assert rejected(b'{"\\u0041":1,"A":2}').code == "duplicate_key"


def test_a_very_long_duplicate_key_is_shortened_in_the_message() -> None:
    """The message stays short even when the key is not."""
    key = b'"' + b"k" * 5000 + b'"'
    problem = rejected(b"{" + key + b":1," + key + b":2}")
    assert problem.code == "duplicate_key"
    assert len(problem.message) < 200


# --- numbers -------------------------------------------------------------------------

NON_FINITE = [
    (b'{"a":NaN}', "/a", "NaN"),
    (b'{"a":[1,Infinity]}', "/a/1", "Infinity"),
    (b'{"a":{"b":-Infinity}}', "/a/b", "-Infinity"),
    (b'{"a":1e400}', "/a", "1e400"),
    (b'{"a":-1e400}', "/a", "-1e400"),
    (b'{"a":"NaN","b":[0, 2.5E+999]}', "/b/1", "2.5E+999"),
    (b'{"a":' + b"1" * 400 + b".0}", "/a", "111"),
]


@pytest.mark.parametrize(("data", "pointer", "token"), NON_FINITE)
def test_non_finite_numbers_are_rejected_with_their_pointer(
    data: bytes, pointer: str, token: str
) -> None:
    """NaN, ±Infinity and numerals that overflow a float are not JSON numbers."""
    problem = rejected(data)
    assert problem.code == "non_finite_number"
    assert problem.pointer == pointer
    assert token in problem.message


UNDERFLOW = [
    (b'{"a":1e-400}', "/a", "1e-400"),
    (b'{"a":-1e-400}', "/a", "-1e-400"),
    (b'{"a":[0, 2.5E-999]}', "/a/1", "2.5E-999"),
    (b'{"a":{"b":0.0001e-330}}', "/a/b", "0.0001e-330"),
    (b'{"a":1e-99999999999999999999}', "/a", "1e-99999999999999999999"),
    (b'{"a":0.' + b"0" * 400 + b"1}", "/a", "0.000"),
]


@pytest.mark.parametrize(("data", "pointer", "token"), UNDERFLOW)
def test_non_zero_numerals_that_round_to_zero_are_rejected(
    data: bytes, pointer: str, token: str
) -> None:
    """A numeral too small for a double is rejected like one too large, not read as 0.0."""
    problem = rejected(data)
    assert problem.code == "number_underflow"
    assert problem.kind == "parse"
    assert problem.pointer == pointer
    assert token in problem.message


ZEROS_AND_TINY = [
    (b"0", 0),
    (b"-0", 0),
    (b"0.0", 0.0),
    (b"-0.0", -0.0),
    (b"0e10", 0.0),
    (b"0E-999", 0.0),
    (b"-0.000e-99999", -0.0),
    (b"1e-300", 1e-300),
    (b"-2.5e-308", -2.5e-308),
    (b"5e-324", 5e-324),  # the smallest subnormal
    (b"3e-324", 5e-324),  # rounds up to it, not down to zero
    (b"1" + b"0" * 400 + b"e-400", 1.0),
]


@pytest.mark.parametrize(("numeral", "value"), ZEROS_AND_TINY)
def test_zero_in_any_spelling_and_tiny_non_zero_numbers_are_accepted(
    numeral: bytes, value: float
) -> None:
    """Zero written any way is zero; a number a double can hold, however small, is kept."""
    parsed = parse_arguments(b'{"a":' + numeral + b"}")["a"]
    assert parsed == value
    assert type(parsed) is type(value)
    assert str(parsed).startswith("-") == str(value).startswith("-")


def test_integers_past_the_interpreter_limit_are_out_of_range() -> None:
    """An integer int() refuses becomes number_out_of_range, never a ValueError."""
    limit = sys.get_int_max_str_digits()
    assert limit > 0
    data = b'{"ok":1,"n":[0,' + b"9" * (limit + 1) + b"]}"
    problem = rejected(data)
    assert problem.code == "number_out_of_range"
    assert problem.pointer == "/n/1"
    assert str(limit) in problem.message
    negative = parse_arguments(b'{"n":-' + b"9" * limit + b"}")
    assert negative == {"n": -int("9" * limit)}


# --- lone surrogates -----------------------------------------------------------------

LONE = [
    (b'{"a":"\\ud800"}', "/a"),
    (b'{"a":"\\uDBFFx"}', "/a"),
    (b'{"a":"\\udc00"}', "/a"),
    (b'{"a":"\\ude00\\ud83d"}', "/a"),
    (b'{"a":"\\ud83d\\ud83d\\ude00"}', "/a"),
    (b'{"a":["ok",{"b":"\\ud83d\\ude00\\ude00"}]}', "/a/1/b"),
    (b'{"\\ud800":1}', ""),
    (b'{"o":{"x\\udfffy":1}}', "/o"),
    (b'{"a":"\\\\\\ud800"}', "/a"),
    (b'{"a":"\\\\ud83d\\ude00"}', "/a"),
    (b'{"a":"\\ud800\\\\udc00"}', "/a"),
]


@pytest.mark.parametrize(("data", "pointer"), LONE)
def test_unpaired_surrogate_escapes_are_rejected(data: bytes, pointer: str) -> None:
    r"""A \uD800-style escape that is not half of a valid pair is lone_surrogate."""
    problem = rejected(data)
    assert problem.code == "lone_surrogate"
    assert problem.pointer == pointer


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":"\\ud83d\\ude00"}',
        b'{"a":"\\uD83D\\uDE00 and \\uDBFF\\uDFFF"}',
        b'{"a":"\\\\ud800"}',
        b'{"a":"\\\\\\\\ud800"}',
        b'{"a":"\\ud7ff\\ue000"}',
    ],
)
def test_paired_or_literal_surrogate_text_is_accepted(data: bytes) -> None:
    """Valid pairs, and text that only looks like an escape, pass."""
    assert parse_arguments(data) == json.loads(data)


# --- limits --------------------------------------------------------------------------


def test_default_limits() -> None:
    """By default the gate accepts 1 MiB and 64 levels."""
    assert ParseLimits(max_bytes=1_048_576, max_depth=64) == DEFAULT_LIMITS


@pytest.mark.parametrize("limits", [{"max_bytes": 1}, {"max_depth": 0}, {"max_depth": -3}])
def test_limits_that_reject_everything_are_a_configuration_error(limits: dict[str, int]) -> None:
    """Limits no object could meet are a developer mistake, raised at construction."""
    with pytest.raises(ConfigurationError):
        ParseLimits(**limits)


# --- properties ----------------------------------------------------------------------

JSON_BITS = st.sampled_from(
    (
        *(b"{", b"}", b"[", b"]", b'"', b":", b",", b" ", b"\t", b"\\", b"\\u", b"d800", b"dc00"),
        *(b"1", b"-", b".", b"e", b"0", b"NaN", b"Infinity", b"true", b"nul", b"a", b"\xc3\xa9"),
        *(b"\xff", b"\xe2\x82", b"\xef\xbb\xbf", b'"k"', b'{"k":1,"k":2}', b"1e999", b"00e9"),
    )
)
JSONISH = st.lists(JSON_BITS, max_size=40).map(b"".join)


def assert_parses_or_rejects(data: bytes, limits: ParseLimits) -> None:
    problem: Problem | None = None
    try:
        value = parse_arguments(data, limits)
    except Rejection as rejection:
        problem = rejection.problem
    if problem is None:
        # Whatever passes is strict JSON that the stdlib reads the same way.
        assert value == json.loads(data.decode("utf-8"))
        assert type(value) is dict
    else:
        assert problem.kind == "parse"
        assert problem.code in CODES
        assert problem.recoverable
        json.dumps(problem.as_json())


@FUZZ
@given(data=st.binary(max_size=200) | JSONISH, depth=st.sampled_from([1, 3, 64]))
def test_any_bytes_give_a_value_or_a_rejection(data: bytes, depth: int) -> None:
    """No input makes the gate raise anything but Rejection."""
    assert_parses_or_rejects(data, ParseLimits(max_depth=depth))


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=16,
)
OBJECTS = st.dictionaries(st.text(max_size=8), VALUES, max_size=5)


@FUZZ
@given(obj=OBJECTS, ascii_only=st.booleans())
def test_generated_objects_parse_like_json_loads(
    obj: dict[str, object], *, ascii_only: bool
) -> None:
    """Any finite, duplicate-free, shallow object round-trips like json.loads."""
    text = json.dumps(obj, ensure_ascii=ascii_only)
    assert parse_arguments(text.encode()) == json.loads(text)


@settings(max_examples=60, deadline=None)
@given(obj=OBJECTS, ascii_only=st.booleans())
def test_every_proper_prefix_of_an_object_is_truncated(
    obj: dict[str, object], *, ascii_only: bool
) -> None:
    """Cutting a valid document anywhere before its end gives truncated, never a value."""
    data = json.dumps(obj, ensure_ascii=ascii_only).encode()
    for cut in range(1, len(data)):
        problem = rejected(data[:cut])
        assert problem.code == "truncated", (data[:cut], problem)


@FUZZ
@given(obj=OBJECTS, where=st.integers(min_value=0), junk=JSON_BITS)
def test_mutated_documents_give_a_value_or_a_rejection(
    obj: dict[str, object], where: int, junk: bytes
) -> None:
    """Deleting or inserting bytes inside a valid document never crashes the gate."""
    data = json.dumps(obj).encode()
    at = where % (len(data) + 1)
    assert_parses_or_rejects(data[:at] + data[at + 1 :], DEFAULT_LIMITS)
    assert_parses_or_rejects(data[:at] + junk + data[at:], DEFAULT_LIMITS)

"""R15: bytes → server-sent events, per the WHATWG rules, whatever the chunking.

The rule table exercises each WHATWG parsing rule once. The Hypothesis properties
check the incremental decoder against a second, deliberately naive implementation
written straight from the spec (decode everything, split lines with a regex), and
that splitting the same bytes anywhere yields the same events.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbound._errors import ConfigurationError
from toolbound.streams import JSONLinesDecoder, SSEDecoder, SSEEvent, StreamError, parse_event

Row = tuple[str, str | None, int | None]  # (event, data, id, retry) without the type


def ev(data: str, event: str = "message", event_id: str | None = None, retry: int | None = None):
    return SSEEvent(event=event, data=data, id=event_id, retry=retry)


def decode(raw: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder()
    return decoder.feed(raw) + decoder.close()


def decode_chunks(chunks: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    out: list[SSEEvent] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    return out + decoder.close()


# -- the WHATWG rules, one row each ---------------------------------------------------

RULES = [
    ("LF ends a line", b"data: a\n\n", [ev("a")]),
    ("CR ends a line", b"data: a\r\r", [ev("a")]),
    ("CRLF ends a line", b"data: a\r\n\r\n", [ev("a")]),
    ("mixed line ends in one event", b"data: a\r\ndata: b\rdata: c\n\n", [ev("a\nb\nc")]),
    ("CR CR is two line ends, not one", b"data: a\r\rdata: b\r\r", [ev("a"), ev("b")]),
    ("a leading BOM is dropped", b"\xef\xbb\xbfdata: a\n\n", [ev("a")]),
    ("only one leading BOM is dropped", b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\n", []),
    ("a BOM later is not dropped", b"data: a\n\n\xef\xbb\xbfdata: b\n\n", [ev("a")]),
    ("a comment line is ignored", b": heartbeat\ndata: a\n: again\n\n", [ev("a")]),
    ("a comment alone dispatches nothing", b":ping\n\n: keep-alive\r\n\r\n", []),
    ("data lines join with LF", b"data: a\ndata: b\n\n", [ev("a\nb")]),
    ("an empty data line still counts", b"data\n\n", [ev("")]),
    ("data with an empty value counts", b"data:\n\n", [ev("")]),
    ("two empty data lines give one LF", b"data:\ndata:\n\n", [ev("\n")]),
    ("event sets the type", b"event: add\ndata: x\n\n", [ev("x", "add")]),
    (
        "the type resets after dispatch",
        b"event: add\ndata: x\n\ndata: y\n\n",
        [ev("x", "add"), ev("y")],
    ),
    ("an empty type is message", b"event:\ndata: x\n\n", [ev("x")]),
    ("a field without colon has an empty value", b"event\ndata: x\n\n", [ev("x")]),
    ("no data: not dispatched", b"event: add\nid: 1\n\n", []),
    ("no data: the type still resets", b"event: add\n\ndata: y\n\n", [ev("y", event_id=None)]),
    ("id sets the last event id", b"id: 7\ndata: x\n\n", [ev("x", event_id="7")]),
    (
        "the last event id persists",
        b"id: 7\ndata: x\n\ndata: y\n\n",
        [ev("x", event_id="7"), ev("y", event_id="7")],
    ),
    ("id set by an undispatched block", b"id: 9\n\ndata: y\n\n", [ev("y", event_id="9")]),
    ("an id with NUL is ignored", b"id: 7\n\nid: a\x00b\ndata: x\n\n", [ev("x", event_id="7")]),
    (
        "an empty id clears it",
        b"id: 7\ndata: x\n\nid\ndata: y\n\n",
        [ev("x", event_id="7"), ev("y")],
    ),
    ("retry with digits", b"retry: 1500\ndata: x\n\n", [ev("x", retry=1500)]),
    ("retry with a letter is ignored", b"retry: 15a\ndata: x\n\n", [ev("x")]),
    ("retry with a sign is ignored", b"retry: -1\ndata: x\n\n", [ev("x")]),
    ("retry with non-ASCII digits is ignored", "retry: ١٢\ndata: x\n\n".encode(), [ev("x")]),
    ("an empty retry is ignored", b"retry:\ndata: x\n\n", [ev("x")]),
    (
        "retry applies to its own event only",
        b"retry: 5\ndata: x\n\ndata: y\n\n",
        [ev("x", retry=5), ev("y")],
    ),
    ("one space after the colon is dropped", b"data:  two\n\n", [ev(" two")]),
    ("no space after the colon is fine", b"data:x\n\n", [ev("x")]),
    ("a colon in the value is kept", b"data: a: b\n\n", [ev("a: b")]),
    ("unknown fields are ignored", b"foo: bar\nDATA: no\ndata: x\n\n", [ev("x")]),
    ("multi-byte UTF-8 is decoded", "data: 爱\n\n".encode(), [ev("爱")]),
    ("an event without its blank line is dropped", b"data: a\n\ndata: b\n", [ev("a")]),
    ("an unterminated last line is dropped", b"data: a\n\ndata: b", [ev("a")]),
    ("a last CR ends the line, not the event", b"data: a\r", []),
]


@pytest.mark.parametrize(("raw", "expected"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_whatwg_rule(raw, expected):
    """Each WHATWG parsing rule gives exactly the events the spec says."""
    assert decode(raw) == expected


@pytest.mark.parametrize(("raw", "expected"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_whatwg_rule_byte_by_byte(raw, expected):
    """The same rules hold when the bytes arrive one at a time."""
    assert decode_chunks([raw[i : i + 1] for i in range(len(raw))]) == expected


def test_cr_then_lf_across_chunks_is_one_line_end():
    """A CR ending one chunk and an LF starting the next are one line end, not two."""
    assert decode_chunks([b"data: a\r", b"\ndata: b\r\n\r\n"]) == [ev("a\nb")]
    assert decode_chunks([b"data: a\r", b"", b"\n", b"data: b\n\n"]) == [ev("a\nb")]


def test_character_split_across_chunks():
    """A chunk may end inside a UTF-8 character; the character arrives whole."""
    raw = "data: 爱\n\n".encode()
    cut = raw.index("爱".encode()) + 1
    decoder = SSEDecoder()
    assert decoder.feed(raw[:cut]) == []
    assert decoder.feed(raw[cut:]) == [ev("爱")]


def test_bom_split_across_chunks():
    """A byte order mark split over two chunks is still dropped once."""
    assert decode_chunks([b"\xef\xbb", b"\xbfdata: a\n\n"]) == [ev("a")]


@pytest.mark.parametrize(
    "raw",
    [b"data: \xff\n\n", b"data: \xc3\x28\n\n", b"data: \xed\xa0\x80\n\n", b"data: \xc0\xaf\n\n"],
    ids=["invalid byte", "bad continuation", "encoded surrogate", "overlong"],
)
def test_invalid_utf8_raises(raw):
    """Invalid UTF-8 raises StreamError(invalid_utf8), never a replacement character."""
    with pytest.raises(StreamError) as info:
        decode(raw)
    assert info.value.code == "invalid_utf8"


def test_events_before_invalid_bytes_are_dispatched_first():
    """Events completed before a bad byte come out, whole or byte by byte; then the error."""
    raw = b"data: a\n\ndata: b\n\ndata: \xff\n\n"
    decoder = SSEDecoder()
    assert decoder.feed(raw) == [ev("a"), ev("b")]
    for again in (lambda: decoder.feed(b"data: c\n\n"), decoder.close):
        with pytest.raises(StreamError):
            again()
    decoder = SSEDecoder()
    got: list[SSEEvent] = []

    def byte_by_byte():
        for i in range(len(raw)):
            got.extend(decoder.feed(raw[i : i + 1]))

    with pytest.raises(StreamError):
        byte_by_byte()
    assert got == [ev("a"), ev("b")]


def test_jsonl_objects_before_a_bad_line_are_returned_first():
    """As with SSE, JSON lines before a bad one come out first; the error follows."""
    decoder = JSONLinesDecoder()
    assert decoder.feed(b'{"a":1}\n{oops\n{"b":2}\n') == [{"a": 1}]
    with pytest.raises(StreamError):
        decoder.feed(b"")
    with pytest.raises(StreamError):
        decoder.close()


def test_stream_ending_inside_a_character_raises_at_close():
    """Bytes that end inside a character fail at close()."""
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\n\xe7\x88") == [ev("a")]
    with pytest.raises(StreamError) as info:
        decoder.close()
    assert info.value.code == "invalid_utf8"


def test_feed_after_close_is_misuse():
    """Feeding a closed decoder is a programming error, not a stream error."""
    decoder = SSEDecoder()
    decoder.close()
    with pytest.raises(ConfigurationError):
        decoder.feed(b"data: a\n\n")
    assert decoder.close() == []


def test_connection_state_changes_without_dispatch():
    """The retry time and last event id take effect even when nothing is dispatched."""
    decoder = SSEDecoder()
    assert decoder.feed(b"retry: 3000\nid: e1\n\n") == []
    assert (decoder.retry, decoder.last_event_id) == (3000, "e1")


def test_feed_data_matches_feed():
    """feed_data() returns exactly the data of the events feed() returns."""
    raw = b"event: a\ndata: 1\n\n: c\nid: 2\ndata: 2\ndata: 3\n\ndata: x"
    assert SSEDecoder().feed_data(raw) == [e.data for e in SSEDecoder().feed(raw)]


# -- an independent oracle, and the chunking properties --------------------------------


def reference(raw: bytes) -> list[SSEEvent]:
    """WHATWG event stream interpretation, written the naive way (whole input at once)."""
    text = raw.decode("utf-8")
    text = text.removeprefix("\ufeff")
    lines = re.split(r"\r\n|\r|\n", text)
    lines.pop()  # the unterminated remainder is discarded at end of stream
    out: list[SSEEvent] = []
    data: list[str] = []
    event_type, last_id, retry = "", "", None
    for line in lines:
        if line == "":
            if data:
                out.append(ev("\n".join(data), event_type or "message", last_id or None, retry))
            data, event_type, retry = [], "", None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event_type = value
        elif name == "id" and "\x00" not in value:
            last_id = value
        elif name == "retry" and re.fullmatch(r"[0-9]+", value):
            retry = int(value)
    return out


ENDS = st.sampled_from(["\n", "\r", "\r\n"])
VALUES = st.text(alphabet=st.sampled_from([*"ab :爱é😀\x00\ufeff", "1", "9"]), max_size=6)
LINES = st.one_of(
    st.tuples(
        st.sampled_from(["data", "event", "id", "retry", "x", ""]),
        st.sampled_from([":", ": ", ":  ", ""]),
        VALUES,
    ).map("".join),
    st.just(""),
    VALUES.map(lambda v: ":" + v),
)
STREAMS = st.tuples(st.booleans(), st.lists(st.tuples(LINES, ENDS).map("".join), max_size=14)).map(
    lambda t: ("\ufeff" if t[0] else "") + "".join(t[1])
)


@settings(max_examples=300)
@given(STREAMS)
def test_matches_the_reference(text):
    """The incremental decoder agrees with the naive whole-input reference."""
    raw = text.encode()
    assert decode(raw) == reference(raw)


@settings(max_examples=120)
@given(STREAMS)
def test_every_split_position_gives_the_same_events(text):
    """Splitting the bytes at any single position changes nothing (R15)."""
    raw = text.encode()
    whole = decode(raw)
    for cut in range(len(raw) + 1):
        assert decode_chunks([raw[:cut], raw[cut:]]) == whole


@settings(max_examples=200)
@given(STREAMS, st.lists(st.integers(min_value=0, max_value=12), min_size=1))
def test_random_chunk_sizes_give_the_same_events(text, sizes):
    """Any chunking, including empty chunks, gives the same events (R15)."""
    raw = text.encode()
    sizes = [*sizes, 1]  # empty chunks are allowed, but the cycle must make progress
    chunks, at, i = [], 0, 0
    while at < len(raw):
        size = sizes[i % len(sizes)]
        chunks.append(raw[at : at + size])
        at, i = at + size, i + 1
    assert decode_chunks(chunks) == decode(raw)


@settings(max_examples=200)
@given(st.binary(max_size=40), st.integers(min_value=1, max_value=7))
def test_arbitrary_bytes_fail_or_agree(raw, size):
    """On arbitrary bytes, chunked and whole decoding agree, or both reject the bytes."""

    def outcome(chunks):
        try:
            return decode_chunks(chunks)
        except StreamError as exc:
            return exc.code

    chunked = outcome([raw[i : i + size] for i in range(0, len(raw), size)])
    assert chunked == outcome([raw])


# -- JSON lines ------------------------------------------------------------------------


def test_jsonl_lines_and_a_final_line_without_lf():
    """Each line is one object; blank lines are skipped; a last line without LF counts."""
    decoder = JSONLinesDecoder()
    got = decoder.feed(b'{"a":1}\r\n\n{"b":')
    got += decoder.feed(b"2}\n")
    got += decoder.feed(b'{"c":"\xe7\x88')
    got += decoder.feed(b'\xb1"}')
    assert got == [{"a": 1}, {"b": 2}]
    assert decoder.close() == [{"c": "爱"}]


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b'{"a":1\n', "invalid_json"),
        (b"[1]\n", "not_an_object"),
        (b'{"a":NaN}\n', "invalid_json"),
        (b'{"a":"\xff"}\n', "invalid_utf8"),
        (b'{"a":1} {"b":2}\n', "invalid_json"),
    ],
    ids=["truncated", "array", "NaN", "bad utf-8", "two values"],
)
def test_jsonl_rejects(raw, code):
    """A line that is not one strict JSON object raises StreamError with a precise code."""
    with pytest.raises(StreamError) as info:
        JSONLinesDecoder().feed(raw)
    assert info.value.code == code


def test_jsonl_truncated_last_line_fails_at_close():
    """A cut-off last line is an error at close(), never silently dropped."""
    decoder = JSONLinesDecoder()
    assert decoder.feed(b'{"a":1}\n{"b":') == [{"a": 1}]
    with pytest.raises(StreamError):
        decoder.close()


@pytest.mark.parametrize(
    ("payload", "expected"),
    [('{"a": 1}', {"a": 1}), (' {"a": 1} \n', {"a": 1}), (b'{"x":"\xc3\xa9"}', {"x": "é"})],
)
def test_parse_event_accepts(payload, expected):
    """parse_event accepts one object, surrounding JSON whitespace, and UTF-8 bytes."""
    assert parse_event(payload) == expected

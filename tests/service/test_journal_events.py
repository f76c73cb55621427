"""A runtime's event is kept in the journal exactly as ``TraceEvent.as_json`` renders it (R14).

The journal writes the runtime's events in one pass (:func:`toolbound.trace.encode_event`);
the text must be the compact JSON of :meth:`~toolbound.TraceEvent.as_json`, whatever the
detail holds: bytes, states, sets, dates, values with ``as_json``, subclasses of JSON's
types, keys that are not strings.
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from hypothesis import given
from hypothesis import strategies as st

from toolbound._state import State
from toolbound.journal import SQLiteJournal, StoredCall
from toolbound.trace import TraceEvent, encode_event

if TYPE_CHECKING:
    from pathlib import Path


class _Label(str, enum.Enum):  # noqa: UP042 - a mixin, whose str() is not its text
    ONE = "one"


class _Number(enum.IntEnum):
    TWO = 2


class _Text(str):
    __slots__ = ()


class _Pair(NamedTuple):
    left: object
    right: object


@dataclass(frozen=True)
class _Info:
    name: str

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "kind": "info"}


def _as_json_text(event: TraceEvent) -> str:
    return json.dumps(event.as_json(), separators=(",", ":"), ensure_ascii=False)


_leaves = st.one_of(
    st.text(max_size=8),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.binary(max_size=8),
    st.sampled_from([*State, _Label.ONE, _Number.TWO, _Text("sub"), _Info("v")]),
    st.datetimes(timezones=st.just(UTC)),
    st.frozensets(st.text(max_size=4), max_size=3),
)
_keys = st.one_of(
    st.text(max_size=6),
    st.sampled_from([True, None, 1, 1.5, math.inf, _Label.ONE, _Number.TWO, _Text("k")]),
)
_details = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(_keys, inner, max_size=3),
        st.dictionaries(st.text(max_size=4), inner, max_size=3).map(MappingProxyType),
        st.tuples(inner, inner).map(lambda t: _Pair(*t)),
    ),
    max_leaves=12,
)


@given(
    data=st.dictionaries(st.text(max_size=6), _details, max_size=4),
    state=st.none() | st.sampled_from(State),
    at=st.floats(min_value=0, max_value=4e9),
)
def test_an_event_is_encoded_as_its_json_rendering(
    data: dict[str, object], state: State | None, at: float
) -> None:
    """``encode_event`` gives ``as_json``'s time and its compact JSON, character for character."""
    event = TraceEvent(3, at, "transition", state, data)
    try:
        expected = _as_json_text(event)
    except (TypeError, ValueError):
        return  # not JSON as as_json renders it (a key JSON has no text for)
    assert encode_event(event) == (event.as_json()["at"], expected)


def test_detail_json_writes_differently_takes_the_rendering_route() -> None:
    """Keys that are not plain strings and subclasses of JSON types come out as rendered."""
    data: dict[str, object] = {
        "flags": {True: 1, None: 2, _Label.ONE: 3, _Number.TWO: 4, _Text("t"): 5},
        "label": _Label.ONE,
        "number": _Number.TWO,
        "pair": _Pair(b"\xff", State.PARSED),
        "view": MappingProxyType({"a": frozenset({"b", "a"})}),
    }
    event = TraceEvent(0, 1.5, "transition", State.PARSED, data)
    at, text = encode_event(event)
    assert text == _as_json_text(event)
    assert json.loads(text)["data"]["flags"] == {
        "True": 1,
        "None": 2,
        str(_Label.ONE): 3,
        str(_Number.TWO): 4,
        "t": 5,
    }
    assert at == datetime.fromtimestamp(1.5, UTC).isoformat()


def test_the_journal_keeps_a_runtime_event_as_its_json(tmp_path: Path) -> None:
    """A ``TraceEvent`` handed to ``put_call`` reads back as ``as_json`` gave it."""
    journal = SQLiteJournal(tmp_path / "journal.db")
    now = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)
    event = TraceEvent(
        0, now.timestamp(), "proposal", State.PROPOSED, {"arguments": b"{}", "seen": ("a",)}
    )
    call = StoredCall(
        invocation_id="inv-1",
        tenant="acme",
        subject="u1",
        principal="agent",
        tool="orders.lookup",
        status="running",
        state="proposed",
        digest=None,
        decision=None,
        approver=None,
        created_at=now,
        updated_at=now,
        body={},
    )
    try:
        journal.put_call(call, events=[event])
        assert journal.events("inv-1") == [event.as_json()]
    finally:
        journal.close()

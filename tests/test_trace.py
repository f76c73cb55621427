"""R14: the trace answers the eight questions, append-only."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from harness import Harness, spec
from toolbound._state import State
from toolbound.testing import FakeTool
from toolbound.trace import utc_text


def test_trace_answers_r14(harness: Harness):
    """The trace holds all R14 asks.

    Spec seen, raw bytes, parser/validator/normalizer output, authority, attempts,
    commit status and the exact bytes sent back.
    """
    harness.registry.register(spec(), FakeTool(returns={"text": "hi"}))
    raw = b'{"text": "hi"}'
    out = harness.run("echo", raw)
    t = out.trace
    proposal = t.of_kind("proposal")[0]
    assert proposal.data["arguments"] == raw
    assert proposal.data["visible"] == ("echo@v1",)
    transitions = {e.state: e for e in t.of_kind("transition")}
    assert transitions[State.PARSED].data["parsed"] == {"text": "hi"}
    validated = transitions[State.VALIDATED].data
    assert validated["spec"] == "echo@v1"
    info = validated["validator"]
    assert info.dialect == "https://json-schema.org/draft/2020-12/schema"
    assert info.format_assertion is True
    assert info.name
    assert info.version
    assert validated["canonical"] == b'{"text":"hi"}'
    assert validated["digest"] == out.invocation.digest
    authorized = transitions[State.AUTHORIZED].data
    assert authorized["decision"] == "allow"
    assert authorized["capabilities"] == frozenset({"test:use"})
    attempt = t.of_kind("attempt")[0].data["attempt"]
    assert attempt.outcome == "committed"
    assert attempt.attempt_id == transitions[State.EXECUTING].data["attempt_id"]
    assert State.COMMITTED in transitions
    (message,) = t.of_kind("tool_message")
    assert message.data["content"] == out.message.content


def test_trace_is_ordered_and_serializable(harness: Harness):
    """Events are numbered in order and the whole trace renders as JSON."""
    harness.registry.register(spec(), FakeTool(returns={"text": "hi"}))
    out = harness.run("echo", {"text": "hi"})
    assert [e.seq for e in out.trace] == list(range(len(out.trace)))
    doc = json.loads(json.dumps(out.trace.as_json()))
    assert doc["invocation_id"] == out.invocation_id
    assert doc["events"][0]["data"]["arguments"] == {"utf8": '{"text": "hi"}'}


def test_rejected_proposal_is_traced_too(harness: Harness):
    """Rejections are traced: raw bytes in, the reason, and the bytes sent back."""
    out = harness.run("nothing", b"\xff")
    kinds = [e.kind for e in out.trace]
    assert kinds == ["proposal", "transition", "tool_message"]
    assert out.trace.events[0].data["arguments"] == b"\xff"
    assert out.trace.as_json()["events"][0]["data"]["arguments"] == {"hex": "ff"}


def test_sinks_receive_every_event(clock):
    """A trace sink sees every event as it is appended."""
    seen = []

    class Sink:
        def emit(self, invocation_id, event):
            seen.append((invocation_id, event.seq))

    h = Harness(clock, sinks=[Sink()])
    h.registry.register(spec(), FakeTool(returns={"text": "hi"}))
    out = h.run("echo", {"text": "hi"})
    h.close()
    assert seen == [(out.invocation_id, e.seq) for e in out.trace]


@given(
    st.one_of(
        st.floats(min_value=-62_135_596_800.0, max_value=253_402_300_799.0),
        # Half a microsecond from a whole one, where rounding decides the digits.
        st.integers(min_value=-(10**15), max_value=4 * 10**15).map(lambda n: n / 1e6 + 5e-7),
    )
)
def test_an_instant_is_written_as_datetime_writes_it(at: float):
    """An event's time as text: ``datetime.fromtimestamp(at, UTC).isoformat()``, exactly."""
    try:
        expected = datetime.fromtimestamp(at, UTC).isoformat()
    except (OverflowError, ValueError, OSError):
        return  # outside what datetime can hold
    assert utc_text(at) == expected
    assert utc_text(at) == expected  # and again, from the second kept

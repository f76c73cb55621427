"""R2: the transition table, every legal edge, every illegal one."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbound import FixedClock
from toolbound._errors import IllegalTransition
from toolbound._lifecycle import Lifecycle
from toolbound._state import REJECTED, TERMINAL, TRANSITIONS, State
from toolbound.trace import Trace

S = State
CLOCK = FixedClock(datetime(2026, 7, 19, 6, 0, tzinfo=UTC))

LEGAL = sorted(
    ((a, b) for a, nxt in TRANSITIONS.items() for b in nxt), key=lambda e: (e[0].value, e[1].value)
)
ILLEGAL = sorted(
    ((a, b) for a, b in itertools.product(State, State) if b not in TRANSITIONS[a]),
    key=lambda e: (e[0].value, e[1].value),
)


def at(state: State) -> Lifecycle:
    return Lifecycle(Trace(invocation_id="i", trace_id="t", clock=CLOCK), start=state)


def test_every_state_has_a_row():
    """The table names every state, so no state is reachable without a rule."""
    assert set(TRANSITIONS) == set(State)


def test_main_path_is_legal():
    """PROPOSED → … → OBSERVED is one legal walk."""
    life = at(S.PROPOSED)
    for s in (
        S.PARSED,
        S.VALIDATED,
        S.AUTHORIZED,
        S.PREPARED,
        S.EXECUTING,
        S.COMMITTED,
        S.OBSERVED,
    ):
        life.advance(s)
        assert life.state is s
    assert life.terminal
    assert [e.state for e in life.trace] == life.path[1:]


@pytest.mark.parametrize(("src", "dst"), LEGAL, ids=lambda s: s.name)
def test_legal_edge_moves_and_records(src, dst):
    """Each legal edge changes the state and appends exactly one trace event."""
    life = at(src)
    life.advance(dst, why="test")
    assert life.state is dst
    assert life.path == [src, dst]
    (event,) = life.trace.events
    assert event.state is dst
    assert event.data["previous"] is src


@pytest.mark.parametrize(("src", "dst"), ILLEGAL, ids=lambda s: s.name)
def test_illegal_edge_raises_and_changes_nothing(src, dst):
    """Each edge not in the table raises and leaves state, path and trace untouched."""
    life = at(src)
    with pytest.raises(IllegalTransition):
        life.advance(dst)
    assert life.state is src
    assert life.path == [src]
    assert len(life.trace) == 0


def test_rejected_terminals_never_reach_execution():
    """No path leads from a rejection to EXECUTING (they are terminal)."""
    for state in REJECTED:
        assert state in TERMINAL
        assert not TRANSITIONS[state]


def test_committed_cannot_become_not_happened():
    """After COMMITTED, no edge leads to a 'did not happen' state (R2 invariant 5)."""
    assert TRANSITIONS[S.COMMITTED] == {S.OBSERVED, S.FAILED_AFTER_COMMIT}


def test_unknown_leaves_only_by_reconciliation():
    """OUTCOME_UNKNOWN leads only to COMMITTED or FAILED_BEFORE_COMMIT."""
    assert TRANSITIONS[S.OUTCOME_UNKNOWN] == {S.COMMITTED, S.FAILED_BEFORE_COMMIT}


def reachable(start: State) -> set[State]:
    seen, todo = set(), [start]
    while todo:
        s = todo.pop()
        for n in TRANSITIONS[s]:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def test_executing_only_after_preparation():
    """EXECUTING is entered only from PREPARED: no shortcut from PROPOSED (seed 6.2)."""
    assert [s for s, nxt in TRANSITIONS.items() if S.EXECUTING in nxt] == [S.PREPARED]
    assert S.PREPARED in reachable(S.PROPOSED)


@given(st.lists(st.sampled_from(list(State)), max_size=30))
def test_random_event_sequences_follow_the_table(sequence):
    """Any sequence of requested states: legal ones apply, illegal ones raise and change nothing."""
    life = at(S.PROPOSED)
    for target in sequence:
        before = (life.state, list(life.path), len(life.trace))
        if target in TRANSITIONS[life.state]:
            life.advance(target)
            assert life.state is target
            assert len(life.trace) == before[2] + 1
        else:
            with pytest.raises(IllegalTransition):
                life.advance(target)
            assert (life.state, life.path, len(life.trace)) == before
    # the recorded path is always a walk along the table
    for a, b in itertools.pairwise(life.path):
        assert b in TRANSITIONS[a]
    assert not any(s in REJECTED for s in life.path[:-1])

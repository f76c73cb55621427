"""R7 on every surface that decides parked calls: the one desk's rules, seen from outside.

Each case runs against the library runtime (its desk, and ``approve``/``deny``), the
service in process, its HTTP API, its console forms, the MCP confirmation endpoint
(desk_surfaces.py), and the Pydantic AI, OpenAI Agents SDK and LangGraph integrations
driven through their own agent loops (framework_surfaces.py). What each surface
answers to a refused decision is its ``refusals`` table; a case that cannot apply to a
surface is skipped with the reason.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from desk_surfaces import ANA, EVE, LEO, OPS, SELF, TTL, Decided, MeetAfterLooking, Refused


def applies(request, surface, case: str) -> None:
    """Skip a case that cannot apply; mark one the surface is known to fail."""
    reason = surface.cannot.get(case)
    if reason is not None:
        pytest.skip(reason)
    bug = surface.known_bugs.get(case)
    if bug is not None:
        request.applymarker(pytest.mark.xfail(strict=True, raises=AssertionError, reason=bug))


def test_approving_the_digest_shown_runs_the_call_once(surface):
    """Approving with the digest shown runs the call exactly once; it is no longer pending."""
    parked = surface.park({"text": "buy milk"})
    assert parked.invocation_id in surface.pending(ANA)
    assert surface.effects() == 0
    done = surface.decide(parked.invocation_id, parked.digest, ANA, approve=True)
    assert done == Decided("observed")
    assert surface.effects() == 1
    assert parked.invocation_id not in surface.pending(ANA)


def test_denying_never_runs_the_call(surface):
    """Denying ends the call rejected without running it; it is no longer pending."""
    parked = surface.park({"text": "buy milk"})
    assert surface.decide(parked.invocation_id, parked.digest, ANA, approve=False) == Decided(
        "rejected"
    )
    assert surface.effects() == 0
    assert parked.invocation_id not in surface.pending(ANA)


def test_the_reason_for_a_denial_reaches_the_model(request, surface):
    """A denial's reason is what the model is told: attributed to the person, bounded."""
    applies(request, surface, "deny_reason")
    parked = surface.park({"text": "buy milk"})
    told = surface.deny_saying(parked.invocation_id, parked.digest, ANA, "the shop is closed")
    assert surface.effects() == 0
    assert "denied_by_person" in told
    assert f"denied by a person ({ANA.name}), who said:" in told
    assert "the shop is closed" in told
    long = surface.park({"text": "buy bread"})
    told = surface.deny_saying(long.invocation_id, long.digest, ANA, "why " * 200)
    assert "why " * 124 + "why…" in told  # the first 500 characters, then a mark
    assert "why " * 126 not in told
    assert long.invocation_id not in surface.pending(ANA)


@pytest.mark.parametrize("approve", [True, False], ids=["approve", "deny"])
def test_a_decision_naming_another_digest_is_refused_and_runs_nothing(request, surface, approve):
    """A decision shown another call's digest is refused (digest_mismatch); neither call runs."""
    applies(request, surface, f"digest:{'approve' if approve else 'deny'}")
    parked = surface.park({"text": "at 9:00"})
    other = surface.park({"text": "at 23:00"})
    refused = surface.decide(parked.invocation_id, other.digest, ANA, approve=approve)
    assert refused in surface.refusals["digest"]
    assert refused.code == "digest_mismatch"
    assert surface.effects() == 0
    assert other.invocation_id in surface.pending(ANA)


def test_a_decision_naming_another_digest_is_refused_and_the_call_waits(request, surface):
    """Another call's digest is refused (digest_mismatch), runs nothing; the right one then runs."""
    applies(request, surface, "digest_waits")
    parked = surface.park({"text": "at 9:00"})
    other = surface.park({"text": "at 23:00"})
    assert parked.digest != other.digest
    for approve in (True, False):
        refused = surface.decide(parked.invocation_id, other.digest, ANA, approve=approve)
        assert refused in surface.refusals["digest"]
        assert refused.code == "digest_mismatch"
    assert surface.effects() == 0
    assert parked.invocation_id in surface.pending(ANA)
    assert surface.decide(parked.invocation_id, parked.digest, ANA, approve=True) == Decided(
        "observed"
    )
    assert surface.effects() == 1


@pytest.mark.parametrize(("first", "ended", "ran"), [(True, "observed", 1), (False, "rejected", 0)])
def test_a_second_decision_on_the_same_call_is_refused(surface, first, ended, ran):
    """After one decision every other is refused (not_pending) and nothing more runs."""
    parked = surface.park({"text": "buy milk"})
    assert surface.decide(parked.invocation_id, parked.digest, ANA, approve=first) == Decided(ended)
    for approver, approve in ((OPS, True), (ANA, True), (ANA, False)):
        again = surface.decide(parked.invocation_id, parked.digest, approver, approve=approve)
        assert again in surface.refusals["decided"]
        assert again.code == "not_pending"
    assert surface.effects() == ran


def test_with_four_eyes_the_calls_own_subject_cannot_decide_it(request, surface):
    """An approver whose subject the call runs for is refused (four_eyes); another approves."""
    applies(request, surface, "four_eyes")
    parked = surface.park({"text": "pay myself"})
    for approve in (True, False):
        refused = surface.decide(parked.invocation_id, parked.digest, SELF, approve=approve)
        assert refused in surface.refusals["four_eyes"]
        assert refused.code == "four_eyes"
    assert surface.effects() == 0
    assert parked.invocation_id in surface.pending(ANA)
    assert surface.decide(parked.invocation_id, parked.digest, ANA, approve=True) == Decided(
        "observed"
    )
    assert surface.effects() == 1


def test_an_approver_of_another_tenant_neither_sees_nor_decides_the_call(request, surface):
    """Another tenant's approver is not shown the call and is refused; it stays pending."""
    applies(request, surface, "other_tenant")
    parked = surface.park({"text": "acme only"})
    assert parked.invocation_id not in surface.pending(EVE)
    for approve in (True, False):
        refused = surface.decide(parked.invocation_id, parked.digest, EVE, approve=approve)
        assert refused in surface.refusals["other_tenant"]
    assert surface.effects() == 0
    assert parked.invocation_id in surface.pending(ANA)


def test_a_person_without_the_approver_role_cannot_decide(request, surface):
    """Someone of the call's tenant who is not an approver is refused (forbidden); it waits."""
    applies(request, surface, "not_an_approver")
    parked = surface.park({"text": "buy milk"})
    for approve in (True, False):
        refused = surface.decide(parked.invocation_id, parked.digest, LEO, approve=approve)
        assert refused in surface.refusals["not_an_approver"]
        assert refused.code == "forbidden"
    assert surface.effects() == 0
    assert parked.invocation_id in surface.pending(ANA)


def test_a_decision_for_an_unknown_id_is_refused(request, surface):
    """A decision naming no parked call is refused and runs nothing."""
    applies(request, surface, "unknown")
    parked = surface.park({"text": "buy milk"})
    for approve in (True, False):
        refused = surface.decide(uuid.uuid4().hex, parked.digest, ANA, approve=approve)
        assert refused in surface.refusals["unknown"]
    assert surface.effects() == 0
    assert parked.invocation_id in surface.pending(ANA)


@pytest.mark.parametrize("interleaved", [False, True], ids=["free", "both-looked"])
def test_two_approvals_racing_run_the_call_once(request, surface, interleaved):
    """Two approvers approving at once: exactly one succeeds and the call runs once.

    ``both-looked`` holds each decision after the desk found the call waiting until the
    other has too, so the store's one-decision guard, not timing, settles the race.
    """
    applies(request, surface, "raced")
    parked = surface.park({"text": "race"})
    start, looked = threading.Barrier(2), threading.Barrier(2)

    def approve(side, approver):
        start.wait(timeout=10)
        return side.decide(parked.invocation_id, parked.digest, approver, approve=True)

    with surface.twin() as other, ThreadPoolExecutor(2) as pool:
        if interleaved:
            desks = {id(d): d for side in (surface, other) for d in side.desks()}
            for desk in desks.values():
                desk.calls = MeetAfterLooking(desk.calls, looked)
        results = list(pool.map(approve, (surface, other), (ANA, OPS)))
    won = [r for r in results if isinstance(r, Decided)]
    lost = [r for r in results if isinstance(r, Refused)]
    assert won == [Decided("observed")], results
    assert len(lost) == 1, results
    assert lost[0] in surface.refusals["raced"]
    assert surface.effects() == 1
    assert parked.invocation_id not in surface.pending(ANA)


def test_a_call_whose_window_closed_is_no_longer_pending(request, surface, clock):
    """Once the confirmation window closed, the call is not shown as waiting any more."""
    applies(request, surface, "expired_listed")
    parked = surface.park({"text": "too late"})
    clock.advance((TTL + timedelta(minutes=1)).total_seconds())
    assert parked.invocation_id not in surface.pending(ANA)
    assert surface.effects() == 0


@pytest.mark.parametrize("approve", [True, False], ids=["approve", "deny"])
def test_a_decision_after_the_window_closed_is_refused(request, surface, clock, approve):
    """A decision on a call whose window closed is refused and runs nothing."""
    applies(request, surface, "expired_decided")
    parked = surface.park({"text": "too late"})
    clock.advance((TTL + timedelta(minutes=1)).total_seconds())
    late = surface.decide(parked.invocation_id, parked.digest, ANA, approve=approve)
    assert surface.effects() == 0
    assert late in surface.refusals["expired"]
    assert parked.invocation_id not in surface.pending(ANA)

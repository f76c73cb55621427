"""The seeds' scenarios (issue: example pack + demo) hold, and the command prints them."""

from __future__ import annotations

import subprocess
import sys

from toolbound._state import State
from toolbound.packs.demo import run_demo

S = State


def by_title() -> dict[str, object]:
    return {s.title: s for s in run_demo()}


def test_demo_scenarios_prove_the_seed_facts():
    """Every scenario of the seeds ends as the seeds say it must.

    A-104 read with as_of; B-205 denied with 0 backend calls; principal and
    cancel_order rejected; instruction field rejected; snapshot unchanged; the
    calendar write confirmed by digest and not repeated.
    """
    s = by_title()
    a104 = s["mira reads her order A-104"]
    assert a104.outcome.kind == "observed"
    assert a104.facts["as_of"] == "2026-09-14T00:00:00Z"
    b205 = s["mira asks for leo's order B-205"]
    assert b205.outcome.state is S.AUTHORIZATION_REJECTED
    assert b205.facts["backend_calls_for_this_call"] == 0
    principal = s['the model adds "principal": "leo"']
    assert principal.outcome.state is S.VALIDATION_REJECTED
    assert principal.facts["backend_calls_for_this_call"] == 0
    assert s["the model calls cancel_order, which does not exist"].outcome.problem.code == (
        "unknown_tool"
    )
    injected = s["the backend adds an 'instruction' field to the result"]
    assert injected.outcome.state is S.FAILED_AFTER_COMMIT
    assert injected.facts["injected_text_reached_model"] is False
    assert s["the snapshot is unchanged after every read"].facts["snapshot_hash_unchanged"]
    assert s["read_file through a symlink that leads outside"].outcome.state is (
        S.AUTHORIZATION_REJECTED
    )
    parked = s["mira asks for a meeting tomorrow at 09:00"]
    assert parked.outcome.kind == "awaiting_confirmation"
    assert parked.facts["writes_so_far"] == 0
    assert s["the model changes the time after asking"].facts["same_digest_as_first"] is False
    approved = s["mira approves the call she was shown, by its digest"]
    assert approved.outcome.path == (
        S.PROPOSED,
        S.PARSED,
        S.VALIDATED,
        S.AUTHORIZED,
        S.AWAITING_CONFIRMATION,
        S.PREPARED,
        S.EXECUTING,
        S.COMMITTED,
        S.OBSERVED,
    )
    assert approved.facts["normalized_date"] == "2026-07-20"
    assert approved.facts["writes"] == 1
    again = s["the same call is proposed and approved again"]
    assert again.outcome.replayed_from == approved.outcome.invocation_id
    assert again.facts["writes"] == 1


def test_demo_payments_never_doubled():
    """A lost response is asked about or reconciled; no payment is ever made twice."""
    s = by_title()
    asked = s["a payment's response is lost; the runtime asks the bank by key"]
    assert asked.outcome.kind == "observed"
    assert asked.facts["payments_made"] == 1
    unknown = s["another payment's response is lost and the bank cannot be asked"]
    assert unknown.outcome.state is S.OUTCOME_UNKNOWN
    assert unknown.facts["same_payment_again"] == "outcome_unknown"
    later = s["later, the reconciler asks the bank and the payment replays"]
    assert later.facts["reconciled"] == "committed"
    assert later.outcome.replayed_from == unknown.outcome.invocation_id
    assert later.facts["payments_made"] == 2


def test_demo_command_runs():
    """`toolbound demo` exits 0 and prints every scenario's path."""
    done = subprocess.run(
        [sys.executable, "-c", "from toolbound.cli import main; main()", "demo"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "AUTHORIZATION_REJECTED" in done.stdout
    assert "AWAITING_CONFIRMATION" in done.stdout

"""The one ledger conformance suite (R8, R9, R19): every test runs unchanged on every store.

Instants are explicit: no test reads a clock.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, get_args

import pytest

from toolbound._errors import Problem
from toolbound._model import Attempt, Result
from toolbound.ledger.rules import CLOCK_SKEW
from toolbound.ledger.store import (
    PHASE_EDGES,
    Claimed,
    Expired,
    InFlight,
    Intent,
    KeyReused,
    LedgerError,
    LedgerKey,
    LedgerRecord,
    NotYetError,
    Phase,
    Replay,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from toolbound.ledger.store import Ledger, LedgerTransaction

T0 = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)
KEY = LedgerKey("acme/mira", "v1", "key-1")
SUBJECT = {"id": "mira", "tenant": "acme", "session": None}
PHASES: tuple[Phase, ...] = get_args(Phase)

# How to bring a freshly claimed record to each phase, along legal edges only.
PATH_TO: dict[Phase, tuple[Phase, ...]] = {
    "intent": (),
    "executing": ("executing",),
    "committed": ("executing", "committed"),
    "failed": ("failed",),
    "unknown": ("executing", "unknown"),
}
LEGAL = [(a, b) for a in PHASES for b in PHASES if b in PHASE_EDGES[a]]
ILLEGAL = [(a, b) for a in PHASES for b in PHASES if b not in PHASE_EDGES[a]]


def intent(
    key: LedgerKey = KEY,
    *,
    digest: str = "digest-a",
    invocation_id: str = "inv-1",
    deadline: datetime = T0 + timedelta(seconds=30),
) -> Intent:
    return Intent(
        key=key,
        digest=digest,
        invocation_id=invocation_id,
        tool="orders.create@v1",
        canonical='{"item":"crème brûlée","qty":2}'.encode(),
        subject=SUBJECT,
        deadline=deadline,
    )


def result(invocation_id: str = "inv-1", **overrides: object) -> Result:
    fields: dict[str, object] = {
        "invocation_id": invocation_id,
        "status": "ok",
        "value": {"order": "o-1", "total": 12.5, "lines": [{"sku": "A", "qty": 2}]},
        "commit_status": "committed",
        "external_resource_id": "o-1",
        "observed_at": T0 + timedelta(seconds=1),
    }
    fields.update(overrides)
    return Result(**fields)  # type: ignore[arg-type]


def bring_to(ledger: Ledger, phase: Phase, *, key: LedgerKey = KEY, now: datetime = T0) -> None:
    """Claim ``key`` as inv-1 and walk it to ``phase``."""
    assert ledger.claim(intent(key), now=now) == Claimed()
    for step in PATH_TO[phase]:
        ledger.advance(
            key,
            invocation_id="inv-1",
            phase=step,
            now=now,
            result=result() if step == "committed" else None,
        )


# -- R8: the four cases --------------------------------------------------------------


def test_free_key_is_claimed_and_intent_recorded(ledger):
    """A free key is Claimed and its intent is recorded with every field the intent gave."""
    assert ledger.claim(intent(), now=T0) == Claimed()
    assert ledger.get(KEY) == LedgerRecord(
        key=KEY,
        digest="digest-a",
        invocation_id="inv-1",
        tool="orders.create@v1",
        canonical='{"item":"crème brûlée","qty":2}'.encode(),
        subject=SUBJECT,
        phase="intent",
        deadline=T0 + timedelta(seconds=30),
        created_at=T0,
        updated_at=T0,
    )


def test_same_digest_committed_replays_the_original_result(ledger):
    """R8: same digest after success → Replay of the original result, equal field by field."""
    bring_to(ledger, "committed")
    answer = ledger.claim(intent(invocation_id="inv-2"), now=T0 + timedelta(seconds=5))
    assert isinstance(answer, Replay)
    assert answer.invocation_id == "inv-1"
    original = result()
    for f in dataclasses.fields(Result):
        assert getattr(answer.result, f.name) == getattr(original, f.name), f.name
    assert ledger.get(KEY).invocation_id == "inv-1"  # the replay wrote nothing


@pytest.mark.parametrize("phase", ["intent", "executing", "unknown"])
def test_same_digest_in_flight_reports_the_phase(ledger, phase):
    """R8: same digest still in intent / executing / unknown → InFlight with that phase."""
    bring_to(ledger, phase)
    answer = ledger.claim(intent(invocation_id="inv-2"), now=T0 + timedelta(seconds=1))
    assert answer == InFlight(invocation_id="inv-1", phase=phase)


@pytest.mark.parametrize("phase", PHASES)
def test_different_digest_is_key_reuse_in_every_phase(ledger, phase):
    """R8: a different digest under the same key → KeyReused, whatever the holder's phase."""
    bring_to(ledger, phase)
    answer = ledger.claim(
        intent(digest="digest-b", invocation_id="inv-2"), now=T0 + timedelta(seconds=1)
    )
    assert answer == KeyReused(invocation_id="inv-1")
    assert ledger.get(KEY).phase == phase


def test_failed_same_digest_is_claimable_again(ledger):
    """R8: a failure before commit changed nothing, so the same call claims the key afresh."""
    bring_to(ledger, "failed")
    later = T0 + timedelta(seconds=2)
    assert ledger.claim(intent(invocation_id="inv-2"), now=later) == Claimed(epoch=2)
    record = ledger.get(KEY)
    assert (record.invocation_id, record.phase, record.created_at) == ("inv-2", "intent", later)
    assert (record.result, record.evidence) == (None, ())
    with pytest.raises(LedgerError) as err:
        ledger.advance(KEY, invocation_id="inv-1", phase="executing", now=later)
    assert err.value.code == "not_holder"


def test_keys_differ_by_scope_version_and_key(ledger):
    """A record is keyed by (scope, tool version, key): change any one and the key is free."""
    bring_to(ledger, "executing")
    for other in (
        LedgerKey("acme/leo", "v1", "key-1"),
        LedgerKey("acme/mira", "v2", "key-1"),
        LedgerKey("acme/mira", "v1", "key-2"),
    ):
        assert ledger.claim(intent(other, invocation_id=f"inv-{other}"), now=T0) == Claimed()


# -- claim as executing (R8, R9: one commit for the claim and 'executing') -------------


def test_claim_executing_records_a_free_key_straight_in_executing(ledger):
    """A free key claimed as the call starts is Claimed, its record already 'executing'."""
    assert ledger.claim_executing(intent(), now=T0) == Claimed()
    assert ledger.get(KEY) == LedgerRecord(
        key=KEY,
        digest="digest-a",
        invocation_id="inv-1",
        tool="orders.create@v1",
        canonical='{"item":"crème brûlée","qty":2}'.encode(),
        subject=SUBJECT,
        phase="executing",
        deadline=T0 + timedelta(seconds=30),
        created_at=T0,
        updated_at=T0,
    )


@pytest.mark.parametrize("target", sorted(PHASE_EDGES["executing"]))
def test_claim_executing_record_moves_along_executings_edges(ledger, target):
    """The record leaves 'executing' like any other: committed, failed or unknown."""
    ledger.claim_executing(intent(), now=T0)
    stored = result() if target == "committed" else None
    ledger.advance(KEY, invocation_id="inv-1", phase=target, now=T0, result=stored)
    assert ledger.get(KEY).phase == target


@pytest.mark.parametrize("phase", PHASES)
def test_claim_executing_answers_a_taken_key_like_claim(ledger, phase):
    """A taken key gets claim's R8 answer and nothing is written; a failed one is reclaimed."""
    bring_to(ledger, phase)
    before = ledger.get(KEY)
    later = T0 + timedelta(seconds=1)
    same = ledger.claim_executing(intent(invocation_id="inv-2"), now=later)
    other = ledger.claim_executing(intent(digest="digest-b", invocation_id="inv-3"), now=later)
    assert other == KeyReused(invocation_id="inv-2" if phase == "failed" else "inv-1")
    if phase == "failed":
        assert same == Claimed(epoch=2)
        record = ledger.get(KEY)
        assert (record.invocation_id, record.phase, record.created_at) == (
            "inv-2",
            "executing",
            later,
        )
        assert (record.result, record.evidence) == (None, ())
    elif phase == "committed":
        assert isinstance(same, Replay)
        assert same.invocation_id == "inv-1"
        assert ledger.get(KEY) == before
    else:
        assert same == InFlight(invocation_id="inv-1", phase=phase)
        assert ledger.get(KEY) == before


def test_claim_executing_replaces_an_expired_record_under_new(open_ledger):
    """R8: past retention with policy 'new' the new record replaces the old, in 'executing'."""
    ledger = open_ledger(retention=RETENTION, expired="new")
    bring_to(ledger, "committed")
    late = T0 + RETENTION + timedelta(microseconds=1)
    assert ledger.claim_executing(intent(invocation_id="inv-2"), now=late) == Claimed(epoch=2)
    record = ledger.get(KEY)
    assert (record.invocation_id, record.phase, record.created_at) == ("inv-2", "executing", late)
    assert (record.result, record.evidence) == (None, ())


def test_claim_executing_abandoned_is_swept_to_unknown(ledger):
    """R9: a process that died after the claim may have started the tool: swept to unknown."""
    deadline = T0 + timedelta(seconds=10)
    grace = timedelta(seconds=5)
    ledger.claim_executing(intent(deadline=deadline), now=T0)
    (swept,) = ledger.sweep(now=deadline + grace + timedelta(microseconds=1), grace=grace)
    assert (swept.phase, swept.evidence) == ("unknown", ({"swept": "executing"},))


def test_claim_executing_inside_atomic_joins_its_transaction(ledger):
    """Inside atomic() the claim joins the block: a rollback leaves the key free."""

    def body(_tx):
        assert ledger.claim_executing(intent(), now=T0) == Claimed()

    with pytest.raises(ToolCrashError):
        crash_inside(ledger, body)
    assert ledger.get(KEY) is None


# -- R8: retention ---------------------------------------------------------------------

RETENTION = timedelta(hours=1)


@pytest.mark.parametrize("digest", ["digest-a", "digest-b"])
@pytest.mark.parametrize("phase", ["committed", "executing"])
def test_expired_record_is_rejected_under_reject(open_ledger, phase, digest):
    """R8: past retention with policy 'reject' → Expired, the old record untouched."""
    ledger = open_ledger(retention=RETENTION, expired="reject")
    bring_to(ledger, phase)
    before = ledger.get(KEY)
    late = T0 + RETENTION + timedelta(microseconds=1)
    answer = ledger.claim(intent(digest=digest, invocation_id="inv-2"), now=late)
    assert answer == Expired(invocation_id="inv-1")
    assert ledger.get(KEY) == before


@pytest.mark.parametrize("digest", ["digest-a", "digest-b"])
@pytest.mark.parametrize("phase", ["committed", "executing"])
def test_expired_record_is_replaced_under_new(open_ledger, phase, digest):
    """R8: past retention with policy 'new' → Claimed; the new intent replaces the record."""
    ledger = open_ledger(retention=RETENTION, expired="new")
    bring_to(ledger, phase)
    late = T0 + RETENTION + timedelta(microseconds=1)
    answer = ledger.claim(intent(digest=digest, invocation_id="inv-2"), now=late)
    assert answer == Claimed(epoch=2)
    record = ledger.get(KEY)
    assert (record.invocation_id, record.digest, record.phase) == ("inv-2", digest, "intent")
    assert (record.created_at, record.result, record.evidence) == (late, None, ())


@pytest.mark.parametrize("policy", ["reject", "new"])
def test_record_exactly_at_retention_is_still_live(open_ledger, policy):
    """R8: retention is 'older than': at exactly the window's end the record still answers."""
    ledger = open_ledger(retention=RETENTION, expired=policy)
    bring_to(ledger, "committed")
    answer = ledger.claim(intent(invocation_id="inv-2"), now=T0 + RETENTION)
    assert isinstance(answer, Replay)


# -- R9: phase edges -------------------------------------------------------------------


@pytest.mark.parametrize(("current", "target"), LEGAL)
def test_legal_edge_moves_the_record(ledger, current, target):
    """R9: every edge in PHASE_EDGES is accepted and recorded with its time."""
    bring_to(ledger, current)
    later = T0 + timedelta(seconds=3)
    ledger.advance(KEY, invocation_id="inv-1", phase=target, now=later)
    record = ledger.get(KEY)
    assert (record.phase, record.updated_at) == (target, later)


@pytest.mark.parametrize(("current", "target"), ILLEGAL)
def test_illegal_edge_raises_and_changes_nothing(ledger, current, target):
    """R9: every edge not in PHASE_EDGES raises illegal_phase and leaves the record as it was."""
    bring_to(ledger, current)
    before = ledger.get(KEY)
    with pytest.raises(LedgerError) as err:
        ledger.advance(
            KEY,
            invocation_id="inv-1",
            phase=target,
            now=T0 + timedelta(seconds=3),
            evidence={"tried": target},
        )
    assert err.value.code == "illegal_phase"
    assert ledger.get(KEY) == before


def test_advance_by_another_invocation_is_not_holder(ledger):
    """Only the invocation holding the key may advance it."""
    bring_to(ledger, "executing")
    with pytest.raises(LedgerError) as err:
        ledger.advance(KEY, invocation_id="inv-2", phase="committed", now=T0, result=result())
    assert err.value.code == "not_holder"
    assert ledger.get(KEY).phase == "executing"


def test_advance_of_a_missing_key_is_not_holder(ledger):
    """Advancing a key nobody claimed is refused as not_holder."""
    with pytest.raises(LedgerError) as err:
        ledger.advance(KEY, invocation_id="inv-1", phase="executing", now=T0)
    assert err.value.code == "not_holder"
    assert ledger.get(KEY) is None


def test_advance_keeps_the_result_and_appends_evidence(ledger):
    """Evidence accumulates in order; a later advance without a result keeps the stored one."""
    assert ledger.claim(intent(), now=T0) == Claimed()
    ledger.advance(KEY, invocation_id="inv-1", phase="executing", now=T0, evidence={"n": 1})
    ledger.advance(
        KEY, invocation_id="inv-1", phase="unknown", now=T0, result=result(), evidence={"n": 2}
    )
    ledger.advance(
        KEY,
        invocation_id="inv-1",
        phase="committed",
        now=T0,
        evidence={"query": "found", "remote": {"id": "o-1", "ok": True}},
    )
    record = ledger.get(KEY)
    assert record.result == result()
    assert record.evidence == (
        {"n": 1},
        {"n": 2},
        {"query": "found", "remote": {"id": "o-1", "ok": True}},
    )


# -- get, find, unresolved -------------------------------------------------------------


def test_get_and_find_return_none_for_unknown_keys(ledger):
    """Get and find answer None for what was never recorded."""
    assert ledger.get(KEY) is None
    assert ledger.find("inv-1") is None


def test_find_returns_the_record_an_invocation_holds(ledger):
    """Find looks a record up by the invocation that holds it."""
    bring_to(ledger, "executing")
    assert ledger.claim(intent(LedgerKey("s", "v1", "other"), invocation_id="inv-9"), now=T0)
    assert ledger.find("inv-1") == ledger.get(KEY)
    assert ledger.find("inv-9").key == LedgerKey("s", "v1", "other")


def test_unresolved_lists_unknown_records_oldest_first(ledger):
    """Unresolved returns every unknown record by creation time, and nothing else."""
    created = {"b": 2, "c": 0, "a": 1, "d": 3}
    for name, second in created.items():
        key = LedgerKey("s", "v1", name)
        assert ledger.claim(intent(key, invocation_id="inv-1"), now=T0 + timedelta(seconds=second))
        ledger.advance(key, invocation_id="inv-1", phase="executing", now=T0)
        if name != "d":  # d stays executing
            ledger.advance(key, invocation_id="inv-1", phase="unknown", now=T0)
    assert [r.key.key for r in ledger.unresolved()] == ["c", "a", "b"]


def test_unresolved_is_empty_on_an_empty_ledger(ledger):
    """No records, nothing unresolved."""
    assert ledger.unresolved() == []


# -- sweep -----------------------------------------------------------------------------


def test_sweep_settles_only_records_past_deadline_and_grace(ledger):
    """Sweep: intent → failed, executing → unknown, only past deadline + grace; evidence kept."""
    deadline = T0 + timedelta(seconds=10)
    grace = timedelta(seconds=5)
    setup: dict[str, tuple[Phase, datetime]] = {
        "abandoned-intent": ("intent", deadline),
        "abandoned-executing": ("executing", deadline),
        "live-intent": ("intent", deadline + timedelta(seconds=1)),
        "done": ("committed", deadline),
        "already-unknown": ("unknown", deadline),
        "failed": ("failed", deadline),
    }
    for name, (phase, when) in setup.items():
        key = LedgerKey("s", "v1", name)
        assert ledger.claim(intent(key, invocation_id=name, deadline=when), now=T0)
        for step in PATH_TO[phase]:
            ledger.advance(key, invocation_id=name, phase=step, now=T0)
    edge = deadline + grace
    assert ledger.sweep(now=edge, grace=grace) == []  # at deadline + grace: not yet

    swept_at = edge + timedelta(microseconds=1)
    changed = ledger.sweep(now=swept_at, grace=grace)

    assert {r.key.key: r.phase for r in changed} == {
        "abandoned-intent": "failed",
        "abandoned-executing": "unknown",
    }
    for record in changed:
        assert record == ledger.get(record.key)
        assert record.updated_at == swept_at
    assert ledger.get(LedgerKey("s", "v1", "abandoned-intent")).evidence == ({"swept": "intent"},)
    assert ledger.get(LedgerKey("s", "v1", "abandoned-executing")).evidence == (
        {"swept": "executing"},
    )
    for name in ("live-intent", "done", "already-unknown", "failed"):
        assert ledger.get(LedgerKey("s", "v1", name)).phase == setup[name][0]
    assert ledger.sweep(now=swept_at, grace=grace) == []  # settled records stay settled


# -- results round-trip ----------------------------------------------------------------

RICH_VALUE = {
    "text": 'naïve café — 日本語 🧾 \u2028 "quoted" \\ back',
    "nested": {"list": [1, -2, 3.25, True, False, None, [], {}], "deep": {"a": {"b": ["c"]}}},
    "big": 2**53 + 1,
    "empty": "",
}
ERROR_RESULT = Result(
    invocation_id="inv-1",
    status="error",
    error=Problem(
        kind="execution",
        code="card_declined",
        message="the card was declined — «insufficient funds»",
        recoverable=False,
        hint="ask for another card",
        pointer="/payment/card",
    ),
    commit_status="failed_before_commit",
    observed_at=datetime(2026, 7, 19, 8, 0, 0, 123456, tzinfo=UTC),
    attempts=(
        Attempt(
            attempt_id="att-1",
            number=1,
            started_at=T0,
            ended_at=T0 + timedelta(milliseconds=250),
            outcome="unknown",
            detail="response lost",
        ),
        Attempt(
            attempt_id="att-2",
            number=2,
            started_at=T0 + timedelta(seconds=1),
            ended_at=T0 + timedelta(seconds=2),
            outcome="failed_before_commit",
        ),
    ),
)


@pytest.mark.parametrize(
    "stored",
    [result(value=RICH_VALUE), result(value=None, external_resource_id=None), ERROR_RESULT],
    ids=["unicode-nested", "empty", "error-with-attempts"],
)
def test_result_round_trips_through_the_store(ledger, stored):
    """A stored result comes back equal: unicode, nesting, big ints, Problem and attempts."""
    assert ledger.claim(intent(), now=T0) == Claimed()
    ledger.advance(KEY, invocation_id="inv-1", phase="executing", now=T0)
    ledger.advance(KEY, invocation_id="inv-1", phase="committed", now=T0, result=stored)
    assert ledger.get(KEY).result == stored
    replay = ledger.claim(intent(invocation_id="inv-2"), now=T0)
    assert replay == Replay(invocation_id="inv-1", result=stored)


# -- atomic(): records and business rows commit together (R8) ---------------------------


class ToolCrashError(Exception):
    """What a tool raises halfway through its transaction."""


def crash_inside(ledger: Ledger, body: Callable[[LedgerTransaction], None]) -> None:
    """Run ``body`` inside ``ledger.atomic()``, then crash as a tool would."""
    with ledger.atomic() as tx:
        body(tx)
        raise ToolCrashError


def _execute_in(tx, business, *, now: datetime = T0) -> None:
    assert tx.claim(intent(), now=now) == Claimed()
    tx.advance(KEY, invocation_id="inv-1", phase="executing", now=now)
    business.insert(tx, "o-1")
    tx.advance(KEY, invocation_id="inv-1", phase="committed", now=now, result=result())


def test_atomic_commits_records_and_business_rows_together(ledger, business):
    """R8: a business row written through tx.connection commits with the ledger records."""
    with ledger.atomic() as tx:
        _execute_in(tx, business)
    assert ledger.get(KEY).phase == "committed"
    assert business.rows() == ([("o-1", "")] if business.sql else None)
    assert isinstance(ledger.claim(intent(invocation_id="inv-2"), now=T0), Replay)


def test_atomic_rolls_back_records_and_business_rows_together(ledger, business):
    """R8: an exception inside atomic() leaves neither the records nor the business row."""
    with pytest.raises(ToolCrashError):
        crash_inside(ledger, lambda tx: _execute_in(tx, business))
    assert ledger.get(KEY) is None
    assert business.rows() == ([] if business.sql else None)
    assert ledger.claim(intent(invocation_id="inv-2"), now=T0) == Claimed()


def test_atomic_rollback_restores_the_records_as_they_were(ledger):
    """A rolled-back atomic() restores existing records, not just removes new ones."""
    bring_to(ledger, "executing")
    before = ledger.get(KEY)

    def body(tx):
        tx.advance(KEY, invocation_id="inv-1", phase="unknown", now=T0, evidence={"x": 1})
        assert ledger.get(KEY).phase == "unknown"  # visible inside the transaction

    with pytest.raises(ToolCrashError):
        crash_inside(ledger, body)
    assert ledger.get(KEY) == before


def test_ledger_calls_inside_atomic_join_its_transaction(ledger, business):
    """Ledger methods called on the same thread inside atomic() are part of its transaction."""

    def body(tx):
        assert ledger.claim(intent(), now=T0) == Claimed()
        business.insert(tx, "o-1")

    with pytest.raises(ToolCrashError):
        crash_inside(ledger, body)
    assert ledger.get(KEY) is None
    assert business.rows() == ([] if business.sql else None)


def test_nested_atomic_rolls_back_only_the_inner_block(ledger, business):
    """A nested atomic() is a savepoint: its failure undoes it alone, the outer block commits."""
    other = LedgerKey("s", "v1", "inner")

    def inner(tx):
        assert tx.claim(intent(other, invocation_id="inv-9"), now=T0) == Claimed()
        business.insert(tx, "o-9")

    with ledger.atomic() as outer:
        _execute_in(outer, business)
        with pytest.raises(ToolCrashError):
            crash_inside(ledger, inner)
    assert ledger.get(KEY).phase == "committed"
    assert ledger.get(other) is None
    assert business.rows() == ([("o-1", "")] if business.sql else None)


def test_illegal_edge_inside_atomic_raises_and_the_block_rolls_back(ledger, business):
    """A refused edge inside atomic() raises LedgerError and nothing in the block commits."""

    def body(tx):
        assert tx.claim(intent(), now=T0) == Claimed()
        business.insert(tx, "o-1")
        tx.advance(KEY, invocation_id="inv-1", phase="committed", now=T0, result=result())

    with pytest.raises(LedgerError) as err:
        crash_inside(ledger, body)
    assert err.value.code == "illegal_phase"
    assert ledger.get(KEY) is None
    assert business.rows() == ([] if business.sql else None)


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_a_tools_own_database_error_passes_through_and_rolls_back(ledger, business, store):
    """A tool's own SQL error inside atomic() reaches it unchanged; nothing in the block commits."""

    def body(tx):
        assert tx.claim(intent(), now=T0) == Claimed()
        tx.connection.execute("INSERT INTO orders (id) VALUES (NULL)")  # NOT NULL violated

    with pytest.raises(Exception) as err:  # noqa: PT011 - the driver's own class, checked below
        crash_inside(ledger, body)
    assert type(err.value).__module__.split(".")[0] in {"sqlite3", "psycopg"}
    assert "IntegrityError" in [c.__name__ for c in type(err.value).__mro__]
    assert ledger.get(KEY) is None
    assert business.rows() == []


# -- epochs: each ownership of a key fences the ones before (R9) -------------------------

DEADLINE = T0 + timedelta(seconds=30)  # intent()'s default deadline
AFTER = DEADLINE + CLOCK_SKEW + timedelta(microseconds=1)  # the first instant one may take over


def test_a_free_key_is_claimed_under_the_first_epoch(ledger):
    """A free key's claim is epoch 1, and the record says so."""
    assert ledger.claim_executing(intent(), now=T0) == Claimed(epoch=1)
    assert ledger.get(KEY).epoch == 1


def test_each_new_claim_of_a_key_is_the_next_epoch(ledger):
    """A failed call claimed again is a new ownership: the next epoch, on the answer and record."""
    for epoch in (1, 2, 3):
        answer = ledger.claim(intent(invocation_id=f"inv-{epoch}"), now=T0)
        assert answer == Claimed(epoch=epoch)
        assert ledger.get(KEY).epoch == epoch
        ledger.advance(KEY, invocation_id=f"inv-{epoch}", phase="failed", now=T0, epoch=epoch)


def test_answers_that_claim_nothing_leave_the_epoch(ledger):
    """Replay, in-flight and key reuse write nothing: the record keeps its epoch."""
    bring_to(ledger, "committed")
    ledger.claim(intent(invocation_id="inv-2"), now=T0)
    ledger.claim(intent(digest="digest-b", invocation_id="inv-3"), now=T0)
    assert ledger.get(KEY).epoch == 1


def test_an_advance_under_the_holders_epoch_moves_the_record(ledger):
    """The holder passing its own epoch moves its record as before."""
    ledger.claim_executing(intent(), now=T0)
    ledger.advance(KEY, invocation_id="inv-1", phase="committed", now=T0, result=result(), epoch=1)
    assert (ledger.get(KEY).phase, ledger.get(KEY).epoch) == ("committed", 1)


def test_an_advance_under_another_epoch_is_fenced_and_changes_nothing(ledger):
    """An owner whose epoch is not the record's is refused with 'fenced'; nothing moves."""
    ledger.claim_executing(intent(), now=T0)
    before = ledger.get(KEY)
    with pytest.raises(LedgerError) as err:
        ledger.advance(KEY, invocation_id="inv-1", phase="committed", now=T0, epoch=7)
    assert err.value.code == "fenced"
    assert ledger.get(KEY) == before


def test_a_takeover_before_the_owners_deadline_is_not_yet(ledger):
    """Until deadline + clock skew has passed the owner may act: not_yet, retry_at, no change."""
    ledger.claim_executing(intent(), now=T0)
    before = ledger.get(KEY)
    with pytest.raises(NotYetError) as err:
        ledger.take_over(KEY, invocation_id="inv-1", now=DEADLINE + CLOCK_SKEW)
    assert (err.value.code, err.value.retry_at, err.value.recoverable) == (
        "not_yet",
        DEADLINE + CLOCK_SKEW,
        True,
    )
    assert ledger.get(KEY) == before


@pytest.mark.parametrize(("left", "settled"), [("intent", "failed"), ("executing", "unknown")])
def test_a_takeover_settles_the_record_under_the_next_epoch(ledger, left, settled):
    """Past the deadline: intent → failed, executing → unknown, epoch + 1, evidence appended."""
    bring_to(ledger, left)
    taken = ledger.take_over(
        KEY, invocation_id="inv-1", now=AFTER, evidence={"taken_over_by": "replica-b"}
    )
    assert (taken.phase, taken.epoch, taken.updated_at) == (settled, 2, AFTER)
    assert taken.evidence == ({"taken_over_by": "replica-b", "taken_over": left, "epoch": 2},)
    assert ledger.get(KEY) == taken


def test_the_owner_taken_over_is_fenced_and_a_reconciliation_is_not(ledger):
    """After a takeover the old owner's write is fenced; an operator's finding (no epoch) lands."""
    ledger.claim_executing(intent(), now=T0)
    ledger.take_over(KEY, invocation_id="inv-1", now=AFTER)
    with pytest.raises(LedgerError) as err:
        ledger.advance(KEY, invocation_id="inv-1", phase="committed", now=AFTER, epoch=1)
    assert err.value.code == "fenced"
    ledger.advance(KEY, invocation_id="inv-1", phase="failed", now=AFTER, evidence={"by": "ops"})
    assert ledger.claim(intent(invocation_id="inv-2"), now=AFTER) == Claimed(epoch=3)


@pytest.mark.parametrize("phase", ["committed", "failed", "unknown"])
def test_a_settled_record_cannot_be_taken_over(ledger, phase):
    """Only intent and executing are taken over; any other phase is illegal_phase, unchanged."""
    bring_to(ledger, phase)
    before = ledger.get(KEY)
    with pytest.raises(LedgerError) as err:
        ledger.take_over(KEY, invocation_id="inv-1", now=AFTER)
    assert err.value.code == "illegal_phase"
    assert ledger.get(KEY) == before


@pytest.mark.parametrize("invocation_id", ["inv-2", None])
def test_a_takeover_names_the_holder(ledger, invocation_id):
    """A takeover for another invocation, or of a missing key, is not_holder."""
    if invocation_id is not None:
        ledger.claim_executing(intent(), now=T0)
    with pytest.raises(LedgerError) as err:
        ledger.take_over(KEY, invocation_id=invocation_id or "inv-1", now=AFTER)
    assert err.value.code == "not_holder"


def test_a_sweep_takes_over_under_the_next_epoch(ledger):
    """A sweep is a takeover of every abandoned record: each swept record's epoch is one more."""
    ledger.claim_executing(intent(), now=T0)
    (swept,) = ledger.sweep(now=AFTER, grace=timedelta(0))
    assert (swept.phase, swept.epoch) == ("unknown", 2)
    assert ledger.get(KEY).epoch == 2


def test_an_operator_settles_a_taken_record_under_its_epoch(ledger):
    """A taken record resolved 'committed' by an operator keeps the takeover's epoch."""
    ledger.claim_executing(intent(), now=T0)
    ledger.take_over(KEY, invocation_id="inv-1", now=AFTER)
    ledger.advance(KEY, invocation_id="inv-1", phase="committed", now=AFTER, result=result())
    assert (ledger.get(KEY).phase, ledger.get(KEY).epoch) == ("committed", 2)


# -- durability across reopening ---------------------------------------------------------


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_reopening_the_store_keeps_every_record(open_ledger, store):
    """Records written, the store closed and opened again: every record is there, equal."""
    first = open_ledger()
    for phase in PHASES:
        bring_to(first, phase, key=LedgerKey("s", "v1", phase))
    first.advance(
        LedgerKey("s", "v1", "unknown"),
        invocation_id="inv-1",
        phase="committed",
        now=T0,
        evidence={"query": "found"},
    )
    first.take_over(LedgerKey("s", "v1", "executing"), invocation_id="inv-1", now=AFTER)
    before = {phase: first.get(LedgerKey("s", "v1", phase)) for phase in PHASES}
    assert before["executing"].epoch == 2
    first.close()

    again = open_ledger()
    assert {phase: again.get(LedgerKey("s", "v1", phase)) for phase in PHASES} == before
    assert again.claim(
        intent(LedgerKey("s", "v1", "committed"), invocation_id="inv-2"), now=T0
    ) == (Replay(invocation_id="inv-1", result=result()))

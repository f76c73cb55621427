"""The ledger's rules as tables (R8, R9): the decisions every store asks, without a store.

Each row of a table is one sentence of the spec. The conformance suite checks that the
stores keep what these functions answer; these tests check the answers.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, get_args

import pytest

from toolbound._model import Result
from toolbound.ledger import migrations
from toolbound.ledger._sql import SWEEP_FROM
from toolbound.ledger.rules import (
    ABANDONED,
    CLOCK_SKEW,
    SWEPT,
    TAKEN_OVER,
    Existing,
    abandoned_before,
    check_advance,
    decide_claim,
    intent_record,
    owner_may_act_until,
    swept,
    taken_over,
)
from toolbound.ledger.sqlite import _SWEEP, SQLiteLedger
from toolbound.ledger.store import (
    PHASE_EDGES,
    Claimed,
    InFlight,
    Intent,
    LedgerError,
    LedgerKey,
    NotYetError,
    Phase,
    Replay,
)

if TYPE_CHECKING:
    from pathlib import Path

    from toolbound.ledger.store import ExpiredPolicy

NOW = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)
KEY = LedgerKey("acme/mira", "v1", "key-1")
RETENTION = timedelta(hours=1)
PHASES: tuple[Phase, ...] = get_args(Phase)

SAME, OTHER = "digest-a", "digest-b"
LIVE = timedelta(minutes=5)  # well inside retention
AT_EDGE = RETENTION  # retention is "older than": still live
PAST = RETENTION + timedelta(microseconds=1)

RESULT = Result(
    invocation_id="inv-1",
    status="ok",
    value={"order": "o-1"},
    commit_status="committed",
    observed_at=NOW - LIVE,
)


def new_intent(digest: str = SAME) -> Intent:
    return Intent(
        key=KEY,
        digest=digest,
        invocation_id="inv-2",
        tool="orders.create@v1",
        canonical=b'{"qty":2}',
        subject={"id": "mira", "tenant": "acme", "session": None},
        deadline=NOW + timedelta(seconds=30),
    )


def held(phase: Phase, digest: str = SAME, age: timedelta = LIVE) -> Existing:
    """The record inv-1 holds at KEY: in ``phase``, for ``digest``, created ``age`` ago."""
    return Existing(
        digest=digest,
        invocation_id="inv-1",
        phase=phase,
        created_at=NOW - age,
        result=RESULT if phase == "committed" else None,
    )


# -- R8: the claim --------------------------------------------------------------------

# (the record at the key, the expiry policy) -> the answer's kind
R8 = [
    pytest.param(None, "reject", "claimed", id="free key -> claimed"),
    pytest.param(held("committed"), "reject", "replay", id="same digest, success -> replay"),
    pytest.param(held("intent"), "reject", "in_flight", id="same digest, intent -> in flight"),
    pytest.param(
        held("executing"), "reject", "in_flight", id="same digest, executing -> in flight"
    ),
    pytest.param(held("unknown"), "reject", "in_flight", id="same digest, unknown -> in flight"),
    pytest.param(held("failed"), "reject", "claimed", id="same digest, failed -> claimed again"),
    *(
        pytest.param(held(p, OTHER), "reject", "key_reused", id=f"other digest, {p} -> key reused")
        for p in PHASES
    ),
    pytest.param(
        held("committed", age=AT_EDGE), "reject", "replay", id="at retention, reject -> still live"
    ),
    pytest.param(
        held("committed", age=AT_EDGE), "new", "replay", id="at retention, new -> still live"
    ),
    *(
        pytest.param(
            held(p, d, PAST), "reject", "expired", id=f"past retention, reject, {p}, {d} -> expired"
        )
        for p in ("committed", "executing")
        for d in (SAME, OTHER)
    ),
    *(
        pytest.param(
            held(p, d, PAST), "new", "claimed", id=f"past retention, new, {p}, {d} -> claimed"
        )
        for p in ("committed", "executing")
        for d in (SAME, OTHER)
    ),
]


@pytest.mark.parametrize(("existing", "policy", "kind"), R8)
def test_r8_claim_table(existing: Existing | None, policy: ExpiredPolicy, kind: str):
    """Each case of R8 gives its answer; only a Claimed answer writes anything."""
    decision = decide_claim(new_intent(), existing, now=NOW, retention=RETENTION, expired=policy)
    assert decision.answer.kind == kind
    assert (decision.write is not None) == (kind == "claimed")
    if existing is not None and kind != "claimed":
        assert decision.answer.invocation_id == "inv-1"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "existing",
    [
        pytest.param(None, id="free key"),
        pytest.param(held("failed"), id="failed, same digest"),
        pytest.param(held("committed", OTHER, PAST), id="expired, policy new"),
        pytest.param(
            dataclasses.replace(held("failed"), epoch=4), id="failed under epoch 4, same digest"
        ),
    ],
)
def test_a_claim_writes_a_fresh_intent_record(existing: Existing | None):
    """Claimed writes the new intent in phase intent, created now, with no result or evidence.

    Its epoch is 1 on a free key and one more than the record it replaces.
    """
    intent = new_intent()
    decision = decide_claim(intent, existing, now=NOW, retention=RETENTION, expired="new")
    epoch = 1 if existing is None else existing.epoch + 1
    assert decision.answer == Claimed(epoch=epoch)
    record = decision.write
    assert record == intent_record(intent, now=NOW, epoch=epoch)
    assert record is not None
    assert (record.invocation_id, record.digest, record.phase) == ("inv-2", intent.digest, "intent")
    assert (record.created_at, record.updated_at) == (NOW, NOW)
    assert (record.result, record.evidence) == (None, ())


@pytest.mark.parametrize("opening", ["intent", "executing"])
def test_a_claim_opens_its_record_in_the_phase_asked(opening: Phase):
    """A claim made as the call starts writes its record straight in 'executing' (R9)."""
    decision = decide_claim(
        new_intent(), None, now=NOW, retention=RETENTION, expired="reject", phase=opening
    )
    assert decision.answer == Claimed()
    assert decision.write is not None
    assert decision.write.phase == opening


@pytest.mark.parametrize("phase", ["committed", "failed", "unknown"])
def test_a_claim_never_opens_a_settled_record(phase: Phase):
    """Only intent and executing open a record: a claim is never an outcome."""
    with pytest.raises(LedgerError) as err:
        intent_record(new_intent(), now=NOW, phase=phase)
    assert err.value.code == "illegal_phase"


def test_replay_returns_the_original_result():
    """R8: same digest and success -> the stored result itself, no second side effect."""
    decision = decide_claim(
        new_intent(), held("committed"), now=NOW, retention=RETENTION, expired="reject"
    )
    assert decision.answer == Replay(invocation_id="inv-1", result=RESULT)


@pytest.mark.parametrize("phase", ["intent", "executing", "unknown"])
def test_in_flight_names_the_phase(phase: Phase):
    """R8: same digest still executing -> in progress, with the phase it is in."""
    decision = decide_claim(
        new_intent(), held(phase), now=NOW, retention=RETENTION, expired="reject"
    )
    assert decision.answer == InFlight(invocation_id="inv-1", phase=phase)


def test_committed_without_a_stored_result_is_in_flight():
    """A committed record with nothing to replay is reported in flight, never re-run."""
    existing = dataclasses.replace(held("committed"), result=None)
    decision = decide_claim(new_intent(), existing, now=NOW, retention=RETENTION, expired="new")
    assert decision.answer == InFlight(invocation_id="inv-1", phase="committed")
    assert decision.write is None


@pytest.mark.parametrize(("existing", "policy", "kind"), R8[1:])
def test_a_whole_record_and_its_claim_columns_decide_alike(
    existing: Existing, policy: ExpiredPolicy, kind: str
):
    """The memory store's LedgerRecord and the SQL stores' selected columns get one answer."""
    whole = dataclasses.replace(
        intent_record(new_intent(existing.digest), now=existing.created_at),
        invocation_id=existing.invocation_id,
        phase=existing.phase,
        result=existing.result,
    )
    args = {"now": NOW, "retention": RETENTION, "expired": policy}
    assert decide_claim(new_intent(), whole, **args) == decide_claim(new_intent(), existing, **args)
    assert decide_claim(new_intent(), whole, **args).answer.kind == kind


# -- R9: who may advance, and along which edge ----------------------------------------

LEGAL = [(a, b) for a in PHASES for b in PHASES if b in PHASE_EDGES[a]]
ILLEGAL = [(a, b) for a in PHASES for b in PHASES if b not in PHASE_EDGES[a]]


@pytest.mark.parametrize(("current", "target"), LEGAL)
def test_the_holder_may_take_every_edge_of_the_table(current: Phase, target: Phase):
    """R9: the invocation holding the key moves it along any edge of PHASE_EDGES."""
    check_advance(KEY, invocation_id="inv-1", target=target, holder="inv-1", current=current)


@pytest.mark.parametrize(("current", "target"), ILLEGAL)
def test_any_other_edge_is_illegal_phase(current: Phase, target: Phase):
    """R9: an edge not in PHASE_EDGES raises illegal_phase, even for the holder."""
    with pytest.raises(LedgerError) as err:
        check_advance(KEY, invocation_id="inv-1", target=target, holder="inv-1", current=current)
    assert err.value.code == "illegal_phase"


@pytest.mark.parametrize(
    ("holder", "current"),
    [
        pytest.param(None, None, id="no record"),
        pytest.param("inv-9", "intent", id="another invocation's record"),
        pytest.param("inv-9", "committed", id="another's, and the edge is illegal too"),
    ],
)
def test_only_the_holder_may_advance(holder: str | None, current: Phase | None):
    """Only the invocation that claimed a key moves its record; anyone else is not_holder."""
    with pytest.raises(LedgerError) as err:
        check_advance(
            KEY, invocation_id="inv-1", target="executing", holder=holder, current=current
        )
    assert err.value.code == "not_holder"


# -- R9: epochs fence an owner that was taken over -------------------------------------

# (the holder's epoch, the record's epoch) -> the error code, or None when the advance goes
EPOCHS = [
    pytest.param(None, 3, None, id="no epoch given (an operator) -> allowed"),
    pytest.param(3, 3, None, id="the record's own epoch -> allowed"),
    pytest.param(2, 3, "fenced", id="an older epoch: taken over since -> fenced"),
    pytest.param(4, 3, "fenced", id="an epoch the record never had -> fenced"),
]


@pytest.mark.parametrize(("epoch", "held_epoch", "code"), EPOCHS)
def test_epoch_table(epoch: int | None, held_epoch: int, code: str | None):
    """A holder moves its record only under the epoch the record is in."""
    if code is None:
        check_advance(
            KEY,
            invocation_id="inv-1",
            target="committed",
            holder="inv-1",
            current="executing",
            epoch=epoch,
            held=held_epoch,
        )
        return
    with pytest.raises(LedgerError) as err:
        check_advance(
            KEY,
            invocation_id="inv-1",
            target="committed",
            holder="inv-1",
            current="executing",
            epoch=epoch,
            held=held_epoch,
        )
    assert err.value.code == code


# (the phase the owner left, when the taker looks) -> the phase after, or the error code
OWNER_DEADLINE = NOW + timedelta(seconds=30)
TAKEOVER = [
    pytest.param("executing", OWNER_DEADLINE, "not_yet", id="before the deadline -> not_yet"),
    pytest.param(
        "executing", OWNER_DEADLINE + CLOCK_SKEW, "not_yet", id="within clock skew -> not_yet"
    ),
    pytest.param(
        "executing",
        OWNER_DEADLINE + CLOCK_SKEW + timedelta(microseconds=1),
        "unknown",
        id="past deadline + skew, executing -> unknown: it may have run",
    ),
    pytest.param(
        "intent",
        OWNER_DEADLINE + CLOCK_SKEW + timedelta(microseconds=1),
        "failed",
        id="past deadline + skew, intent -> failed: never started",
    ),
    *(
        pytest.param(p, OWNER_DEADLINE + timedelta(hours=1), "illegal_phase", id=f"{p} -> illegal")
        for p in ("committed", "failed", "unknown")
    ),
]


@pytest.mark.parametrize(("phase", "at", "expected"), TAKEOVER)
def test_takeover_table(phase: Phase, at: datetime, expected: str):
    """R9: a call is taken from its owner only once it can no longer start its effect."""
    record = dataclasses.replace(
        intent_record(new_intent(), now=NOW, epoch=5), phase=phase, deadline=OWNER_DEADLINE
    )
    if expected in ABANDONED.values():
        taken = taken_over(record, KEY, invocation_id="inv-2", now=at, evidence={"by": "b"})
        assert (taken.phase, taken.epoch, taken.updated_at) == (expected, 6, at)
        assert taken.evidence == ({"by": "b", TAKEN_OVER: phase, "epoch": 6},)
        return
    with pytest.raises(LedgerError) as err:
        taken_over(record, KEY, invocation_id="inv-2", now=at)
    assert err.value.code == expected
    if isinstance(err.value, NotYetError):
        assert err.value.retry_at == owner_may_act_until(record) == OWNER_DEADLINE + CLOCK_SKEW


def test_a_takeover_of_another_invocations_record_is_not_holder():
    """Only the record the named invocation holds is taken over."""
    record = intent_record(new_intent(), now=NOW)
    with pytest.raises(LedgerError) as err:
        taken_over(record, KEY, invocation_id="inv-9", now=NOW + timedelta(days=1))
    assert err.value.code == "not_holder"


# -- R9: the sweep of abandoned records -----------------------------------------------

GRACE = timedelta(seconds=10)
DEADLINE = NOW - GRACE  # exactly at deadline + grace: not yet abandoned
JUST_PAST = DEADLINE - timedelta(microseconds=1)

# (the phase left behind, its deadline) -> the phase after the sweep (None: untouched)
SWEEP = [
    pytest.param("intent", JUST_PAST, "failed", id="intent, abandoned -> failed: never started"),
    pytest.param("executing", JUST_PAST, "unknown", id="executing, abandoned -> unknown"),
    pytest.param("intent", DEADLINE, None, id="intent, at deadline + grace -> untouched"),
    pytest.param("executing", DEADLINE, None, id="executing, at deadline + grace -> untouched"),
    *(
        pytest.param(p, JUST_PAST, None, id=f"{p}, settled -> untouched")
        for p in ("committed", "failed", "unknown")
    ),
]


@pytest.mark.parametrize(("phase", "deadline", "after"), SWEEP)
def test_sweep_table(phase: Phase, deadline: datetime, after: Phase | None):
    """R9: a dead process's intent fails, its executing call becomes unknown; nothing else."""
    record = dataclasses.replace(
        intent_record(new_intent(), now=NOW - LIVE), phase=phase, deadline=deadline
    )
    settled = swept(record, now=NOW, grace=GRACE)
    if after is None:
        assert settled is None
    else:
        assert settled is not None
        assert (settled.phase, settled.updated_at) == (after, NOW)


def test_a_sweep_appends_its_evidence_and_keeps_the_rest():
    """The swept record keeps its evidence and gains {"swept": <phase it was left in>}."""
    record = dataclasses.replace(
        intent_record(new_intent(), now=NOW - LIVE),
        phase="executing",
        deadline=JUST_PAST,
        evidence=({"note": "started"},),
    )
    settled = swept(record, now=NOW, grace=GRACE)
    assert settled is not None
    assert settled.evidence == ({"note": "started"}, {SWEPT: "executing"})
    assert dataclasses.replace(
        settled, phase="executing", updated_at=record.updated_at, epoch=record.epoch
    ) == (dataclasses.replace(record, evidence=settled.evidence))
    assert settled.epoch == record.epoch + 1  # a sweep is a takeover: the next epoch


def test_every_sweep_is_an_edge_of_the_table():
    """A sweep moves records only along PHASE_EDGES, like any other advance (R9)."""
    assert all(settled in PHASE_EDGES[left] for left, settled in ABANDONED.items())


def test_abandoned_means_deadline_before_now_minus_grace():
    """The cutoff the SQL stores compare deadlines with is now - grace."""
    assert abandoned_before(NOW, GRACE) == NOW - GRACE


# -- the sweep in SQL form ------------------------------------------------------------


def test_the_sql_sweep_names_the_phases_of_the_partial_index():
    """The SQL sweep's IN list reads exactly like the open-records index, so it can use it."""
    indexes = [
        statement
        for migration in migrations.MIGRATIONS
        for dialect in ("sqlite", "postgres")
        for statement in migration.statements(dialect)
        if "toolbound_ledger_open ON" in statement
    ]
    assert len(indexes) == 2  # one per dialect
    assert all(f"WHERE phase IN ({SWEEP_FROM})" in statement for statement in indexes)


def test_the_sqlite_sweep_searches_the_open_records_index(tmp_path: Path):
    """SQLite plans the sweep on the partial index of intent/executing records."""
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        plan = ledger._connection().execute("EXPLAIN QUERY PLAN " + _SWEEP, (0, 0)).fetchall()
    assert any("toolbound_ledger_open" in str(row[-1]) for row in plan)

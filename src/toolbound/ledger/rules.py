"""The ledger's decisions, written once for every store (R8, R9, R19).

This module owns what a record *means*; the stores own how it is kept. Each store
reads under its own lock (a Python lock, SQLite's ``BEGIN IMMEDIATE``, PostgreSQL's
``SELECT … FOR UPDATE``), asks a function here, and writes what the answer says:

* :func:`decide_claim` — R8: what the record already at a key means for a new intent
  (:class:`~toolbound.ledger.store.Claimed`, ``Replay``, ``InFlight``, ``KeyReused`` or
  ``Expired``), and the record a claim writes (:func:`intent_record`), in ``intent`` or,
  for a call about to run, straight in ``executing`` (:data:`OPENING`);
* :func:`check_advance` — who may move a record, and along which edge of
  :data:`~toolbound.ledger.store.PHASE_EDGES` (R9; the table itself lives beside the
  protocol);
* :data:`ABANDONED` and :func:`swept` — R9: what a sweep makes of a record a dead
  process left in ``intent`` or ``executing``;
* :func:`taken_over` — R9: the same, for one call another process takes over, and
  when it may (:func:`owner_may_act_until`: not before the owner's deadline).

Every claim and every takeover opens a new *epoch* of the key (its fencing token):
:func:`check_advance` refuses a holder whose epoch is no longer the record's.

No I/O and no clock: every function takes the instants it compares, so the memory,
SQLite and PostgreSQL stores answer alike by construction, and the table tests in
``tests/ledger/test_rules.py`` read like R8.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Final

from toolbound.ledger.store import (
    Claimed,
    Expired,
    InFlight,
    KeyReused,
    LedgerError,
    LedgerRecord,
    NotYetError,
    Replay,
    check_edge,
)

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime

    from toolbound._model import Result
    from toolbound.ledger.store import Claim, ExpiredPolicy, Intent, LedgerKey, Phase

__all__ = [
    "ABANDONED",
    "CLOCK_SKEW",
    "OPENING",
    "SWEPT",
    "TAKEN_OVER",
    "ClaimDecision",
    "Existing",
    "abandoned_before",
    "check_advance",
    "decide_claim",
    "intent_record",
    "owner_may_act_until",
    "swept",
    "taken_over",
]


# -- claim (R8) ----------------------------------------------------------------------

OPENING: Final[frozenset[Phase]] = frozenset({"intent", "executing"})
"""The phases a claim may write a record in: ``intent``, or ``executing`` when the
claim is made as the call starts (one commit for both, R9). Both are phases a sweep
settles (:data:`ABANDONED`), so a claimed record is never stranded."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Existing:
    """What the claim rule reads of the record already at a key.

    The SQL stores select just these columns under their lock; the memory store passes
    its whole :class:`~toolbound.ledger.store.LedgerRecord`, which has the same fields.
    """

    digest: str
    invocation_id: str
    phase: Phase
    created_at: datetime
    result: Result | None = None
    epoch: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimDecision:
    """The answer a claim gives, and what the store must then write at the key.

    ``write`` is the fresh intent record when the answer is ``Claimed`` (inserted, or
    replacing the old record), and ``None`` for every other answer: nothing changes.
    """

    answer: Claim
    write: LedgerRecord | None = None


def intent_record(
    intent: Intent, *, now: datetime, phase: Phase = "intent", epoch: int = 1
) -> LedgerRecord:
    """The record a successful claim writes: ``phase``, no result, no evidence.

    ``phase`` is one of :data:`OPENING`; any other raises ``illegal_phase``. ``epoch``
    is the new ownership's: ``1`` on a free key, one more than the record it replaces.
    """
    if phase not in OPENING:
        msg = f"a claim cannot open a record in phase {phase}"
        raise LedgerError(msg, code="illegal_phase")
    return LedgerRecord(
        key=intent.key,
        digest=intent.digest,
        invocation_id=intent.invocation_id,
        tool=intent.tool,
        canonical=intent.canonical,
        subject=dict(intent.subject),
        phase=phase,
        deadline=intent.deadline,
        created_at=now,
        updated_at=now,
        epoch=epoch,
    )


def decide_claim(
    intent: Intent,
    existing: Existing | LedgerRecord | None,
    *,
    now: datetime,
    retention: timedelta,
    expired: ExpiredPolicy,
    phase: Phase = "intent",
) -> ClaimDecision:
    """What ``existing`` (the record at ``intent.key``, if any) means for ``intent`` (R8).

    ``phase`` is the phase a ``Claimed`` answer's record opens in (:data:`OPENING`); it
    changes nothing else. The order matters: retention is judged before anything else,
    so an expired record is never replayed, reported in flight, or held against a new
    digest.
    """
    # A new ownership of a key that had one is a new epoch: an owner of the old record
    # that wakes up late is fenced off the new one.
    epoch = 1 if existing is None else existing.epoch + 1
    if existing is not None and now - existing.created_at > retention:
        if expired == "reject":
            return ClaimDecision(answer=Expired(invocation_id=existing.invocation_id))
        existing = None  # R8: past retention the configured policy says "new", not a guess
    if existing is None or (existing.phase == "failed" and existing.digest == intent.digest):
        # A failure before the commit boundary changed nothing: the same call may run again.
        return ClaimDecision(
            answer=Claimed(epoch=epoch),
            write=intent_record(intent, now=now, phase=phase, epoch=epoch),
        )
    if existing.digest != intent.digest:
        return ClaimDecision(answer=KeyReused(invocation_id=existing.invocation_id))  # R8
    if existing.phase == "committed" and existing.result is not None:
        # R8: same digest and success → the original result, no second side effect.
        return ClaimDecision(
            answer=Replay(invocation_id=existing.invocation_id, result=existing.result)
        )
    # R8: same digest still executing → in progress (intent, executing, unknown).
    return ClaimDecision(
        answer=InFlight(invocation_id=existing.invocation_id, phase=existing.phase)
    )


# -- advance (R9) --------------------------------------------------------------------


def check_advance(
    key: LedgerKey,
    *,
    invocation_id: str,
    target: Phase,
    holder: str | None,
    current: Phase | None,
    epoch: int | None = None,
    held: int | None = None,
) -> None:
    """Raise :class:`~toolbound.ledger.store.LedgerError` unless the advance is allowed.

    ``holder``, ``current`` and ``held`` are the invocation, phase and epoch of the
    record at ``key`` (``None`` when there is none). Only the invocation that claimed a
    key may move its record (``not_holder``), only under the epoch it claimed, when one
    is given (``fenced``: the call was taken over since), and only along
    :data:`~toolbound.ledger.store.PHASE_EDGES` (``illegal_phase``).
    """
    if holder is None or holder != invocation_id or current is None:
        msg = f"invocation {invocation_id} does not hold {key}"
        raise LedgerError(msg, code="not_holder")
    if epoch is not None and held != epoch:
        msg = (
            f"invocation {invocation_id} held {key} under epoch {epoch}, but it is under "
            f"epoch {held} now: another process took the call over"
        )
        raise LedgerError(msg, code="fenced")
    check_edge(current, target)


# -- sweep (R9) ----------------------------------------------------------------------

ABANDONED: Final[dict[Phase, Phase]] = {
    "intent": "failed",  # the tool was never started: nothing happened
    "executing": "unknown",  # R9: it may have committed; never reported "not executed"
}
"""What a sweep makes of a record a dead process left behind, by phase; both are edges
of :data:`~toolbound.ledger.store.PHASE_EDGES`. Other phases are settled and stay."""

SWEPT: Final = "swept"
"""The evidence a sweep appends: ``{"swept": <the phase the record was left in>}``."""


def abandoned_before(now: datetime, grace: timedelta) -> datetime:
    """The cutoff: a record whose deadline is earlier than this was abandoned.

    At exactly ``deadline + grace`` the record is still given its chance.
    """
    return now - grace


def swept(record: LedgerRecord, *, now: datetime, grace: timedelta) -> LedgerRecord | None:
    """``record`` as a sweep at ``now`` leaves it, or ``None`` if the sweep leaves it alone."""
    settled = ABANDONED.get(record.phase)
    if settled is None or not record.deadline < abandoned_before(now, grace):
        return None
    return replace(
        record,
        phase=settled,
        updated_at=now,
        evidence=(*record.evidence, {SWEPT: record.phase}),
        epoch=record.epoch + 1,  # a sweep takes the call from its owner
    )


# -- take over (R9) ------------------------------------------------------------------

CLOCK_SKEW: Final = timedelta(seconds=1)
"""How far apart the clocks of the processes sharing a ledger may be. A takeover waits
this much past the owner's deadline, which the owner read on its own clock."""

TAKEN_OVER: Final = "taken_over"
"""The evidence a takeover appends: ``{"taken_over": <phase left in>, "epoch": <new>}``
and whatever the taker adds."""


def owner_may_act_until(record: LedgerRecord) -> datetime:
    """The last instant the owner of ``record`` may still start its effect, by any clock.

    The runtime starts an effect only before the call's deadline (and while its lease
    is held); allowing for :data:`CLOCK_SKEW`, nobody may take the call, or find it
    "not committed", before this instant has passed.
    """
    return record.deadline + CLOCK_SKEW


def taken_over(
    record: LedgerRecord | None,
    key: LedgerKey,
    *,
    invocation_id: str,
    now: datetime,
    evidence: Mapping[str, object] | None = None,
) -> LedgerRecord:
    """``record`` as a takeover at ``now`` leaves it, or why it may not be taken (R9).

    Only the record ``invocation_id`` holds, left in ``intent`` or ``executing``
    (:data:`ABANDONED`: ``not_holder`` / ``illegal_phase`` otherwise), and only once
    :func:`owner_may_act_until` has passed (:class:`~toolbound.ledger.store.NotYetError`).
    The taken record is under the next epoch.
    """
    holder = None if record is None else record.invocation_id
    current = None if record is None else record.phase
    settled = None if current is None else ABANDONED.get(current)
    check_advance(
        key,
        invocation_id=invocation_id,
        target=settled if settled is not None else "unknown",
        holder=holder,
        current=current,
    )
    assert record is not None  # noqa: S101 - check_advance refuses a missing record
    assert settled is not None  # noqa: S101 - only intent and executing reach unknown/failed
    until = owner_may_act_until(record)
    if now <= until:
        msg = (
            f"invocation {invocation_id} may still start its effect until "
            f"{until.isoformat()} (its deadline, plus {CLOCK_SKEW.total_seconds():g} s for "
            "clocks that differ); take it over after that"
        )
        raise NotYetError(msg, retry_at=until)
    epoch = record.epoch + 1
    return replace(
        record,
        phase=settled,
        updated_at=now,
        evidence=(*record.evidence, {**(evidence or {}), TAKEN_OVER: current, "epoch": epoch}),
        epoch=epoch,
    )

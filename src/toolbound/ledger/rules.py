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
  process left in ``intent`` or ``executing``.

No I/O and no clock: every function takes the instants it compares, so the memory,
SQLite and PostgreSQL stores answer alike by construction, and the table tests in
``tests/ledger/test_rules.py`` read like R8.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from toolbound.ledger.store import (
    Claimed,
    Expired,
    InFlight,
    KeyReused,
    LedgerError,
    LedgerRecord,
    Replay,
    check_edge,
)

if TYPE_CHECKING:
    from datetime import datetime, timedelta

    from toolbound._model import Result
    from toolbound.ledger.store import Claim, ExpiredPolicy, Intent, LedgerKey, Phase

__all__ = [
    "ABANDONED",
    "OPENING",
    "SWEPT",
    "ClaimDecision",
    "Existing",
    "abandoned_before",
    "check_advance",
    "decide_claim",
    "intent_record",
    "swept",
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


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimDecision:
    """The answer a claim gives, and what the store must then write at the key.

    ``write`` is the fresh intent record when the answer is ``Claimed`` (inserted, or
    replacing the old record), and ``None`` for every other answer: nothing changes.
    """

    answer: Claim
    write: LedgerRecord | None = None


def intent_record(intent: Intent, *, now: datetime, phase: Phase = "intent") -> LedgerRecord:
    """The record a successful claim writes: ``phase``, no result, no evidence.

    ``phase`` is one of :data:`OPENING`; any other raises ``illegal_phase``.
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
    if existing is not None and now - existing.created_at > retention:
        if expired == "reject":
            return ClaimDecision(answer=Expired(invocation_id=existing.invocation_id))
        existing = None  # R8: past retention the configured policy says "new", not a guess
    if existing is None or (existing.phase == "failed" and existing.digest == intent.digest):
        # A failure before the commit boundary changed nothing: the same call may run again.
        return ClaimDecision(answer=Claimed(), write=intent_record(intent, now=now, phase=phase))
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
) -> None:
    """Raise :class:`~toolbound.ledger.store.LedgerError` unless the advance is allowed.

    ``holder`` and ``current`` are the invocation and phase of the record at ``key``
    (``None`` when there is none). Only the invocation that claimed a key may move its
    record (``not_holder``), and only along :data:`~toolbound.ledger.store.PHASE_EDGES`
    (``illegal_phase``).
    """
    if holder is None or holder != invocation_id or current is None:
        msg = f"invocation {invocation_id} does not hold {key}"
        raise LedgerError(msg, code="not_holder")
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
    )

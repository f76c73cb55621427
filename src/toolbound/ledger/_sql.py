"""Pure decisions shared by the SQL ledgers, so both answer exactly like the memory store.

No I/O here: each store reads a row under its write lock, asks :func:`decide` what
the row means for a new intent, and writes what the answer says.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, NoReturn

from toolbound._errors import ConfigurationError
from toolbound.ledger.store import (
    PHASE_EDGES,
    Claim,
    Expired,
    ExpiredPolicy,
    InFlight,
    KeyReused,
    LedgerError,
    Replay,
    check_edge,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from toolbound._model import Result
    from toolbound.ledger.store import Intent, LedgerKey, Phase

__all__ = [
    "EPOCH",
    "SOURCES",
    "decide",
    "dumps",
    "explain_refused_advance",
    "from_micros",
    "loads_evidence",
    "require_aware",
    "to_micros",
    "validate_settings",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

SOURCES: dict[Phase, tuple[Phase, ...]] = {
    target: tuple(p for p, targets in PHASE_EDGES.items() if target in targets)
    for target in PHASE_EDGES
}
"""For each phase, the phases that may move to it: an ``UPDATE … WHERE phase IN``
guard made from :data:`PHASE_EDGES`, so the table stays the one source of truth (R9)."""


def validate_settings(retention: timedelta, expired: str) -> ExpiredPolicy:
    """Check the R8 retention settings every store takes; return the typed policy."""
    if retention <= timedelta(0):
        msg = f"ledger retention must be positive, not {retention}"
        raise ConfigurationError(msg)
    if expired == "reject":
        return "reject"
    if expired == "new":
        return "new"
    msg = f"expired must be 'reject' or 'new' (R8: an explicit policy), not {expired!r}"
    raise ConfigurationError(msg)


def require_aware(instant: datetime) -> datetime:
    """``instant`` itself; a naive datetime is a bug in the caller, not a time to guess."""
    if instant.tzinfo is None or instant.utcoffset() is None:
        msg = f"ledger instants must be timezone-aware, got naive {instant.isoformat()}"
        raise ConfigurationError(msg)
    return instant


def to_micros(instant: datetime) -> int:
    """Exact integer microseconds since the epoch (SQLite stores instants this way)."""
    return (require_aware(instant) - EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    """The inverse of :func:`to_micros`, in UTC."""
    return EPOCH + timedelta(microseconds=micros)


def dumps(value: object) -> str:
    """Compact JSON text, unicode kept as is (what the SQL stores write)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def decide(
    intent: Intent,
    *,
    digest: str,
    invocation_id: str,
    phase: Phase,
    created_at: datetime,
    result: Result | None,
    now: datetime,
    retention: timedelta,
    expired: ExpiredPolicy,
) -> Claim | None:
    """What an existing record means for ``intent``; ``None`` means "overwrite it, claimed".

    The order mirrors :class:`~toolbound.ledger.memory.MemoryLedger` exactly.
    """
    if now - created_at > retention:
        if expired == "reject":
            return Expired(invocation_id=invocation_id)
        return None  # R8: the configured policy says treat it as new
    if phase == "failed" and digest == intent.digest:
        return None  # a failure before commit changed nothing; the same call may run again
    if digest != intent.digest:
        return KeyReused(invocation_id=invocation_id)  # R8: different digest → reject reuse
    if phase == "committed" and result is not None:
        return Replay(invocation_id=invocation_id, result=result)  # R8: no second effect
    return InFlight(invocation_id=invocation_id, phase=phase)


def explain_refused_advance(
    key: LedgerKey,
    *,
    invocation_id: str,
    target: Phase,
    holder: str | None,
    current: Phase | None,
) -> NoReturn:
    """Raise the :class:`LedgerError` for a guarded ``UPDATE`` that changed no row."""
    if holder is None or holder != invocation_id or current is None:
        msg = f"invocation {invocation_id} does not hold {key}"
        raise LedgerError(msg, code="not_holder")
    check_edge(current, target)
    # The guard refused an edge the table allows: the row moved between our UPDATE and
    # the read that explains it. Say so rather than pretend the write happened.
    msg = f"ledger record {key} changed concurrently (now {current}); {target} not recorded"
    raise LedgerError(msg, code="illegal_phase")


def loads_evidence(text: str | bytes) -> tuple[Mapping[str, object], ...]:
    """Evidence as the stores return it: a tuple of JSON objects."""
    items = json.loads(text)
    return tuple(items)

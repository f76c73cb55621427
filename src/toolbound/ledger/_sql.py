"""What the SQL ledgers share: settings, instants, JSON, and the rules in SQL form.

The rules themselves are :mod:`toolbound.ledger.rules`, shared with the memory store;
here they are only put the way SQL needs them (:data:`SOURCES`, and the sweep's
:data:`SWEEP_FROM`, :data:`SWEEP_TO`, :data:`SWEEP_EVIDENCE`). No I/O here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, NoReturn

from toolbound._errors import ConfigurationError
from toolbound.ledger.rules import ABANDONED, SWEPT, check_advance
from toolbound.ledger.store import _ENCODE, PHASE_EDGES, ExpiredPolicy, LedgerError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from toolbound.ledger.store import LedgerKey, Phase

__all__ = [
    "EPOCH",
    "SOURCES",
    "SOURCES_SQL",
    "SWEEP_EVIDENCE",
    "SWEEP_FROM",
    "SWEEP_TO",
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

SOURCES_SQL: dict[Phase, str] = {
    target: ", ".join(f"'{phase}'" for phase in sources) or "NULL"
    for target, sources in SOURCES.items()
}
""":data:`SOURCES` as SQL lists, for ``phase IN (…)`` written into each advance
statement: a constant list costs SQLite and PostgreSQL nothing per call, where a list
bound as a parameter is decoded on every one. ``NULL`` where no phase may move (no row
matches ``phase IN (NULL)``)."""

# The sweep is one UPDATE in each SQL store, so its rule (rules.ABANDONED) is spelled in
# SQL here, once. The phases are constants of the table, never input, and the IN list
# must read like the partial index on open records, "phase IN ('intent', 'executing')",
# for the planners to use that index.
SWEEP_FROM = ", ".join(f"'{phase}'" for phase in ABANDONED)
"""The phases a sweep settles, as an SQL list: ``'intent', 'executing'``."""
SWEEP_TO = (
    "CASE phase "
    + " ".join(f"WHEN '{left}' THEN '{settled}'" for left, settled in ABANDONED.items())
    + " END"
)
"""What each of them becomes, as an SQL expression over the ``phase`` column."""
SWEEP_EVIDENCE = f"'{SWEPT}', phase"
"""The arguments of ``json_object`` / ``jsonb_build_object`` for the evidence a sweep
appends: ``{"swept": <the phase the record was left in>}``."""


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
    return _ENCODE(value)


def explain_refused_advance(
    key: LedgerKey,
    *,
    invocation_id: str,
    target: Phase,
    holder: str | None,
    current: Phase | None,
    epoch: int | None = None,
    held: int | None = None,
) -> NoReturn:
    """Raise the :class:`LedgerError` for a guarded ``UPDATE`` that changed no row.

    ``holder``, ``current`` and ``held`` (the record's epoch) are read after the
    refusal; the rule that refused is :func:`~toolbound.ledger.rules.check_advance`.
    """
    check_advance(
        key,
        invocation_id=invocation_id,
        target=target,
        holder=holder,
        current=current,
        epoch=epoch,
        held=held,
    )
    # The guard refused an edge the table allows: the row moved between our UPDATE and
    # the read that explains it. Say so rather than pretend the write happened.
    msg = f"ledger record {key} changed concurrently (now {current}); {target} not recorded"
    raise LedgerError(msg, code="illegal_phase")


def loads_evidence(text: str | bytes) -> tuple[Mapping[str, object], ...]:
    """Evidence as the stores return it: a tuple of JSON objects."""
    items = json.loads(text)
    return tuple(items)

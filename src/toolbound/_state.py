"""The call state machine (R2): one table, one transition function.

Main path::

    PROPOSED → PARSED → VALIDATED → AUTHORIZED → PREPARED → EXECUTING → COMMITTED → OBSERVED

A call waiting for a person sits in AWAITING_CONFIRMATION, between AUTHORIZED and
PREPARED. Side terminals are listed in :data:`TERMINAL`. OUTCOME_UNKNOWN is left only
by reconciliation with recorded evidence (to COMMITTED or FAILED_BEFORE_COMMIT).
Every change of state goes through :meth:`~toolbound._lifecycle.Lifecycle.advance`,
which refuses any edge not in :data:`TRANSITIONS` (leaving the state unchanged) and
appends one trace event.
"""

from __future__ import annotations

import enum

__all__ = ["OUTCOME_KIND", "REJECTED", "TERMINAL", "TRANSITIONS", "State"]


class State(enum.Enum):
    """Where one call stands."""

    # Members are singletons: identity hashing is exact and avoids Enum's
    # Python-level __hash__ on every transition check.
    __hash__ = object.__hash__

    PROPOSED = "proposed"
    PARSED = "parsed"
    VALIDATED = "validated"
    AUTHORIZED = "authorized"
    AWAITING_CONFIRMATION = "awaiting_confirmation"
    PREPARED = "prepared"
    EXECUTING = "executing"
    COMMITTED = "committed"
    OBSERVED = "observed"
    PARSE_REJECTED = "parse_rejected"
    VALIDATION_REJECTED = "validation_rejected"
    AUTHORIZATION_REJECTED = "authorization_rejected"
    CANCELLED_BEFORE_COMMIT = "cancelled_before_commit"
    FAILED_BEFORE_COMMIT = "failed_before_commit"
    OUTCOME_UNKNOWN = "outcome_unknown"
    FAILED_AFTER_COMMIT = "failed_after_commit"


S = State

TRANSITIONS: dict[State, frozenset[State]] = {
    S.PROPOSED: frozenset({S.PARSED, S.PARSE_REJECTED}),
    S.PARSED: frozenset({S.VALIDATED, S.VALIDATION_REJECTED}),
    S.VALIDATED: frozenset({S.AUTHORIZED, S.AUTHORIZATION_REJECTED}),
    # The target check runs once authority is settled; a stale target fails the
    # call before anything was executed.
    S.AUTHORIZED: frozenset(
        {
            S.AWAITING_CONFIRMATION,
            S.PREPARED,
            S.FAILED_BEFORE_COMMIT,
            S.CANCELLED_BEFORE_COMMIT,
        }
    ),
    # R7: a person approves (→ PREPARED after re-authorization) or denies.
    S.AWAITING_CONFIRMATION: frozenset(
        {
            S.PREPARED,
            S.AUTHORIZATION_REJECTED,
            S.FAILED_BEFORE_COMMIT,
            S.CANCELLED_BEFORE_COMMIT,
        }
    ),
    # R8: PREPARED → COMMITTED without executing is an idempotent replay: an earlier
    # invocation with the same key and digest already committed the effect.
    S.PREPARED: frozenset(
        {S.EXECUTING, S.COMMITTED, S.FAILED_BEFORE_COMMIT, S.CANCELLED_BEFORE_COMMIT}
    ),
    # R9: the tool says where the commit boundary is; a write timeout is UNKNOWN.
    S.EXECUTING: frozenset(
        {
            S.COMMITTED,
            S.FAILED_BEFORE_COMMIT,
            S.OUTCOME_UNKNOWN,
            S.CANCELLED_BEFORE_COMMIT,
        }
    ),
    # R9: after COMMITTED nothing can rewrite the call as "did not happen".
    S.COMMITTED: frozenset({S.OBSERVED, S.FAILED_AFTER_COMMIT}),
    # R2: left only through reconciliation with recorded evidence.
    S.OUTCOME_UNKNOWN: frozenset({S.COMMITTED, S.FAILED_BEFORE_COMMIT}),
    S.OBSERVED: frozenset(),
    S.PARSE_REJECTED: frozenset(),
    S.VALIDATION_REJECTED: frozenset(),
    S.AUTHORIZATION_REJECTED: frozenset(),
    S.CANCELLED_BEFORE_COMMIT: frozenset(),
    S.FAILED_BEFORE_COMMIT: frozenset(),
    S.FAILED_AFTER_COMMIT: frozenset(),
}

TERMINAL: frozenset[State] = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)
"""States no event can leave."""

REJECTED: frozenset[State] = frozenset(
    {S.PARSE_REJECTED, S.VALIDATION_REJECTED, S.AUTHORIZATION_REJECTED}
)
"""Rejected before execution: these can never reach EXECUTING."""

OUTCOME_KIND: dict[State, str] = {
    **dict.fromkeys(REJECTED, "rejected"),
    S.OBSERVED: "observed",
    S.AWAITING_CONFIRMATION: "awaiting_confirmation",
    S.FAILED_BEFORE_COMMIT: "failed",
    S.FAILED_AFTER_COMMIT: "failed",
    S.OUTCOME_UNKNOWN: "outcome_unknown",
    S.CANCELLED_BEFORE_COMMIT: "cancelled",
}
"""The outcome kind a call that reached a state is answered with (COMMITTED goes on)."""

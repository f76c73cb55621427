"""What running a proposal returns: one typed outcome per way a call can end (STYLE 5).

Every outcome carries the state path, the trace, the exact message for the model and
the human projection. Match on ``kind`` exhaustively::

    match outcome.kind:
        case "observed": ...
        case "rejected": ...
        case "awaiting_confirmation": ...
        case "failed": ...
        case "outcome_unknown": ...
        case "cancelled": ...
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from toolbound._frozen import quick_init

if TYPE_CHECKING:
    from toolbound._confirmation import ConfirmationRequest
    from toolbound._errors import Problem
    from toolbound._model import CommitStatus, Invocation, Result
    from toolbound._projection import HumanProjection, ModelProjection
    from toolbound._state import State
    from toolbound.trace import Trace

__all__ = [
    "AwaitingConfirmation",
    "Cancelled",
    "Failed",
    "Observed",
    "Outcome",
    "OutcomeUnknown",
    "Rejected",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Common:
    invocation_id: str
    proposal_id: str
    tool: str
    path: tuple[State, ...]
    trace: Trace
    message: ModelProjection
    """Exactly what goes back to the model for this call."""
    human: HumanProjection = field(repr=False, compare=False)
    """The human evidence projection of this call (R12), fixed when the call ended."""

    @property
    def state(self) -> State:
        """The state the call ended in."""
        return self.path[-1]


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Observed(_Common):
    """The call committed and its result passed the output contract."""

    kind: Literal["observed"] = "observed"
    invocation: Invocation
    result: Result
    replayed_from: str | None = None
    """Set when an idempotent replay returned an earlier invocation's result (R8)."""


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Rejected(_Common):
    """Refused before execution: parse, validation, semantic or authorization."""

    kind: Literal["rejected"] = "rejected"
    problem: Problem
    invocation: Invocation | None = None


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitingConfirmation(_Common):
    """Parked until a person confirms this exact digest (R7)."""

    kind: Literal["awaiting_confirmation"] = "awaiting_confirmation"
    invocation: Invocation
    request: ConfirmationRequest


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Failed(_Common):
    """Failed before the commit boundary, or after it (a result that broke its contract)."""

    kind: Literal["failed"] = "failed"
    problem: Problem
    invocation: Invocation
    result: Result | None = None

    @property
    def committed(self) -> bool:
        """Whether the effect happened although the call failed."""
        return self.result is not None and self.result.commit_status == "committed"


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class OutcomeUnknown(_Common):
    """The runtime cannot tell whether the effect happened; reconcile, never guess (R9)."""

    kind: Literal["outcome_unknown"] = "outcome_unknown"
    problem: Problem
    invocation: Invocation
    result: Result


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Cancelled(_Common):
    """Cancelled: before the commit boundary nothing happened.

    After it, the effect stands (``commit_status == "committed"``) and only later
    steps were stopped.
    """

    kind: Literal["cancelled"] = "cancelled"
    commit_status: CommitStatus
    invocation: Invocation
    result: Result | None = None


Outcome = Observed | Rejected | AwaitingConfirmation | Failed | OutcomeUnknown | Cancelled

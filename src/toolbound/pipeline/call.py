"""One call's typestate: a frozen value per stage, each carrying what its stage fixed.

::

    Opened ──admit──▶ Admitted ──prepare──▶ Prepared ──execute──▶ (an Outcome)
       │                 │                      │
       └─ Rejected       └─ AwaitingConfirmation└─ Failed (claim refused), Observed (replay)

A stage takes the type its predecessor returns, so it cannot read a field that was
never set: an :class:`Opened` call has no invocation, an :class:`Admitted` one has no
ledger key, and only a :class:`Prepared` call has the attempt log execution appends to.
The :class:`~toolbound._lifecycle.Lifecycle` (state path and trace) is the one mutable
part every stage shares: it only ever grows (R2, R14).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from toolbound._frozen import quick_init

if TYPE_CHECKING:
    import threading
    from datetime import datetime

    from toolbound._lifecycle import Lifecycle
    from toolbound._model import Attempt, Invocation, Proposal, Subject, ToolSpec
    from toolbound.gates.confirm import Confirmation, Edit
    from toolbound.ledger.store import LedgerKey
    from toolbound.provenance import Finding, FlowReport, Provenance
    from toolbound.registry import RegisteredTool, ToolSet

__all__ = ["Admitted", "AttemptLog", "CallContext", "Opened", "Prepared"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """What the runtime — never the model — knows about one request.

    ``subject`` is the authenticated caller; ``tools`` the tool set the model was
    shown; ``timezone``/``locale``/``reference_time`` the frame for normalization;
    ``timeout`` the request's budget in seconds (the deadline is the earlier of it
    and the tool's own timeout); ``idempotency_key`` a caller-chosen key for a
    write (by default the runtime derives one from the digest); ``cancel`` an event
    that cancels the call cooperatively; ``result_budget`` caps the bytes of the
    message sent back (the tool's own budget applies too); ``wait_in_flight`` is how
    long to wait when the same call is already executing elsewhere, for its result,
    instead of answering ``in_progress`` at once (R8).

    ``invocation_id`` fixes the new invocation's id (a service that keeps calls in
    its own store assigns it); ``approval`` is a person's decision that such a store
    recorded and consumed once (R7): when the policy asks for confirmation, a call
    carrying an approval for exactly its invocation id and digest goes on without
    parking, and one whose digest differs is rejected.

    ``edited_from`` names the parked call a person corrected into this one
    (:meth:`~toolbound.Runtime.edit`); the proposal's trace event keeps it.

    ``provenance`` is the session's index of labelled values
    (:class:`~toolbound.provenance.Provenance`): each call's arguments are examined
    against it, the report is traced and handed to the policy (R6, R11). The
    :class:`~toolbound.Loop` supplies one by itself.
    """

    subject: Subject
    tools: ToolSet
    timezone: str = "UTC"
    locale: str = "en"
    reference_time: datetime | None = None
    timeout: float | None = None
    idempotency_key: str | None = None
    cancel: threading.Event | None = None
    trace_id: str | None = None
    result_budget: int | None = None
    wait_in_flight: float = 0.0
    invocation_id: str | None = None
    approval: Confirmation | None = None
    provenance: Provenance | None = None
    edited_from: Edit | None = None

    def time_allowed(self, spec: ToolSpec) -> float:
        """The seconds a call of ``spec`` may take: its timeout, capped by the request's."""
        return spec.timeout if self.timeout is None else min(spec.timeout, self.timeout)


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Opened:
    """PROPOSED: the trace holds the raw proposal; nothing else is known yet."""

    proposal: Proposal
    ctx: CallContext
    life: Lifecycle
    started: float
    """``time.monotonic``-style reading of the runtime's clock when the budget began."""

    @property
    def invocation_id(self) -> str:
        """The id every event, record and message of this call carries."""
        return self.life.trace.invocation_id


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Admitted(Opened):
    """AUTHORIZED (or waiting for a person): the invocation is fixed (R1, R5, R6)."""

    tool: RegisteredTool
    invocation: Invocation
    authorized_at: datetime
    """When the policy decided (the deadline and a confirmation window count from it)."""
    confirm_reason: str | None = None
    """Why the policy asks a person first (R7); ``None`` when it allowed the call outright."""
    flows: FlowReport | None = None
    """Where the argument values came from, kept for the recheck after a confirmation."""
    evidence: tuple[Finding, ...] = ()
    """The policy's findings, shown to a person in the human projection (R12)."""


@dataclass(slots=True)
class AttemptLog:
    """The attempts of one call, appended as each ends (R10, R14)."""

    current: str = ""
    """The id of the attempt under way (its span and the tool's context carry it)."""
    done: list[Attempt] = field(default_factory=list)


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared(Admitted):
    """PREPARED: targets checked and, for a write, its ledger key claimed (R6, R8)."""

    ledger_key: LedgerKey | None
    """The key this call holds in the ledger; ``None`` when nothing was claimed."""
    epoch: int | None = None
    """The epoch (fencing token) under which this call holds ``ledger_key``."""
    attempts: AttemptLog = field(default_factory=AttemptLog)

    @classmethod
    def of(
        cls, call: Admitted, *, ledger_key: LedgerKey | None, epoch: int | None = None
    ) -> Prepared:
        """``call``, prepared, holding ``ledger_key`` under ``epoch``."""
        return cls(
            proposal=call.proposal,
            ctx=call.ctx,
            life=call.life,
            started=call.started,
            tool=call.tool,
            invocation=call.invocation,
            authorized_at=call.authorized_at,
            confirm_reason=call.confirm_reason,
            flows=call.flows,
            evidence=call.evidence,
            ledger_key=ledger_key,
            epoch=epoch,
        )

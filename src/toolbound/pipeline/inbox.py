"""A runtime's parked calls in the journal's inbox: decisions made elsewhere, applied here.

When a :class:`~toolbound.recording.JournalRecorder` is among a runtime's sinks, every
call the runtime parks is in the journal, held by the recorder's holder, and a person
may decide it in the service's API or console as well as in this process.
:class:`HeldInbox` (``runtime.inbox``) is how the runtime meets those decisions:

- its desk's store is :attr:`HeldInbox.calls`: a decision made here (``approve``,
  ``deny``, an MCP elicitation, the gateway's own confirmation endpoint) is recorded
  in the journal by compare-and-set before the held call takes it, so a local decision
  and one made elsewhere never both win (R7);
- :meth:`HeldInbox.apply` / :meth:`HeldInbox.aapply` take each decision made
  elsewhere, once, and apply it to the held call through the desk's rules and
  :meth:`~toolbound.Runtime.confirm` — the call runs, or is denied with the person's
  reason, exactly as if decided here, its trace naming who decided; an edit goes
  through :meth:`~toolbound.Runtime.edit`: the held call ends cancelled, never run,
  and the corrected arguments are a new call, linked to it, through every gate here;
- :meth:`HeldInbox.resume` / :meth:`HeldInbox.aresume`: a process that restarted
  runs a call its previous life parked and a person decided, under the digest the
  person approved. A call nobody decided is not runnable elsewhere.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, ParamSpec, Protocol, TypeVar

from toolbound._errors import ConfirmationMismatch
from toolbound._model import Proposal
from toolbound.inbox import Decided, Inbox
from toolbound.pipeline.confirm import Approver, ConfirmationDesk

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from toolbound._clock import Clock
    from toolbound._outcome import Outcome
    from toolbound.gates.confirm import Confirmation, ConfirmationRequest
    from toolbound.pipeline.call import CallContext
    from toolbound.pipeline.confirm import HeldCalls
    from toolbound.recording import JournalRecorder

__all__ = ["HeldInbox", "JournaledCalls"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class JournaledCalls:
    """The calls a runtime holds, each decision on them recorded in the journal first.

    The :class:`~toolbound.pipeline.confirm.ParkedCalls` of a runtime with a journal:
    what waits is what the runtime holds; :meth:`record` writes the decision into the
    journal by compare-and-set (one decision per call, whichever process records it),
    then keeps it for the held call.
    """

    def __init__(self, held: HeldCalls, recorder: JournalRecorder, inbox: Inbox) -> None:
        self._held = held
        self._recorder = recorder
        self._inbox = inbox

    def waiting(self, invocation_id: str) -> ConfirmationRequest | None:
        """The request of ``invocation_id`` if it is held and undecided."""
        return self._held.waiting(invocation_id)

    def all_waiting(self, tenant: str | None) -> list[ConfirmationRequest]:
        """The undecided held requests, of ``tenant`` only when one is given."""
        return self._held.all_waiting(tenant)

    def record(self, confirmation: Confirmation) -> None:
        """The journal's compare-and-set first; ``not_pending`` if a decision came first."""
        if self._held.waiting(confirmation.invocation_id) is None:
            self._held.record(confirmation)  # raises not_pending, nothing written
        self._recorder.flush()  # the parked head is written before it is decided
        self._inbox.decide_here(confirmation)
        self._held.record(confirmation)


class _Resumes(Protocol):
    """What :class:`HeldInbox` needs of its runtime: its clock, and to resume a call."""

    @property
    def clock(self) -> Clock: ...

    async def off_loop(
        self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> _T: ...

    def run(self, proposal: Proposal, context: CallContext) -> Outcome: ...

    async def arun(self, proposal: Proposal, context: CallContext) -> Outcome: ...

    def confirm(self, confirmation: Confirmation, *, timeout: float | None = None) -> Outcome: ...

    async def aconfirm(
        self, confirmation: Confirmation, *, timeout: float | None = None
    ) -> Outcome: ...

    def edit(
        self, invocation_id: str, *, digest: str, arguments: str, approver: str
    ) -> Outcome: ...

    async def aedit(
        self, invocation_id: str, *, digest: str, arguments: str, approver: str
    ) -> Outcome: ...


class HeldInbox:
    """``runtime``'s side of the inbox: decisions made elsewhere, applied to its calls."""

    def __init__(self, runtime: _Resumes, held: HeldCalls, recorder: JournalRecorder) -> None:
        self._runtime = runtime
        self._held = held
        self.recorder = recorder
        """Writes the runtime's calls into the journal (:meth:`~JournalRecorder.flush`)."""
        self.journal = Inbox(recorder.journal, recorder.holder, lease=recorder.lease)
        """The journal's side: what was decided elsewhere, claims, leases."""
        self.calls = JournaledCalls(held, recorder, self.journal)
        """The runtime desk's store of parked calls."""
        # The runtime's own rules over the held calls alone: a decision claimed from the
        # journal is recorded there already, not a second time.
        self._desk = ConfirmationDesk(held, clock=runtime.clock)

    @property
    def holder(self) -> str:
        """The id the runtime holds its parked calls under in the journal."""
        return self.journal.holder

    def decisions(self) -> list[Decided]:
        """Decisions made elsewhere on calls this runtime holds, not yet applied."""
        held = set(self._held.parked())
        return [d for d in self.journal.decisions() if d.invocation_id in held]

    def apply(self) -> list[Outcome]:
        """Apply every decision made elsewhere to the call it decides; their outcomes.

        Each is claimed first (once, whatever races for it); a call that ran or was
        denied here meanwhile is left as it is. An edit is applied by the runtime's
        own edit path (:meth:`~toolbound.Runtime.edit`): the held call ends cancelled,
        never run, and the corrected arguments are a new call through every gate, as
        if the person had edited it here; its outcome is the one returned.
        """
        outcomes = []
        for decided in self.decisions():
            claimed = self.journal.claim(decided.invocation_id)
            if claimed is None:
                continue
            if claimed.arguments is not None:
                outcome = self._edit(claimed)
            else:
                confirmation = self._confirmation(claimed)
                outcome = None if confirmation is None else self._runtime.confirm(confirmation)
            if outcome is not None:
                outcomes.append(outcome)
        return outcomes

    async def aapply(self) -> list[Outcome]:
        """:meth:`apply` for async callers: the journal is read off the event loop."""
        outcomes = []
        for decided in await self._runtime.off_loop(self.decisions):
            claimed = await self._runtime.off_loop(self.journal.claim, decided.invocation_id)
            if claimed is None:
                continue
            if claimed.arguments is not None:
                outcome = await self._aedit(claimed)
            else:
                confirmation = self._confirmation(claimed)
                outcome = (
                    None if confirmation is None else await self._runtime.aconfirm(confirmation)
                )
            if outcome is not None:
                outcomes.append(outcome)
        return outcomes

    def resume(self, invocation_id: str, context: CallContext) -> Outcome:
        """Run a call a previous life of this program parked, with the decision recorded.

        ``context`` is the call's as the program gives it (subject, tools); its id
        and the person's decision come from the journal. Raises
        :class:`~toolbound.ConfirmationMismatch`: ``not_decided`` when nobody decided
        the call (or it was applied already) and when it was edited (only the process
        holding it applies an edit), ``holder_gone`` never — a call whose holder is
        gone and was never decided is not runnable anywhere.
        """
        proposal, resumed = self._resumed(invocation_id, context)
        return self._runtime.run(proposal, resumed)

    async def aresume(self, invocation_id: str, context: CallContext) -> Outcome:
        """:meth:`resume` for async callers: the journal is read off the event loop."""
        proposal, resumed = await self._runtime.off_loop(self._resumed, invocation_id, context)
        return await self._runtime.arun(proposal, resumed)

    # -- internals -------------------------------------------------------------------------

    def take(self, invocation_id: str) -> Confirmation | None:
        """Claim the decision made elsewhere on a held call, and record it for that call.

        The confirmation to resume it with (:meth:`~toolbound.Runtime.confirm`), as
        :meth:`~toolbound.Runtime.issue` would have given it had the person decided
        here; ``None`` if there is none to claim, another claimed it, or it no longer
        fits the held call (decided here meanwhile, its window closed). An edit is no
        confirmation of the held call: it is left unclaimed, for :meth:`apply`.
        """
        waiting = self.journal.decision(invocation_id)
        if waiting is not None and waiting.arguments is not None:
            return None
        decided = self.journal.claim(invocation_id)
        return None if decided is None else self._confirmation(decided)

    def take_edit(self, invocation_id: str) -> Outcome | None:
        """Claim an edit made elsewhere on a held call and run the corrected call here.

        The held call ends cancelled, never run; the corrected arguments go through
        every gate (:meth:`~toolbound.Runtime.edit`). ``None`` when there is no edit to
        claim, another claimed it, or it no longer fits the held call.
        """
        claimed = self.journal.claim(invocation_id)
        return None if claimed is None or claimed.arguments is None else self._edit(claimed)

    async def atake_edit(self, invocation_id: str) -> Outcome | None:
        """:meth:`take_edit` for async callers: the journal is read off the event loop."""
        claimed = await self._runtime.off_loop(self.journal.claim, invocation_id)
        return None if claimed is None or claimed.arguments is None else await self._aedit(claimed)

    def _confirmation(self, decided: Decided) -> Confirmation | None:
        """The claimed decision, recorded for the held call by the runtime's own rules."""
        try:
            return self._desk.decide(
                decided.invocation_id,
                digest=decided.digest,
                approver=Approver(name=decided.approver),
                approve=decided.approved,
                at=decided.at,
                reason=decided.reason,
            )
        except ConfirmationMismatch:
            return None  # decided here meanwhile, expired or gone: it ends as it does

    def _edit(self, decided: Decided) -> Outcome | None:
        """The claimed edit, applied as the runtime applies one made here."""
        assert decided.arguments is not None  # noqa: S101 - an edit's, checked by the caller
        try:
            return self._runtime.edit(
                decided.invocation_id,
                digest=decided.digest,
                arguments=decided.arguments,
                approver=decided.approver,
            )
        except ConfirmationMismatch:
            return None  # decided here meanwhile, expired or gone: it ends as it does

    async def _aedit(self, decided: Decided) -> Outcome | None:
        """:meth:`_edit` for async callers."""
        assert decided.arguments is not None  # noqa: S101 - an edit's, checked by the caller
        try:
            return await self._runtime.aedit(
                decided.invocation_id,
                digest=decided.digest,
                arguments=decided.arguments,
                approver=decided.approver,
            )
        except ConfirmationMismatch:
            return None

    def _resumed(self, invocation_id: str, context: CallContext) -> tuple[Proposal, CallContext]:
        edited = self.journal.decision(invocation_id)
        if edited is not None and edited.arguments is not None:
            # Its approval is of the corrected arguments, not of the parked request.
            msg = f"{invocation_id} was edited: the process holding it runs the corrected call"
            raise ConfirmationMismatch(msg, code="not_decided")
        decided = self.journal.claim(invocation_id)
        if decided is None:
            msg = f"nobody decided {invocation_id}, or its decision was applied already"
            raise ConfirmationMismatch(msg, code="not_decided")
        request = decided.call.body.get("request")
        parked = decided.call.body.get("confirmation")
        if not isinstance(request, dict) or not isinstance(parked, dict):
            msg = f"{invocation_id} kept no parked request to resume"
            raise ConfirmationMismatch(msg, code="not_decided")
        from toolbound.gates.confirm import ConfirmationRequest  # noqa: PLC0415

        waiting = ConfirmationRequest.from_json(parked)
        approval = _confirmation(waiting, decided)
        version = request.get("version")
        model_call_id = request.get("model_call_id")
        proposal = Proposal(
            name=str(request["tool"]),
            arguments=str(request["arguments"]).encode(),
            proposal_id=str(request["call_id"]),
            version=None if version is None else str(version),
            model_call_id=None if model_call_id is None else str(model_call_id),
        )
        resumed = replace(
            context,
            invocation_id=invocation_id,
            approval=approval,
            # Normalized as when it was parked: the digest the person approved (R5, R7).
            reference_time=context.reference_time or waiting.requested_at,
        )
        return proposal, resumed


def _confirmation(waiting: ConfirmationRequest, decided: Decided) -> Confirmation:
    at: datetime = decided.at
    if decided.approved:
        return waiting.approve(approver=decided.approver, at=at, ttl=waiting.expires_at - at)
    return waiting.deny(approver=decided.approver, at=at, reason=decided.reason)

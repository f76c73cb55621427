"""The journal's side of one inbox: a holder's parked calls, decided wherever a person is.

A surface other than the service (the MCP gateway, ``mcp-serve``, a library program)
parks a call in its own runtime and records it in the journal, held by its
:attr:`~toolbound.recording.JournalRecorder.holder` under a renewed lease
(:mod:`toolbound.recording`). A person may decide it there, in the process — or in
the service's API or console, which record the decision in the journal and hand it
over. :class:`Inbox` is what the holder reads and writes of that:

- :meth:`Inbox.decisions`: its parked calls someone decided elsewhere (approved, denied,
  or edited: corrected arguments approved in the call's place), not yet applied;
- :meth:`Inbox.claim`: take one of them to apply it, once (compare-and-set: of the
  holder's own rounds, a restarted process and a second replica, one wins);
- :meth:`Inbox.decide_here`: record a decision made in the process itself, by the same
  compare-and-set, so a local decision and one made elsewhere never both win (R7);
- :meth:`Inbox.twin`: the call another process parked that a caller asking the same
  call again here stands for (another replica of an MCP surface on the same store).

Applying a claimed decision to the call the runtime holds is the runtime's
(:class:`toolbound.pipeline.inbox.HeldInbox`, ``runtime.inbox``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from toolbound._errors import ConfirmationMismatch
from toolbound.journal import JournalError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from toolbound.gates.confirm import Confirmation
    from toolbound.journal import Journal, StoredCall

__all__ = ["Decided", "Inbox", "record_decision"]

_TWINS = 50
"""Calls of one subject and digest looked at for a twin, newest first."""


def record_decision(
    journal: Journal,
    confirmation: Confirmation,
    *,
    owner: str | None,
    lease: float | None,
    running: bool = False,
) -> StoredCall:
    """The journal's compare-and-set of ``confirmation``, the call then held by ``owner``."""
    return journal.decide(
        confirmation.invocation_id,
        decision="approved" if confirmation.approved else "denied",
        approver=confirmation.approver,
        now=confirmation.at,
        digest=confirmation.digest,
        reason=confirmation.reason,
        owner=owner,
        lease=lease,
        running=running,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Decided:
    """A person's decision recorded in the journal for a parked call: who, when, which way.

    ``digest`` is the one the person was shown (bound to the call's); ``reason`` a
    denial's, in their words. ``arguments``: the corrected JSON text of an edit (the
    person approved the call with these arguments in its place), ``None`` otherwise.
    """

    invocation_id: str
    approved: bool
    approver: str
    digest: str
    at: datetime
    reason: str | None
    call: StoredCall
    arguments: str | None = None


class Inbox:
    """The parked calls ``holder`` holds in ``journal``, and the decisions made on them.

    ``lease``: seconds a claimed call stays the holder's (renewed with its others).
    Every method reads or writes the journal: call them off an event loop.
    """

    def __init__(self, journal: Journal, holder: str, *, lease: float) -> None:
        self.journal = journal
        self.holder = holder
        self.lease = lease

    def decisions(self) -> list[Decided]:
        """The holder's parked calls decided elsewhere and not yet claimed, oldest first."""
        found = []
        for call in self.journal.decided_for(self.holder):
            decided = self._decided(call)
            if decided is not None:
                found.append(decided)
        return found

    def decision(self, invocation_id: str) -> Decided | None:
        """The decision made elsewhere on ``invocation_id``, if one waits to be applied."""
        call = self.journal.get_call(invocation_id)
        if call is None or call.status != "awaiting_confirmation" or call.decision is None:
            return None
        return self._decided(call)

    def claim(self, invocation_id: str) -> Decided | None:
        """Take the decided call to apply its decision here; ``None`` if another did first.

        Also a call whose holder is gone (its lease passed), for a process resuming it.
        A call nobody decided is never claimed: it waits for its holder.
        """
        call = self.journal.adopt_decided(invocation_id, self.holder, lease=self.lease)
        return None if call is None else self._decided(call)

    def decide_here(self, confirmation: Confirmation) -> None:
        """Record a decision made in the holder's own process, the call run here at once.

        Raises :class:`~toolbound.ConfirmationMismatch` ``not_pending`` when a decision
        made elsewhere came first. A call the journal does not have (its head not
        written) or no longer lists as held (the holder's lease passed) is this
        process's alone: nothing is recorded and the decision stands.
        """
        try:
            record_decision(
                self.journal, confirmation, owner=self.holder, lease=self.lease, running=True
            )
        except JournalError as exc:
            if exc.code in {"not_found", "holder_gone"}:
                return
            msg = f"{confirmation.invocation_id} was decided elsewhere first"
            raise ConfirmationMismatch(msg, code="not_pending") from None

    def twin(
        self, tenant: str, subject: str, digest: str, *, besides: str, now: float
    ) -> StoredCall | None:
        """The call another process parked that the same call asked again here stands for.

        ``besides`` is the call just parked here for it; ``now`` the time (seconds since
        the epoch) a lease is compared with. The newest other call of the subject with
        ``digest`` that was parked for a person, if it is either

        - still waiting undecided, its holder alive: the caller is answered with it,
          pending, and nothing is parked a second time;
        - decided: its decision is applied where it is held (or taken over once its
          holder is gone) and its outcome is the answer — once: a call of the subject
          with that digest made after the decision means the answer was given; and
          only as long after the decision as the person had to decide it (the
          confirmation window's length). An edit not applied yet counts only while
          its holder lives (only it applies one).

        ``None`` otherwise: never parked elsewhere, its holder gone before anyone
        decided it (nobody can decide it any more), or its answer given already.
        """
        found = self.asked(tenant, subject, digest, besides=besides, now=now)
        return None if found is None or found.owner == self.holder else found

    def asked(
        self, tenant: str, subject: str, digest: str, *, besides: str, now: float
    ) -> StoredCall | None:
        """:meth:`twin`, whichever process holds it (this one's too)."""
        calls = self.journal.list_calls(tenant, subject=subject, digest=digest, limit=_TWINS)
        others = [c for c in calls if c.invocation_id != besides]
        found = next((c for c in others if _parked_for_a_person(c)), None)
        if found is None:
            return None
        alive = found.lease_until is not None and found.lease_until >= now
        waiting = found.status == "awaiting_confirmation"
        if found.decision is None or (found.decision == "edited" and waiting):
            # Undecided, or an edit not applied yet: only its holder can go on with it.
            return found if waiting and alive else None
        decided_at = self._handed_over_at(found)
        if decided_at is None:
            return None  # decided where it was held: the caller was answered there
        if any(c.created_at > decided_at for c in others):
            return None  # the same call was asked again since: it got this answer
        if datetime.fromtimestamp(now, UTC) > decided_at + _window(found):
            return None  # asked again too late: a new question for a person
        return found

    def replacement(self, edited: StoredCall) -> StoredCall | None:
        """The corrected call a person's edit of ``edited`` became, once recorded."""
        for call in self.journal.list_calls(edited.tenant, tool=edited.tool, limit=_TWINS):
            if call.created_at < edited.created_at:
                break  # newest first: older calls cannot replace it
            events = self.journal.events(call.invocation_id)
            data = events[0].get("data") if events else None
            edit = data.get("edited_from") if isinstance(data, dict) else None
            if isinstance(edit, dict) and edit.get("invocation_id") == edited.invocation_id:
                return call
        return None

    def _handed_over_at(self, call: StoredCall) -> datetime | None:
        """When a person decided ``call`` elsewhere than its holder; ``None``: not so."""
        events = self.journal.events(call.invocation_id)
        event = next((e for e in reversed(events) if e.get("kind") == "decision"), None)
        data = event.get("data") if event is not None else None
        if event is None or not isinstance(data, dict) or data.get("by_holder"):
            return None
        return datetime.fromisoformat(str(event["at"]))

    def renew(self) -> int:
        """Extend the leases of every call the holder holds; how many."""
        return self.journal.renew(self.holder, lease=self.lease)

    def _decided(self, call: StoredCall) -> Decided | None:
        events = self.journal.events(call.invocation_id)
        event = next((e for e in reversed(events) if e.get("kind") == "decision"), None)
        data: Mapping[str, object] = {}
        if event is not None and isinstance(event.get("data"), dict):
            data = event["data"]  # type: ignore[assignment]
        decision = data.get("decision", call.decision)
        arguments = data.get("arguments")
        edit = arguments if decision == "edited" and isinstance(arguments, str) else None
        if decision not in {"approved", "denied"} and edit is None:
            return None
        at = event.get("at") if event is not None else None
        reason = data.get("reason")
        return Decided(
            invocation_id=call.invocation_id,
            approved=decision != "denied",
            approver=str(data.get("approver", call.approver)),
            digest=str(data.get("digest") or call.digest),
            at=datetime.fromisoformat(str(at)) if at else call.updated_at,
            reason=reason if isinstance(reason, str) else None,
            call=call,
            arguments=edit,
        )


def _parked_for_a_person(call: StoredCall) -> bool:
    """Whether ``call`` waits for a person, or waited and a person decided it."""
    return call.status == "awaiting_confirmation" or (
        call.decision is not None and isinstance(call.body.get("confirmation"), dict)
    )


def _window(call: StoredCall) -> timedelta:
    """How long the person had to decide ``call``: its confirmation window's length."""
    parked = call.body.get("confirmation")
    if not isinstance(parked, dict):
        return timedelta(0)
    try:
        opened = datetime.fromisoformat(str(parked["requested_at"]))
        closed = datetime.fromisoformat(str(parked["expires_at"]))
    except (KeyError, ValueError):
        return timedelta(0)
    return closed - opened

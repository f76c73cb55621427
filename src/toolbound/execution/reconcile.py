"""Outcome unknown, resolved with evidence (R2, R9).

A write whose outcome the runtime could not see — a lost response, a deadline, a
process killed between intent and commit record — is recorded ``unknown`` and is
never run again silently. A :class:`Reconciler` resolves it later: it asks the tool's
``query`` hook what the remote side knows about the call's idempotency key and moves
the record, with that evidence, to ``committed`` or ``failed`` — the only two ways
out of OUTCOME_UNKNOWN. Without a hook, or when the answer is still unknown, the call
stays unknown and is listed for a person, who can resolve it with
:meth:`Reconciler.resolve` and their own evidence.

Each resolution is traced like a call: a lifecycle that starts in OUTCOME_UNKNOWN.

A finding of "not committed" waits until the call's owner can no longer start its
effect (R9, :func:`~toolbound.ledger.rules.owner_may_act_until`: its deadline, plus
the clock skew allowed between processes). A record is ``unknown`` only once its
owner settled it itself (its attempt over) or another process took it over (the
owner's lease had passed), so the deadline is the one bound left to wait for. Until
then :meth:`Reconciler.resolve` refuses with
:class:`~toolbound.ledger.store.NotYetError` (``not_yet``, with ``retry_at``), and a
query hook's "not committed" leaves the call unknown, saying when to ask again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

from toolbound._clock import Clock, SystemClock
from toolbound._lifecycle import Lifecycle
from toolbound._model import (
    QueryAnswer,
    RemoteCommitted,
    RemoteNotCommitted,
    RemoteUnknown,
    Result,
    UnknownCall,
)
from toolbound._state import State
from toolbound.ledger.rules import owner_may_act_until
from toolbound.ledger.store import LedgerError, NotYetError
from toolbound.trace import Trace

if TYPE_CHECKING:
    from collections.abc import Mapping

    from toolbound.ledger.store import Ledger, LedgerRecord
    from toolbound.registry import Registry

__all__ = [
    "QueryAnswer",
    "Reconciled",
    "Reconciler",
    "RemoteCommitted",
    "RemoteNotCommitted",
    "RemoteUnknown",
    "UnknownCall",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconciled:
    """How one unknown call ended up after a reconciliation pass."""

    invocation_id: str
    tool: str
    status: Literal["committed", "failed", "unknown", "needs_person"]
    evidence: Mapping[str, object] = field(hash=False)
    trace: Trace | None = None

    @property
    def path(self) -> tuple[State, ...]:
        """The states this resolution walked (empty when nothing changed)."""
        if self.trace is None:
            return ()
        return (
            State.OUTCOME_UNKNOWN,
            *(e.state for e in self.trace.of_kind("transition") if e.state is not None),
        )


class Reconciler:
    """Resolves unknown outcomes through each tool's ``query`` hook."""

    def __init__(
        self,
        *,
        ledger: Ledger,
        registry: Registry,
        clock: Clock | None = None,
        grace: timedelta = timedelta(seconds=30),
    ) -> None:
        self.ledger = ledger
        self.registry = registry
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.grace = grace

    def unresolved(self) -> list[LedgerRecord]:
        """Sweep abandoned calls, then list every unknown outcome."""
        self.ledger.sweep(now=self.clock.now(), grace=self.grace)
        return self.ledger.unresolved()

    def reconcile(self) -> list[Reconciled]:
        """One pass: query every unknown call whose tool can be asked."""
        return [self._one(record) for record in self.unresolved()]

    def reconcile_one(self, invocation_id: str) -> Reconciled:
        """Query the tool about one unknown call."""
        record = self.ledger.find(invocation_id)
        if record is None or record.phase != "unknown":
            msg = f"invocation {invocation_id} has no unknown outcome to reconcile"
            raise LedgerError(msg, code="not_unknown")
        return self._one(record)

    def resolve(
        self,
        invocation_id: str,
        *,
        committed: bool,
        by: str,
        evidence: Mapping[str, object],
    ) -> Reconciled:
        """A person resolves an unknown call with evidence they checked themselves."""
        record = self.ledger.find(invocation_id)
        if record is None or record.phase != "unknown":
            msg = f"invocation {invocation_id} has no unknown outcome to resolve"
            raise LedgerError(msg, code="not_unknown")
        proof = {"resolved_by": by, **evidence}
        if committed:
            return self._settle(record, RemoteCommitted(evidence=proof))
        until = owner_may_act_until(record)
        if self.clock.now() <= until:
            msg = (
                f"invocation {invocation_id} may still take effect until {until.isoformat()} "
                "(its owner's deadline); it cannot be found not committed before then"
            )
            raise NotYetError(msg, retry_at=until)
        return self._settle(record, RemoteNotCommitted(evidence=proof))

    def _one(self, record: LedgerRecord) -> Reconciled:
        name, _, version = record.tool.partition("@")
        tool = self.registry.get(name, version)
        query = None if tool is None else tool.spec.query
        if query is None:
            return Reconciled(
                invocation_id=record.invocation_id,
                tool=record.tool,
                status="needs_person",
                evidence={"reason": "the tool has no query hook"},
            )
        call = UnknownCall(
            invocation_id=record.invocation_id,
            tool=record.tool,
            idempotency_key=record.key.key,
            arguments=json.loads(record.canonical),
            subject=record.subject,
        )
        try:
            answer = query(call)
        except Exception as exc:  # noqa: BLE001 - a failing query leaves the call unknown
            answer = RemoteUnknown(evidence={"query_error": type(exc).__name__})
        return self._settle(record, answer)

    def _settle(self, record: LedgerRecord, answer: QueryAnswer) -> Reconciled:
        now = self.clock.now()
        evidence = {"answer": answer.kind, "at": now.isoformat(), **answer.evidence}
        until = owner_may_act_until(record)
        if answer.kind == "not_committed" and now <= until:
            # R9: its owner may still start the effect; "not committed" is not final yet.
            evidence["retry_at"] = until.isoformat()
            answer = RemoteUnknown(evidence=answer.evidence)
        if answer.kind == "unknown":
            return Reconciled(
                invocation_id=record.invocation_id,
                tool=record.tool,
                status="unknown",
                evidence=evidence,
            )
        trace = Trace(
            invocation_id=record.invocation_id,
            trace_id=record.invocation_id,
            clock=self.clock,
        )
        life = Lifecycle(trace, start=State.OUTCOME_UNKNOWN)
        trace.record("reconcile", key=record.key.key, tool=record.tool, evidence=evidence)
        if isinstance(answer, RemoteCommitted):
            result = Result(
                invocation_id=record.invocation_id,
                status="ok",
                value=answer.value,
                commit_status="committed",
                external_resource_id=answer.external_resource_id,
                observed_at=now,
            )
            self.ledger.advance(
                record.key,
                invocation_id=record.invocation_id,
                phase="committed",
                now=now,
                result=result,
                evidence=evidence,
            )
            life.advance(State.COMMITTED, evidence=evidence)
            status: Literal["committed", "failed"] = "committed"
        else:
            self.ledger.advance(
                record.key,
                invocation_id=record.invocation_id,
                phase="failed",
                now=now,
                evidence=evidence,
            )
            life.advance(State.FAILED_BEFORE_COMMIT, evidence=evidence)
            status = "failed"
        return Reconciled(
            invocation_id=record.invocation_id,
            tool=record.tool,
            status=status,
            evidence=evidence,
            trace=trace,
        )

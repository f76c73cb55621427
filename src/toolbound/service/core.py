"""The service's operations, apart from HTTP: submit, decide, read, reconcile.

:class:`Service` joins a :class:`~toolbound.Runtime` (which never holds parked calls
itself, ``hold_parked=False``), the ledger and the :mod:`journal <toolbound.journal>`.
Every operation takes the caller's :class:`~toolbound.config.Principal`: the subject a
call runs for is the principal's, never anything in the request body (R6); tenants
only ever see their own invocations.

A call that needs a person is stored with its proposal and the exact frame it was
normalized in (reference time, timezone). When a person decides — in any process
sharing the store — the decision is recorded once (compare-and-set) and the stored
proposal runs again carrying that decision; the runtime checks that it still comes to
the same digest (R7).

Each process is one owner (``instance_id``): a call it works on — running, or
decided and not yet finished — holds a lease in the journal, renewed while the
process lives (:meth:`Service.renew`). :meth:`Service.recover` takes over only calls
whose lease has passed by the database's clock, one compare-and-set each, and ends
each truthfully: from what the ledger knows of it, or — decided by a person — by
running it on with the recorded decision (the ledger keeps it from running twice).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from toolbound._clock import SystemClock
from toolbound._errors import ConfirmationMismatch, Rejection
from toolbound._model import Proposal, Subject
from toolbound.adapters.http import ApiError, decision_refused, outcome_json
from toolbound.execution.fence import RenewedLease
from toolbound.execution.offload import Offload
from toolbound.execution.reconcile import Reconciler
from toolbound.execution.tool import EnvSecrets
from toolbound.gates.confirm import Edit
from toolbound.gates.parse import ParseLimits, parse_arguments
from toolbound.journal import ClaimedRequest, Finish, JournalError, StoredCall
from toolbound.ledger.rules import ABANDONED, owner_may_act_until
from toolbound.ledger.store import LedgerError, NotYetError
from toolbound.metrics import CallMetrics
from toolbound.pipeline.confirm import Approver, ConfirmationDesk
from toolbound.pipeline.runtime import CallContext, Runtime
from toolbound.service.decisions import StoredConfirmations, hand_over, note_denial
from toolbound.service.keys import ApiKeys
from toolbound.service.records import (
    RunningCalls,
    decision_of,
    dumps,
    note,
    reconciled_answer,
    request_of,
    settle_running,
    settle_unknown,
    store_outcome,
)
from toolbound.service.sessions import SessionContext, Sessions
from toolbound.wiring import journal_for, ledger_for, policy_for

if TYPE_CHECKING:
    from collections.abc import Sequence

    from toolbound._clock import Clock
    from toolbound.config import Principal, ServiceConfig
    from toolbound.gates.confirm import Confirmation
    from toolbound.journal import Journal
    from toolbound.ledger.store import LedgerRecord
    from toolbound.registry import Registry, ToolSet
    from toolbound.service.webhooks import Webhooks
    from toolbound.trace import TraceSink

__all__ = ["Service", "Submission"]

_ENVELOPE_LIMITS = ParseLimits(max_bytes=4 << 20)
_SUBMISSION_KEYS = frozenset(
    {
        "tool",
        "arguments",
        "call_id",
        "model_call_id",
        "version",
        "tools",
        "timezone",
        "locale",
        "context",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Submission:
    """A proposal as the API receives it: the model's argument bytes untouched."""

    tool: str
    arguments: bytes
    call_id: str
    model_call_id: str | None = None
    version: str | None = None
    tools: tuple[str, ...] | None = None
    timezone: str = "UTC"
    locale: str = "en"
    context: SessionContext | None = None
    """What the model has seen, for the flow rules (:mod:`toolbound.service.sessions`)."""

    @classmethod
    def from_body(cls, body: bytes) -> Submission:
        """Read the request body strictly (duplicate keys, bad types → 400)."""
        try:
            raw = parse_arguments(body, _ENVELOPE_LIMITS)
        except Rejection as r:
            raise ApiError(400, "bad_request_body", r.problem.message) from None
        unknown = set(raw) - _SUBMISSION_KEYS
        if unknown:
            msg = f"unknown member(s) {sorted(unknown)}"
            raise ApiError(400, "bad_request_body", msg)
        tool, arguments, call_id = raw.get("tool"), raw.get("arguments"), raw.get("call_id")
        if not isinstance(tool, str) or not tool:
            raise ApiError(400, "bad_request_body", "tool must be a non-empty string")
        if not isinstance(arguments, str):
            msg = "arguments must be the model's argument text, as a string"
            raise ApiError(400, "bad_request_body", msg)
        if not isinstance(call_id, str) or not call_id:
            raise ApiError(400, "bad_request_body", "call_id must be a non-empty string")
        tools = raw.get("tools")
        if tools is not None and (
            not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)
        ):
            raise ApiError(400, "bad_request_body", "tools must be an array of tool names")
        optional: dict[str, str | None] = {}
        for key in ("model_call_id", "version", "timezone", "locale"):
            value = raw.get(key)
            if value is not None and not isinstance(value, str):
                raise ApiError(400, "bad_request_body", f"{key} must be a string")
            optional[key] = value
        return cls(
            tool=tool,
            arguments=arguments.encode(),
            call_id=call_id,
            model_call_id=optional["model_call_id"],
            version=optional["version"],
            tools=None if tools is None else tuple(str(t) for t in tools),
            timezone=optional["timezone"] or "UTC",
            locale=optional["locale"] or "en",
            context=SessionContext.from_json(raw.get("context")),
        )

    def proposal(self, *, received_at: datetime) -> Proposal:
        """The model's proposal, its argument bytes untouched."""
        return Proposal(
            name=self.tool,
            arguments=self.arguments,
            proposal_id=self.call_id,
            model_call_id=self.model_call_id,
            version=self.version,
            received_at=received_at,
        )

    def record(self, tools: ToolSet, now: datetime) -> dict[str, object]:
        """What the journal keeps to run the proposal again, in the same frame (R5, R7)."""
        return {
            "tool": self.tool,
            "version": self.version,
            "arguments": self.arguments.decode(errors="replace"),
            "call_id": self.call_id,
            "model_call_id": self.model_call_id,
            "tools": sorted(tools.refs) if self.tools is not None else None,
            "timezone": self.timezone,
            "locale": self.locale,
            "reference_time": now.isoformat(),
            "context": None if self.context is None else self.context.as_json(),
        }


class Service:
    """A configured toolbound service: runtime, ledger and journal, no HTTP."""

    def __init__(
        self,
        config: ServiceConfig,
        *,
        registry: Registry | None = None,
        clock: Clock | None = None,
        sinks: Sequence[TraceSink] = (),
        confirmation_ttl: timedelta | None = None,
        lease: timedelta | None = None,
    ) -> None:
        self.config = config
        self.keys = ApiKeys(config.principals)
        """The API keys of ``config``, by digest: one hash a request."""
        self.instance_id = os.urandom(8).hex()
        """This process as the owner of the calls it works on."""
        self.lease = config.lease if lease is None else lease
        """How long a call stays this process's without a renewal (:meth:`renew`)."""
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.registry = registry if registry is not None else config.build_registry()
        self.ledger = ledger_for(config.store_url, config.store_timeouts)
        self.journal: Journal = journal_for(config.store_url, config.store_timeouts)
        self.io = Offload(config.io_threads, name="toolbound-io")
        """The one bounded pool the HTTP surface runs every blocking call on."""
        self.metrics = CallMetrics()
        """Calls by tool and outcome, and what waits for a person, for ``/metrics``."""
        self._sinks = tuple(sinks)
        self._running = RunningCalls(self.journal, lease=self.lease.total_seconds())
        self.held = RenewedLease(self.lease.total_seconds(), clock=self.clock.monotonic)
        """This process's lease as it knows it: a write's tool starts only while held (R9)."""
        self.runtime = Runtime(
            policy=policy_for(config, self.clock, self.registry),
            ledger=self.ledger,
            clock=self.clock,
            secrets=EnvSecrets(),
            sinks=(*sinks, self.metrics, self._running),
            confirmation_ttl=(
                config.confirmation_ttl if confirmation_ttl is None else confirmation_ttl
            ),
            hold_parked=False,
            lease=self.held,
        )
        self._all = self.registry.toolset()
        self._confirmations = StoredConfirmations(
            self.journal, self._tenants, owner=self.instance_id, lease=self.lease.total_seconds()
        )
        self.desk = ConfirmationDesk(
            self._confirmations, four_eyes=config.four_eyes, clock=self.clock
        )
        """The one confirmation desk, over the calls parked in the journal (R7)."""
        self.metrics.count_pending(self.desk)
        self.sessions = Sessions(self.journal, self.registry, config.provenance, self.clock)
        self.webhooks = _webhooks(self, config)
        """The ``[[webhook]]`` senders (None without any): the lifespan runs their rounds."""
        self.recovered = self.recover()

    def close(self) -> None:
        """Stop the runtime, flush telemetry and release the stores."""
        self.runtime.close()
        if self.webhooks is not None:
            self.webhooks.close()
        for sink in self._sinks:
            shutdown = getattr(sink, "shutdown", None)
            if shutdown is not None:
                shutdown()
        self.io.close(wait=True)
        self.journal.close()
        self.ledger.close()

    # -- operations ---------------------------------------------------------------

    async def submit(
        self,
        principal: Principal,
        submission: Submission,
        *,
        trace_id: str | None = None,
        request_key: str | None = None,
        fingerprint: str | None = None,
    ) -> tuple[int, str, ClaimedRequest | None]:
        """Run one proposal for ``principal``: the HTTP status and the typed outcome's JSON.

        With ``request_key`` (the request's Idempotency-Key) the answer is kept with
        the call, in one transaction. The caller has claimed the key, or gives its
        ``fingerprint`` to claim it in that transaction (reads only); if another
        request holds it then, its claim is the third value and nothing was kept.

        The whole call — gates, ledger, tool, journal — runs as one hop on the
        service's I/O pool (:attr:`io`), never on the event loop.
        """
        return await self.io(
            self.run_submission,
            principal,
            submission,
            trace_id=trace_id,
            request_key=request_key,
            fingerprint=fingerprint,
        )

    def run_submission(
        self,
        principal: Principal,
        submission: Submission,
        *,
        trace_id: str | None = None,
        request_key: str | None = None,
        fingerprint: str | None = None,
    ) -> tuple[int, str, ClaimedRequest | None]:
        """:meth:`submit` on the caller's thread, which must not run an event loop."""
        _require(principal, "agent")
        tools = self._toolset(submission.tools)
        now = self.clock.now()
        invocation_id = new_invocation_id()
        subject = Subject(id=principal.subject, tenant=principal.tenant)
        context = CallContext(
            subject=subject,
            tools=tools,
            timezone=submission.timezone,
            locale=submission.locale,
            reference_time=now,
            timeout=self.config.timeout,
            result_budget=self.config.result_budget,
            invocation_id=invocation_id,
            trace_id=trace_id,
            provenance=self.sessions.index(principal.tenant, submission.context),
        )
        proposal = submission.proposal(received_at=now)
        request = submission.record(tools, now)
        running = StoredCall(
            invocation_id=invocation_id,
            tenant=principal.tenant,
            subject=principal.subject,
            principal=principal.name,
            tool=submission.tool,
            status="running",
            state="proposed",
            digest=None,
            decision=None,
            approver=None,
            created_at=now,
            updated_at=now,
            body={"request": request},
            owner=self.instance_id,
            request_key=request_key,
            surface="service",
        )
        if self._is_write(submission):
            # Recorded with its proposal as it opens, before it runs: a process that
            # dies mid-call leaves a truthful trace.
            self._running.expect(running)
        try:
            outcome = self.runtime.run(proposal, context)
        except Exception as exc:
            self._failed(running, "the runtime raised", exc)
            raise
        finally:
            written = self._running.written(invocation_id)
        answer = outcome_json(outcome)
        status = 202 if outcome.kind == "awaiting_confirmation" else 200
        text = dumps(answer)
        finish = None
        if request_key is not None:
            finish = Finish(principal.tenant, request_key, status, text, fingerprint)
        now = self.clock.now()
        try:
            lost = store_outcome(
                self.journal,
                running,
                outcome,
                request,
                answer,
                now=now,
                finish=finish,
                written=written,
            )
        except Exception as exc:
            self._failed(running, "its outcome could not be stored", exc)
            raise
        # After the answer is durable: a session that cannot be written never loses it.
        self.sessions.learn(principal.tenant, submission.context, outcome)
        return status, text, lost

    async def decide(
        self,
        principal: Principal,
        invocation_id: str,
        *,
        digest: str,
        decision: Literal["approve", "deny"],
        reason: str | None = None,
    ) -> dict[str, object]:
        """A person decides on a parked call, bound to the digest they were shown.

        A denial's ``reason`` is told to the model and kept with the call. Run on the
        service's I/O pool, like :meth:`submit`.
        """
        return await self.io(
            self.run_decision,
            principal,
            invocation_id,
            digest=digest,
            decision=decision,
            reason=reason,
        )

    def run_decision(
        self,
        principal: Principal,
        invocation_id: str,
        *,
        digest: str,
        decision: Literal["approve", "deny"],
        reason: str | None = None,
    ) -> dict[str, object]:
        """:meth:`decide` on the caller's thread, which must not run an event loop."""
        _require(principal, "approver")
        call = self._visible(principal, invocation_id)
        # Another surface's call waits in the process that parked it: handed over there.
        if handed := hand_over(
            self, principal, call, digest=digest, decision=decision, reason=reason
        ):
            return handed
        try:
            approval, decided = self._confirmations.decide(
                self.desk,
                call,
                digest=digest,
                approver=Approver(
                    name=principal.name, subject=principal.subject, tenant=principal.tenant
                ),
                approve=decision == "approve",
                at=self.clock.now(),
                reason=reason,
            )
        except ConfirmationMismatch as exc:
            raise decision_refused(exc) from None
        # The head the decision wrote; read again only if the desk recorded it elsewhere.
        call = decided or self._visible(principal, invocation_id)
        if approval.reason is not None:
            # Kept before the call runs on: a process taking it over tells the model too.
            call = note_denial(
                self, principal, invocation_id, reason=approval.reason, with_decision=True
            )
        request = call.body["request"]
        assert isinstance(request, dict)  # noqa: S101 - written by submit
        outcome = self.runtime.run(_proposal(request), self.stored_context(call, request, approval))
        answer = outcome_json(outcome)
        store_outcome(self.journal, call, outcome, request, answer, now=self.clock.now())
        self.sessions.learn_stored(call.tenant, request, outcome)
        return answer

    def get(self, principal: Principal, invocation_id: str) -> StoredCall:
        """One invocation of the principal's tenant."""
        return self._visible(principal, invocation_id)

    def calls(
        self,
        principal: Principal,
        *,
        status: str | None = None,
        tool: str | None = None,
        subject: str | None = None,
        limit: int = 100,
    ) -> list[StoredCall]:
        """The tenant's invocations, newest first."""
        return self.journal.list_calls(
            principal.tenant, status=status, tool=tool, subject=subject, limit=limit
        )

    def pending(self, principal: Principal) -> list[StoredCall]:
        """The tenant's calls still to decide (undecided, window open), newest first (R7)."""
        open_ids = {
            r.invocation_id
            for r in self.desk.pending(
                Approver(name=principal.name, subject=principal.subject, tenant=principal.tenant)
            )
        }
        calls = self.calls(principal, status="awaiting_confirmation", limit=1000)
        return [c for c in calls if c.invocation_id in open_ids]

    def unknown(self, principal: Principal) -> list[LedgerRecord]:
        """The tenant's calls whose outcome is unknown (abandoned ones swept in first)."""
        records = Reconciler(ledger=self.ledger, registry=self.registry, clock=self.clock)
        return [r for r in records.unresolved() if r.subject.get("tenant") == principal.tenant]

    def reconcile(
        self,
        principal: Principal,
        invocation_id: str,
        *,
        committed: bool | None = None,
        evidence: dict[str, object] | None = None,
    ) -> dict[str, object]:
        """Ask the tool (``committed=None``) or record a person's finding."""
        _require(principal, "operator")
        record = self.ledger.find(invocation_id)
        if record is None or record.subject.get("tenant") != principal.tenant:
            raise ApiError(404, "not_found", f"no invocation {invocation_id}")
        if record.phase != "unknown":
            msg = f"invocation {invocation_id} has no unknown outcome"
            raise ApiError(409, "not_unknown", msg)
        reconciler = Reconciler(ledger=self.ledger, registry=self.registry, clock=self.clock)
        try:
            result = settle_unknown(
                reconciler,
                self.journal,
                invocation_id,
                committed=committed,
                by=principal.name,
                evidence=evidence,
            )
        except NotYetError as exc:
            hint = f"retry after {exc.retry_at.isoformat()}"
            raise ApiError(409, "not_yet", str(exc), hint=hint) from None
        return reconciled_answer(result)

    def check_store(self) -> None:
        """One read of the journal and one of the ledger; raises if either cannot answer."""
        self.journal.get_call("readiness-probe")
        self.ledger.find("readiness-probe")

    def renew(self) -> int:
        """Extend the lease of every call this process works on; how many."""
        sent = self.held.renewing()
        count = self.journal.renew(self.instance_id, lease=self.lease.total_seconds())
        self.held.renewed(sent)
        return count

    def recover(self) -> int:
        """Take over the calls whose owner's lease has passed and end each truthfully.

        Run at start and periodically. A call whose owner still renews its lease is
        never touched (compare-and-set in the journal); of several processes
        sweeping at once, each call is taken by one. How many were taken.
        """
        count = 0
        for seen in self.journal.expired(limit=1000):
            if self._take_over(seen):
                count += 1
        return count

    def settle_request(self, tenant: str, key: str) -> bool:
        """Settle the call held by an Idempotency-Key if its owner's lease has passed.

        Then the key has the settled call's answer, not ``request_in_progress``.
        """
        call = self.journal.call_for_request(tenant, key)
        return call is not None and self._take_over(call)

    def purge(self) -> int:
        """Apply the retention period to the journal and the sessions' values."""
        before = self.clock.now() - self.config.retention
        return self.journal.purge(before=before) + self.sessions.purge(before=before)

    # -- internals -----------------------------------------------------------------

    def _take_over(self, seen: StoredCall) -> bool:
        record = self.ledger.find(seen.invocation_id)
        if (
            record is not None
            and record.phase in ABANDONED
            and self.clock.now() <= owner_may_act_until(record)
        ):
            return False  # R9: its owner may still start the effect; a later sweep takes it
        call = self.journal.take_over(
            seen.invocation_id, self.instance_id, lease=self.lease.total_seconds()
        )
        if call is None:
            return False
        # A decided call its dead owner had begun to execute is in the ledger: it ends as
        # the ledger knows it. Running it again would only meet the dead owner's claim
        # and end "failed, not committed" over a tool that may have committed (R9).
        if call.status == "running" or self.ledger.find(call.invocation_id) is not None:
            now = self.clock.now()
            settle_running(self.journal, self.ledger, call, now=now, dead=seen.owner)
        else:
            self._resume_decided(call)
        return True

    def _resume_decided(self, call: StoredCall) -> None:
        """Run on a call a person decided and whose owner died, with that decision."""
        request = request_of(call)
        decision = decision_of(call, self.journal.events(call.invocation_id))
        if decision is None:
            _interrupted(self.journal, call, self.clock.now(), "no parked request to resume")
            return
        outcome = self.runtime.run(_proposal(request), self.stored_context(call, request, decision))
        self.sessions.learn_stored(call.tenant, request, outcome)
        store_outcome(
            self.journal, call, outcome, request, outcome_json(outcome), now=self.clock.now()
        )

    def _failed(self, call: StoredCall, why: str, failure: BaseException) -> None:
        """End a call whose run or record failed, as truthfully as the stores allow (R9).

        Its effect may have run once the ledger holds it past ``intent``: then it is
        ``outcome_unknown``, for an operator to reconcile, never "not executed".
        Otherwise it is ``interrupted``. A store that still fails leaves the head as it
        was (``running``), for the lease sweep to settle from the ledger.
        """
        if _down(failure):
            # A store that cannot answer is not asked again within this request (each
            # try would wait out its pool timeout): the lease sweep settles the call.
            return
        with contextlib.suppress(JournalError, LedgerError, OSError):
            record = self.ledger.find(call.invocation_id)
            phase = None if record is None else record.phase
            unknown = phase in {"executing", "unknown", "committed"}
            status = "outcome_unknown" if unknown else "interrupted"
            data = {"reason": why, "ledger_phase": phase}
            note(self.journal, call, "interrupted", data, status=status, now=self.clock.now())

    def _tenants(self) -> set[str]:
        return {p.tenant for p in self.config.principals}

    def _is_write(self, submission: Submission) -> bool:
        tool = self._all.lookup(submission.tool, submission.version)
        return tool is None or tool.spec.is_write

    def is_read(self, submission: Submission) -> bool:
        """Whether the proposal names a registered tool that only reads."""
        tool = self._all.lookup(submission.tool, submission.version)
        return tool is not None and tool.spec.effect in {"pure", "read"}

    def _toolset(self, names: tuple[str, ...] | None) -> ToolSet:
        if names is None:
            return self._all
        # Unknown names are not an error here: the model was shown them, and a call
        # to one is rejected as an unknown tool (R17 row 1).
        refs = [r for r in names if self._all.lookup(*_split(r)) is not None]
        return self.registry.toolset(*refs)

    def _visible(self, principal: Principal, invocation_id: str) -> StoredCall:
        call = self.journal.get_call(invocation_id)
        if call is None or call.tenant != principal.tenant:
            # Another tenant's call and no call look the same.
            raise ApiError(404, "not_found", f"no invocation {invocation_id}")
        return call

    def stored_context(
        self, call: StoredCall, request: dict[str, object], approval: Confirmation | None = None
    ) -> CallContext:
        """A stored call's context as it was proposed, with a person's decision if any."""
        names = request.get("tools")
        tools = self._toolset(tuple(str(n) for n in names) if isinstance(names, list) else None)
        context = _stored_context(call, request, approval, tools, self.config)
        return replace(context, provenance=self.sessions.stored(call.tenant, request))


def new_invocation_id() -> str:
    """32 hex digits: the time in microseconds, then 64 random bits.

    In the order they are made, so that each new call's rows go to the end of the
    journal's indexes rather than to a random page of them.
    """
    return f"{time.time_ns() // 1000:016x}{os.urandom(8).hex()}"


def fingerprint(body: bytes) -> str:
    """What an Idempotency-Key is bound to: the request body's SHA-256."""
    return hashlib.sha256(body).hexdigest()


def _require(principal: Principal, role: str) -> None:
    if role not in principal.roles:
        msg = f"{principal.name} lacks the {role} role"
        raise ApiError(403, "forbidden", msg)


def _split(ref: str) -> tuple[str, str | None]:
    name, _, version = ref.partition("@")
    return name, version or None


def _stored_context(
    call: StoredCall,
    request: dict[str, object],
    approval: Confirmation | None,
    tools: ToolSet,
    config: ServiceConfig,
) -> CallContext:
    """A stored call's context as it was proposed, carrying a person's decision (R5, R7)."""
    response = call.body.get("response")
    trace_id = response.get("trace_id") if isinstance(response, dict) else None
    return CallContext(
        subject=Subject(id=call.subject, tenant=call.tenant),
        tools=tools,
        timezone=str(request["timezone"]),
        locale=str(request["locale"]),
        reference_time=datetime.fromisoformat(str(request["reference_time"])),
        timeout=config.timeout,
        result_budget=config.result_budget,
        invocation_id=call.invocation_id,
        trace_id=None if trace_id is None else str(trace_id),
        approval=approval,
        edited_from=_edit_of(request.get("edited_from")),
    )


def _edit_of(value: object) -> Edit | None:
    """The edit a stored request records (``None`` for a call as the model proposed it)."""
    if not isinstance(value, dict):
        return None
    return Edit(
        invocation_id=str(value["invocation_id"]),
        digest=str(value["digest"]),
        editor=str(value["editor"]),
    )


def _proposal(request: dict[str, object]) -> Proposal:
    model_call_id = request.get("model_call_id")
    version = request.get("version")
    return Proposal(
        name=str(request["tool"]),
        arguments=str(request["arguments"]).encode(),
        proposal_id=str(request["call_id"]),
        model_call_id=None if model_call_id is None else str(model_call_id),
        version=None if version is None else str(version),
    )


def _down(failure: BaseException) -> bool:
    """Whether ``failure`` says a store cannot answer at all now (not: is full)."""
    code = getattr(failure, "code", None)
    return isinstance(failure, JournalError | LedgerError) and code == "storage_unavailable"


def _interrupted(journal: Journal, call: StoredCall, now: datetime, why: str) -> None:
    note(journal, call, "interrupted", {"reason": why}, status="interrupted", now=now)


def _webhooks(service: Service, config: ServiceConfig) -> Webhooks | None:
    if not config.webhooks:
        return None
    # Imported here: httpx and the signing library are needed only with webhooks.
    from toolbound.service.webhooks import Webhooks  # noqa: PLC0415

    return Webhooks(
        service.journal,
        config.webhooks,
        tenants=service._tenants,  # noqa: SLF001 - the service's own view of its tenants
        owner=service.instance_id,
        clock=service.clock,
    )

"""The runtime: the public facade that drives a call through the pipeline's stages."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, ParamSpec, Self, TypeVar, cast

from toolbound._clock import SystemClock
from toolbound._errors import ConfirmationMismatch
from toolbound._ids import call_ids
from toolbound._state import State
from toolbound.execution.executor import Executor
from toolbound.execution.offload import Offload
from toolbound.execution.retry import SystemSleeper
from toolbound.gates.confirm import Edit
from toolbound.gates.parse import DEFAULT_LIMITS, ParseLimits
from toolbound.ledger.memory import MemoryLedger
from toolbound.pipeline import admit, confirm, endings, execute, express, offloop, prepare
from toolbound.pipeline.admit import Preview
from toolbound.pipeline.call import Admitted, CallContext, Prepared
from toolbound.pipeline.confirm import Approver, ConfirmationDesk, HeldCalls
from toolbound.pipeline.env import Env, Kept, KeptResults
from toolbound.pipeline.inbox import HeldInbox
from toolbound.recording import JournalRecorder
from toolbound.results.encode import model_result, page
from toolbound.results.redact import Redactor

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from toolbound._clock import Clock
    from toolbound._errors import Problem
    from toolbound._model import Proposal
    from toolbound._outcome import AwaitingConfirmation, Outcome, Rejected
    from toolbound.execution.fence import Lease
    from toolbound.execution.retry import RetryPolicy, Sleeper
    from toolbound.execution.tool import SecretProvider
    from toolbound.gates.authorize import Policy
    from toolbound.gates.confirm import Confirmation, ConfirmationRequest
    from toolbound.journal import Journal
    from toolbound.ledger.store import Ledger
    from toolbound.pipeline.admit import Refusal, Verdict
    from toolbound.pipeline.call import Opened
    from toolbound.pipeline.prepare import Waiting
    from toolbound.results.encode import ModelProjection
    from toolbound.trace import TraceSink

__all__ = ["CallContext", "Preview", "Runtime"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class Runtime:
    """Runs proposals against registered tools under a policy.

    One runtime serves many requests and threads. It owns a worker pool for sync
    tools (so a deadline can abandon a tool that overruns: its thread runs on until
    the function returns, and whatever it returns then is discarded — a write
    abandoned this way is OUTCOME_UNKNOWN) and, when sync callers use async tools, an
    event loop thread. Close it with :meth:`close` or use it as a context manager.

    Retries follow R10's matrix (:mod:`toolbound.execution.retry`) up to each tool's
    ``max_attempts``, with the same idempotency key, waiting through ``sleeper``
    (``retry_policy`` sets the backoff; ``rng`` its jitter). ``ledger`` is the
    idempotency ledger: in memory by default, :class:`~toolbound.SQLiteLedger` or
    ``PostgresLedger`` for durability. With ``hold_parked=False`` a parked call is not
    kept here: the caller's store keeps it and resumes it with ``CallContext.approval``
    (the service does, so any of its processes resumes a call another parked).

    With ``journal`` (a :class:`~toolbound.journal.Journal`, e.g.
    ``open_journal("sqlite:///calls.db")``) every call is also kept in it, with
    surface ``"library"``: its trace as events and a head row, written off the
    call's path by a :class:`~toolbound.recording.JournalRecorder` (:attr:`recorder`),
    so ``toolbound trace ID`` and the console show it (R14). :meth:`close` writes what
    is pending; the journal stays open for its owner to close. A parked call is then
    in the journal's inbox, held by ``holder`` (unique by default): a person may
    decide it in the service's console, and :attr:`inbox` applies those decisions
    (:mod:`toolbound.pipeline.inbox`), the same for a recorder among ``sinks``.

    With ``lease`` (a :class:`~toolbound.execution.fence.Lease`, e.g. the
    :class:`~toolbound.execution.fence.RenewedLease` a service renews) a write's tool
    is invoked only while the lease has at least its margin left, as well as before
    the call's deadline; otherwise the attempt ends ``lease_lost`` and the tool never
    starts (R9, :mod:`toolbound.execution.fence`).

    The async API (:meth:`arun`, :meth:`aconfirm`, …) keeps its caller's event loop
    free: the ledger's claims and records run on a pool of ``io_threads`` threads
    (:meth:`off_loop`), the gates' in-memory work on the loop (:mod:`.offloop`).
    """

    def __init__(
        self,
        *,
        policy: Policy,
        ledger: Ledger | None = None,
        secrets: SecretProvider | None = None,
        clock: Clock | None = None,
        parse_limits: ParseLimits = DEFAULT_LIMITS,
        redactor: Redactor | None = None,
        sinks: Sequence[TraceSink] = (),
        confirmation_ttl: timedelta = timedelta(minutes=15),
        max_workers: int = 8,
        kept_results: int = 1024,
        retry_policy: RetryPolicy | None = None,
        sleeper: Sleeper | None = None,
        rng: Callable[[], float] = random.random,
        hold_parked: bool = True,
        journal: Journal | None = None,
        lease: Lease | None = None,
        holder: str | None = None,
        io_threads: int = 8,
    ) -> None:
        self.recorder = (
            None if journal is None else JournalRecorder(journal, surface="library", holder=holder)
        )
        """Keeps every call in ``journal``, if one was given."""
        if self.recorder is not None:
            sinks = (*sinks, self.recorder)
        self._env = Env(
            policy=policy,
            ledger=ledger if ledger is not None else MemoryLedger(),
            clock=clock if clock is not None else SystemClock(),
            secrets=secrets,
            limits=parse_limits,
            redactor=redactor if redactor is not None else Redactor(),
            sinks=tuple(sinks),
            confirmation_ttl=confirmation_ttl,
            executor=Executor(max_workers=max_workers),
            retry_policy=retry_policy,
            sleeper=sleeper if sleeper is not None else SystemSleeper(),
            rng=rng,
            kept=KeptResults(kept_results),
            offload=Offload(io_threads, name="toolbound-runtime-io"),
            lease=lease,
        )
        self._held = HeldCalls()
        self._hold_parked = hold_parked
        recorder = next((s for s in sinks if isinstance(s, JournalRecorder)), None)
        self.inbox = (
            None if recorder is None or not hold_parked else HeldInbox(self, self._held, recorder)
        )
        """Decisions made elsewhere on the calls held here (with a journal among the sinks)."""
        self.desk = ConfirmationDesk(
            self._held if self.inbox is None else self.inbox.calls, clock=self._env.clock
        )
        """Where a person's decisions on this runtime's parked calls are checked (R7)."""

    @property
    def sinks(self) -> tuple[TraceSink, ...]:
        """The trace sinks every call's events go to (R14)."""
        return self._env.sinks

    @property
    def policy(self) -> Policy:
        """The policy every call is authorized under (R6)."""
        return self._env.policy

    @policy.setter
    def policy(self, policy: Policy) -> None:
        self._env = replace(self._env, policy=policy)

    @property
    def ledger(self) -> Ledger:
        """The idempotency ledger (R8)."""
        return self._env.ledger

    @property
    def confirmation_ttl(self) -> timedelta:
        """How long a person has to decide on a parked call (R7)."""
        return self._env.confirmation_ttl

    @property
    def clock(self) -> Clock:
        """The clock the trace, deadlines and normalization read."""
        return self._env.clock

    async def off_loop(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` on this runtime's I/O pool, awaited from the loop."""
        return await self._env.offload(fn, *args, **kwargs)

    # -- running a proposal --------------------------------------------------------------

    def run(self, proposal: Proposal, context: CallContext) -> Outcome:
        """Take ``proposal`` through every gate and, if admitted, execute it."""
        env = self._env
        call = admit.open_call(env, proposal, context)
        verdict = admit.judge(env, proposal, context, life=call.life)
        if express.takes(verdict, context):
            return express.run(env, call, verdict)
        step = prepare.ready(env, self._front(env, call, verdict))
        return execute.run(env, step) if isinstance(step, Prepared) else step

    async def arun(self, proposal: Proposal, context: CallContext) -> Outcome:
        """:meth:`run` for async callers: async tools run on the caller's loop."""
        env = self._env
        call = admit.open_call(env, proposal, context)
        step = await offloop.admit_call(env, proposal, context, call, self._front)
        if isinstance(step, admit.Verdict):  # the express lane takes it
            return await express.arun(env, call, step)
        if isinstance(step, prepare.Waiting):  # the same call is executing elsewhere (R8)
            step = await prepare.aready(env, step)
        return await execute.arun(env, step) if isinstance(step, Prepared) else step

    def preview(self, proposal: Proposal, context: CallContext) -> Preview:
        """What the gates would decide for ``proposal``, with nothing recorded, run or spent.

        The same parse, validation, normalization, digest, provenance and policy as
        :meth:`run`, in the same order — for a surface that must know before it runs
        a call whether a person will be asked (an SDK's approval hook), or must show
        a person the normalized arguments and digest. Rate limits are consulted as a
        recheck, so a preview never spends them. The call itself is judged again when
        it runs.
        """
        return admit.preview(self._env, proposal, context)

    def reject(self, proposal: Proposal, context: CallContext, problem: Problem) -> Rejected:
        """Refuse a proposal before parsing, for a reason found outside it.

        For what a surface sees around the proposal — a duplicate call id in one
        response, an incomplete stream — so the refusal is traced like any other.
        """
        call = admit.open_call(self._env, proposal, context)
        return endings.reject(call, State.PARSE_REJECTED, problem)

    def _front(
        self, env: Env, call: Opened, verdict: Verdict | Refusal
    ) -> Prepared | Waiting | Outcome:
        """Admission, then a person if the policy asks for one, then preparation."""
        step = admit.admitted(call, verdict)
        if not isinstance(step, Admitted):
            return step
        reason = step.confirm_reason
        if reason is not None:
            context = call.ctx
            if context.approval is None:
                return confirm.park(env, self._held if self._hold_parked else None, step, reason)
            held = confirm.approved(env, step, context.approval, reason)
            if not isinstance(held, Admitted):
                return held
            step = held
        return prepare.prepare(env, step)

    # -- the confirmation desk (R7) ----------------------------------------------------

    def pending(self) -> list[ConfirmationRequest]:
        """The calls waiting for a person, oldest first (expired ones are ended first)."""
        held = self._held
        confirm.end_expired(held, self._env.clock.now())
        return held.requests()

    def parked(self) -> Iterable[str]:
        """The invocation ids waiting for confirmation."""
        return self._held.parked()

    def issue(
        self,
        invocation_id: str,
        *,
        digest: str,
        approver: str,
        approved: bool = True,
        ttl: timedelta | None = None,
        reason: str | None = None,
    ) -> Confirmation:
        """Record a person's decision on the call they were shown, by its digest.

        The runtime is the only issuer: :meth:`confirm` accepts only confirmations
        issued here, each for the one invocation and digest it names (R7). Raises
        :class:`~toolbound.ConfirmationMismatch` when no such call waits undecided
        (``not_pending``), the digest is not the call's (``digest_mismatch``), or its
        confirmation window closed (``confirmation_expired``: the call then ends
        AUTHORIZATION_REJECTED).
        """
        now = self._env.clock.now()
        try:
            return self.desk.decide(
                invocation_id,
                digest=digest,
                approver=Approver(name=approver),
                approve=approved,
                at=now,
                ttl=ttl or self._env.confirmation_ttl,
                reason=reason,
            )
        except ConfirmationMismatch as exc:
            if exc.code == "confirmation_expired":
                confirm.end_expired(self._held, now)  # the closed window ends the call
            raise

    def approve(
        self,
        invocation_id: str,
        *,
        digest: str,
        approver: str,
        ttl: timedelta | None = None,
        timeout: float | None = None,
    ) -> Outcome:
        """A person approves the call they were shown (by its digest); run it now."""
        confirmation = self.issue(invocation_id, digest=digest, approver=approver, ttl=ttl)
        return self.confirm(confirmation, timeout=timeout)

    async def aapprove(
        self,
        invocation_id: str,
        *,
        digest: str,
        approver: str,
        ttl: timedelta | None = None,
        timeout: float | None = None,
    ) -> Outcome:
        """:meth:`approve` for async callers (a journal's compare-and-set off the loop)."""
        issue = partial(self.issue, invocation_id, digest=digest, approver=approver, ttl=ttl)
        confirmation = issue() if self.inbox is None else await self.off_loop(issue)
        return await self.aconfirm(confirmation, timeout=timeout)

    def deny(
        self, invocation_id: str, *, digest: str, approver: str, reason: str | None = None
    ) -> Outcome:
        """A person refuses the call: it ends AUTHORIZATION_REJECTED.

        The ``reason`` they give is traced with the decision and told to the model
        (``denied_by_person``, quoted and attributed, at most
        :data:`~toolbound.gates.confirm.REASON_CHARS` characters).
        """
        issue = partial(self.issue, invocation_id, digest=digest, approver=approver)
        return self.confirm(issue(approved=False, reason=reason))

    def confirm(self, confirmation: Confirmation, *, timeout: float | None = None) -> Outcome:
        """Resume a parked call with a decision :meth:`issue` recorded (R7).

        Raises :class:`~toolbound.ConfirmationMismatch` (and leaves the call parked)
        when the confirmation was not issued here, names no parked call, another
        call, or other arguments.
        """
        env = self._env
        step = prepare.ready(env, self._resume(env, confirmation, timeout))
        return execute.run(env, step) if isinstance(step, Prepared) else step

    async def aconfirm(
        self, confirmation: Confirmation, *, timeout: float | None = None
    ) -> Outcome:
        """:meth:`confirm` for async callers."""
        env = self._env
        resumed = await env.offload.finish(self._resume, env, confirmation, timeout)
        step = await prepare.aready(env, resumed)
        return await execute.arun(env, step) if isinstance(step, Prepared) else step

    def edit(
        self,
        invocation_id: str,
        *,
        digest: str,
        arguments: str | bytes,
        approver: str,
        timeout: float | None = None,
    ) -> Outcome:
        """A person corrects a parked call's arguments and approves the corrected call (R7).

        ``digest`` is the one the person was shown; ``arguments`` the corrected text.
        The desk's rules apply as to any decision (``not_pending``,
        ``digest_mismatch``, ``confirmation_expired``), the call staying parked when
        one refuses. Otherwise the parked call ends CANCELLED_BEFORE_COMMIT, nothing
        run, and the corrected arguments are a new proposal with the same call id:
        parsed, validated, normalized, digested and authorized again, its trace naming
        the call it replaces, the digest shown and the editor. If the policy asks a
        person about the corrected call, ``approver``'s approval covers exactly its
        new digest; if a gate refuses it, that refusal is the answer and nothing runs.
        """
        proposal, context = self._edited(invocation_id, digest, arguments, approver)
        outcome = self.run(proposal, context)
        if outcome.kind != "awaiting_confirmation":
            return outcome
        return self.confirm(self._editor_approves(outcome, approver), timeout=timeout)

    async def aedit(
        self,
        invocation_id: str,
        *,
        digest: str,
        arguments: str | bytes,
        approver: str,
        timeout: float | None = None,
    ) -> Outcome:
        """:meth:`edit` for async callers (a journal's compare-and-set off the loop)."""
        proposal, context = self._edited(invocation_id, digest, arguments, approver)
        outcome = await self.arun(proposal, context)
        if outcome.kind != "awaiting_confirmation":
            return outcome
        approves = partial(self._editor_approves, outcome, approver)
        confirmation = approves() if self.inbox is None else await self.off_loop(approves)
        return await self.aconfirm(confirmation, timeout=timeout)

    def _edited(
        self, invocation_id: str, digest: str, arguments: str | bytes, approver: str
    ) -> tuple[Proposal, CallContext]:
        """End the parked call for its correction; the corrected proposal and its context."""
        env = self._env
        now = env.clock.now()
        try:
            self.desk.check(invocation_id, digest=digest, approver=Approver(name=approver), at=now)
        except ConfirmationMismatch as exc:
            if exc.code == "confirmation_expired":
                confirm.end_expired(self._held, now)  # the closed window ends the call
            raise
        call = self._held.cancel(invocation_id)
        new_id, _ = call_ids()
        endings.cancelled(env, call, f"edited by {approver} before it ran; replaced by {new_id}")
        text = arguments.encode() if isinstance(arguments, str) else bytes(arguments)
        proposal = replace(call.proposal, arguments=text, received_at=now)
        edit = Edit(invocation_id=invocation_id, digest=digest, editor=approver)
        context = replace(call.ctx, invocation_id=new_id, edited_from=edit, approval=None)
        return proposal, context

    def _editor_approves(self, outcome: AwaitingConfirmation, approver: str) -> Confirmation:
        # The editor wrote exactly these arguments: their edit approves this digest (R7).
        return self.issue(outcome.invocation_id, digest=outcome.request.digest, approver=approver)

    def cancel_pending(self, invocation_id: str) -> Outcome:
        """Cancel a parked call: CANCELLED_BEFORE_COMMIT, nothing executed."""
        call = self._held.cancel(invocation_id)
        return endings.cancelled(self._env, call, "cancelled while waiting for confirmation")

    def _resume(
        self, env: Env, confirmation: Confirmation, timeout: float | None
    ) -> Prepared | Waiting | Outcome:
        call, problem = self._held.take(confirmation, now=env.clock.now())
        resumed = confirm.resume(env, call, confirmation, problem, timeout)
        if not isinstance(resumed, Admitted):
            return resumed
        return prepare.prepare(env, resumed)

    # -- results too large for one message (R11, R16) ----------------------------------

    def shrink(self, outcome: Outcome, budget: int) -> Outcome:
        """The same outcome with its model message cut to ``budget`` bytes (R16).

        Only an observed result can shrink; the full value stays fetchable through
        the continuation handle. The new bytes are recorded as sent (R14).
        """
        if outcome.kind != "observed" or len(outcome.message.content) <= budget:
            return outcome
        payload = outcome.message.payload
        kept = self._env.kept.get(outcome.invocation_id)
        value = kept.value if kept is not None else payload.get("data")
        message = model_result(
            invocation_id=outcome.invocation_id,
            proposal_id=outcome.proposal_id,
            tool=outcome.tool,
            value=value,
            budget=budget,
            empty_meaning=cast("str | None", payload.get("meaning")),
            cuts=outcome.message.cuts,
        )
        if message.truncated and kept is None:
            self._env.kept.keep(
                outcome.invocation_id, Kept(outcome.tool, outcome.proposal_id, value)
            )
        outcome.trace.record(
            "tool_message",
            content=message.content,
            is_error=message.is_error,
            truncated=message.truncated,
            cuts=message.cuts,
            reason="batch result budget",
        )
        return replace(outcome, message=message)

    def continue_result(self, handle: str, *, size: int | None = None) -> ModelProjection:
        """The next page of a truncated result, from its continuation handle (R11)."""
        invocation_id, _, offset = handle.rpartition(":")
        kept = self._env.kept.get(invocation_id)
        if kept is None or not offset.isdigit():
            msg = f"no kept result for handle {handle!r}"
            raise KeyError(msg)
        return page(
            invocation_id=invocation_id,
            proposal_id=kept.proposal_id,
            tool=kept.tool,
            value=kept.value,
            offset=int(offset),
            size=size or 16_384,
        )

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the worker pool and loop thread (running tools are not interrupted).

        With a journal, the calls that ended are written to it first.
        """
        self._env.executor.close()
        self._env.offload.close()
        if self.recorder is not None:
            self.recorder.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

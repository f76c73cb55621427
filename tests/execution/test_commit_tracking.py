"""R8, R9: the ledger's phases, read-back after commit, reconciliation of unknowns."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from harness import Harness, spec
from toolbound import CommitUnknown, NotCommitted
from toolbound._model import ReadBack
from toolbound._state import State
from toolbound.execution.reconcile import (
    Reconciler,
    RemoteCommitted,
    RemoteNotCommitted,
    RemoteUnknown,
)
from toolbound.ledger.memory import MemoryLedger
from toolbound.ledger.rules import owner_may_act_until
from toolbound.ledger.store import LedgerError, NotYetError
from toolbound.testing import FakeTool

S = State


def write(**kw):
    return spec("write", effect="reversible_write", **kw)


@pytest.fixture
def ledger():
    return MemoryLedger()


@pytest.fixture
def h(clock, ledger):
    harness = Harness(clock, ledger=ledger)
    yield harness
    harness.close()


def phase_of(ledger, outcome):
    record = ledger.find(outcome.invocation_id)
    return None if record is None else record.phase


def test_phases_recorded_in_order(h, ledger):
    """A committed write leaves its record committed, holding the result."""
    h.registry.register(write(), FakeTool(returns={"text": "ok"}))
    out = h.run("write", {"text": "x"})
    record = ledger.find(out.invocation_id)
    assert record.phase == "committed"
    assert record.result.value == {"text": "ok"}
    assert record.canonical == b'{"text":"x"}'
    assert record.subject == {"id": "mira", "tenant": "acme", "session": "s-1"}


def test_tool_sees_executing_before_it_runs(h, ledger):
    """Intent is durable as 'executing' before the tool's side effect starts."""
    seen = []

    def tool(args, ctx):
        seen.append(ledger.find(ctx.invocation.invocation_id).phase)
        return {"text": "ok"}

    h.registry.register(write(), tool)
    h.run("write", {"text": "x"})
    assert seen == ["executing"]


def test_failed_before_commit_releases_the_key(h, ledger):
    """A failure before commit is recorded failed; the same call may run again."""
    tool = FakeTool(raises=NotCommitted("busy", code="busy"))
    h.registry.register(write(), tool)
    first = h.run("write", {"text": "x"})
    assert phase_of(ledger, first) == "failed"
    tool.raises = None
    tool.returns = {"text": "ok"}
    second = h.run("write", {"text": "x"})
    assert second.kind == "observed"
    assert len(tool.calls) == 2


# -- the claim is 'executing' (R9: one commit before the tool may start) ---------


@pytest.mark.parametrize(
    ("spec_kw", "ctx_kw", "code"),
    [
        pytest.param({"secrets": ("api_key",)}, {}, "secret_unavailable", id="no credential"),
        pytest.param({}, {"timeout": 0.0}, "deadline_exceeded", id="no time left"),
    ],
)
def test_a_claimed_call_that_cannot_start_is_recorded_failed(h, ledger, spec_kw, ctx_kw, code):
    """Claimed as 'executing', a call whose tool cannot start ends 'failed', never 'unknown'."""
    tool = FakeTool(returns={"text": "ok"})
    h.registry.register(write(**spec_kw), tool)
    out = h.run("write", {"text": "x"}, **ctx_kw)
    assert (out.state, out.problem.code) == (S.FAILED_BEFORE_COMMIT, code)
    assert S.PREPARED in out.path
    assert phase_of(ledger, out) == "failed"
    assert tool.calls == []


class LostAnswerLedger(MemoryLedger):
    """The claim lands, then its answer is lost (a connection dropped at COMMIT)."""

    def __init__(self, *, readable: bool = True) -> None:
        super().__init__()
        self.readable = readable

    def claim_executing(self, intent, *, now):
        super().claim_executing(intent, now=now)
        msg = "connection lost at commit"
        raise LedgerError(msg, code="storage_unavailable")

    def find(self, invocation_id):
        if not self.readable:
            msg = "still down"
            raise LedgerError(msg, code="storage_unavailable")
        return super().find(invocation_id)


def test_a_claim_that_landed_unanswered_is_read_back_and_failed(clock):
    """The claim raised but its record is there: the call held the key, and records 'failed'."""
    ledger = LostAnswerLedger()
    h = Harness(clock, ledger=ledger)
    tool = FakeTool(returns={"text": "ok"})
    h.registry.register(write(), tool)
    out = h.run("write", {"text": "x"})
    h.close()
    assert (out.state, out.problem.code) == (S.FAILED_BEFORE_COMMIT, "ledger_unavailable")
    assert out.path[-2:] == (S.PREPARED, S.FAILED_BEFORE_COMMIT)
    assert phase_of(ledger, out) == "failed"
    assert tool.calls == []


def test_a_claim_that_cannot_be_read_back_is_left_to_the_sweep(clock):
    """Claim and read-back both fail: the record stays 'executing', swept to 'unknown'."""
    ledger = LostAnswerLedger(readable=False)
    h = Harness(clock, ledger=ledger)
    tool = FakeTool(returns={"text": "ok"})
    h.registry.register(write(), tool)
    out = h.run("write", {"text": "x"}, timeout=1.0)
    h.close()
    assert (out.state, out.problem.code) == (S.FAILED_BEFORE_COMMIT, "ledger_unavailable")
    assert S.PREPARED not in out.path
    assert tool.calls == []
    (left,) = ledger.sweep(now=clock.now() + timedelta(seconds=60), grace=timedelta(seconds=5))
    assert (left.invocation_id, left.phase) == (out.invocation_id, "unknown")


# -- read-back ------------------------------------------------------------------


def test_read_back_match_is_observed(h):
    """A read-back that agrees leaves the call OBSERVED and is traced."""
    h.registry.register(
        write(read_back=lambda inv, value: ReadBack(matches=True, observed=value)),
        FakeTool(returns={"text": "ok"}),
    )
    out = h.run("write", {"text": "x"})
    assert out.kind == "observed"
    (event,) = out.trace.of_kind("read_back")
    assert event.data["matches"] is True


def test_read_back_conflict_is_not_success(h, ledger):
    """A 'success' the target contradicts is reported as a conflict (R9)."""
    h.registry.register(
        write(
            read_back=lambda inv, value: ReadBack(
                matches=False, observed={"text": "old"}, detail="title unchanged"
            )
        ),
        FakeTool(returns={"text": "ok"}),
    )
    out = h.run("write", {"text": "x"})
    assert out.kind == "failed"
    assert out.path[-2:] == (S.COMMITTED, S.FAILED_AFTER_COMMIT)
    assert out.problem.code == "readback_conflict"
    assert "title unchanged" in out.problem.message
    assert out.committed
    assert phase_of(ledger, out) == "committed"


def test_read_back_error_is_unverified_not_conflict(h):
    """A read-back that cannot observe leaves the call OBSERVED, marked unverified."""

    def broken(_inv, _value):
        raise OSError

    h.registry.register(write(read_back=broken), FakeTool(returns={"text": "ok"}))
    out = h.run("write", {"text": "x"})
    assert out.kind == "observed"
    assert out.trace.of_kind("read_back")[0].data["verified"] is False


# -- reconciliation ---------------------------------------------------------------


def unknown_write(h, query=None):
    tool = FakeTool(raises=CommitUnknown("response lost"))
    h.registry.register(write(query=query), tool)
    out = h.run("write", {"text": "x"})
    assert out.kind == "outcome_unknown"
    return tool, out


def past_the_owners_deadline(h, ledger, out) -> None:
    """Move the clock past the instant the call's owner could still start its effect (R9)."""
    h.clock.advance(
        (owner_may_act_until(ledger.find(out.invocation_id)) - h.clock.now()).total_seconds()
        + 0.001
    )


def test_unknown_is_never_rerun_silently(h, ledger):
    """The same call after an unknown outcome is refused, not executed again."""
    tool, out = unknown_write(h)
    again = h.run("write", {"text": "x"})
    assert again.problem.code == "outcome_unknown"
    assert len(tool.calls) == 1
    assert [r.invocation_id for r in ledger.unresolved()] == [out.invocation_id]


def test_reconcile_to_committed_with_evidence(h, ledger):
    """A query that finds the effect resolves the call COMMITTED, and it replays."""
    seen = []

    def query(call):
        seen.append(call)
        return RemoteCommitted(
            value={"text": "ok"}, external_resource_id="r-1", evidence={"remote": "found"}
        )

    tool, out = unknown_write(h, query)
    (done,) = Reconciler(ledger=ledger, registry=h.registry, clock=h.clock).reconcile()
    assert done.status == "committed"
    assert done.path == (S.OUTCOME_UNKNOWN, S.COMMITTED)
    assert seen[0].arguments == {"text": "x"}
    assert seen[0].idempotency_key == out.invocation.idempotency_key
    record = ledger.find(out.invocation_id)
    assert record.phase == "committed"
    assert record.evidence[-1]["remote"] == "found"
    replay = h.run("write", {"text": "x"})
    assert replay.kind == "observed"
    assert replay.replayed_from == out.invocation_id
    assert replay.result.value == {"text": "ok"}
    assert len(tool.calls) == 1


def test_reconcile_to_not_committed_allows_a_new_run(h, ledger):
    """A query that finds nothing resolves FAILED_BEFORE_COMMIT; the call may run again."""
    tool, out = unknown_write(h, lambda call: RemoteNotCommitted(evidence={"remote": "absent"}))
    past_the_owners_deadline(h, ledger, out)
    (done,) = Reconciler(ledger=ledger, registry=h.registry, clock=h.clock).reconcile()
    assert done.status == "failed"
    assert done.path == (S.OUTCOME_UNKNOWN, S.FAILED_BEFORE_COMMIT)
    tool.raises = None
    tool.returns = {"text": "ok"}
    assert h.run("write", {"text": "x"}).kind == "observed"
    assert len(tool.calls) == 2


@pytest.mark.parametrize(
    "query",
    [None, lambda call: RemoteUnknown(), lambda call: 1 / 0],
    ids=["no hook", "still unknown", "query fails"],
)
def test_unresolvable_stays_unknown(h, ledger, query):
    """Without a usable answer the call stays unknown and is listed for a person."""
    _, out = unknown_write(h, query)
    (done,) = Reconciler(ledger=ledger, registry=h.registry, clock=h.clock).reconcile()
    assert done.status in {"needs_person", "unknown"}
    assert phase_of(ledger, out) == "unknown"


def test_person_resolves_with_evidence(h, ledger):
    """A person can resolve an unknown call with their own evidence."""
    _, out = unknown_write(h)
    past_the_owners_deadline(h, ledger, out)
    rec = Reconciler(ledger=ledger, registry=h.registry, clock=h.clock)
    done = rec.resolve(out.invocation_id, committed=False, by="ana", evidence={"ticket": "T-1"})
    assert done.status == "failed"
    record = ledger.find(out.invocation_id)
    assert record.evidence[-1]["resolved_by"] == "ana"
    assert record.evidence[-1]["ticket"] == "T-1"


def test_not_committed_is_refused_while_the_owner_may_still_act(h, ledger):
    """Before the owner's deadline (+ skew) a person's "not committed" is not_yet, retry_at."""
    _, out = unknown_write(h)
    rec = Reconciler(ledger=ledger, registry=h.registry, clock=h.clock)
    with pytest.raises(NotYetError) as err:
        rec.resolve(out.invocation_id, committed=False, by="ana", evidence={"ticket": "T-1"})
    until = owner_may_act_until(ledger.find(out.invocation_id))
    assert (err.value.code, err.value.retry_at) == ("not_yet", until)
    assert phase_of(ledger, out) == "unknown"
    done = rec.resolve(out.invocation_id, committed=True, by="ana", evidence={"ticket": "T-2"})
    assert done.status == "committed"  # the effect found: nothing to wait for


def test_a_query_saying_not_committed_too_early_leaves_the_call_unknown(h, ledger):
    """A query hook's "not committed" before the owner's deadline changes nothing yet."""
    _, out = unknown_write(h, lambda call: RemoteNotCommitted(evidence={"remote": "absent"}))
    (done,) = Reconciler(ledger=ledger, registry=h.registry, clock=h.clock).reconcile()
    until = owner_may_act_until(ledger.find(out.invocation_id))
    assert done.status == "unknown"
    assert (done.evidence["answer"], done.evidence["retry_at"]) == (
        "not_committed",
        until.isoformat(),
    )
    assert phase_of(ledger, out) == "unknown"


def test_sweep_turns_abandoned_executing_into_unknown(clock, ledger):
    """A record left 'executing' past its deadline (a dead process) becomes unknown."""
    h = Harness(clock, ledger=ledger)
    gate = []

    def stuck(args, ctx):
        gate.append(ledger.find(ctx.invocation.invocation_id).phase)
        raise SystemExit  # stands in for the process dying mid-call

    h.registry.register(write(), stuck)
    with pytest.raises(SystemExit):
        h.run("write", {"text": "x"}, timeout=1.0)
    h.close()
    clock.advance(60)
    rec = Reconciler(ledger=ledger, registry=h.registry, clock=clock, grace=timedelta(seconds=5))
    (record,) = rec.unresolved()
    assert record.phase == "unknown"
    assert record.evidence[-1] == {"swept": "executing"}


# -- one transaction for effect and record -------------------------------------


def test_transactional_failure_rolls_everything_back(h, ledger):
    """A transactional tool that raises leaves no record and no effect."""
    h.registry.register(write(transactional=True), FakeTool(raises=RuntimeError("boom")))
    out = h.run("write", {"text": "x"})
    assert out.state is S.FAILED_BEFORE_COMMIT
    assert out.problem.code == "tool_error"
    assert ledger.find(out.invocation_id) is None


def test_transactional_success_commits_and_replays(h, ledger):
    """A transactional write commits its record with it, and a repeat replays."""
    tool = FakeTool(returns={"text": "ok"})
    h.registry.register(write(transactional=True), tool)
    first = h.run("write", {"text": "x"})
    assert first.kind == "observed"
    assert phase_of(ledger, first) == "committed"
    again = h.run("write", {"text": "x"})
    assert again.replayed_from == first.invocation_id
    assert len(tool.calls) == 1


def test_transactional_output_violation_rolls_back(h, ledger):
    """A transactional tool whose result breaks its contract commits nothing."""
    h.registry.register(write(transactional=True), FakeTool(returns={"text": "ok", "x": 1}))
    out = h.run("write", {"text": "x"})
    assert out.state is S.FAILED_BEFORE_COMMIT
    assert out.problem.code == "output_rejected"
    assert ledger.find(out.invocation_id) is None


# -- waiting for the same call (R8: in progress, or wait for it) -------------------


def test_same_call_in_progress_can_wait_for_the_result(clock):
    """A second identical call waits for the first and gets its result, one effect."""
    import threading

    h = Harness(clock)
    tool = FakeTool(delay=1.0, returns={"text": "ok"})
    h.registry.register(write(), tool)
    first: list = []
    t = threading.Thread(target=lambda: first.append(h.run("write", {"text": "x"})))
    t.start()
    deadline = time.monotonic() + 10
    while not tool.calls and time.monotonic() < deadline:  # the first call is executing
        time.sleep(0.005)
    impatient = h.run("write", {"text": "x"})
    patient = h.run("write", {"text": "x"}, wait_in_flight=5.0)
    t.join()
    h.close()
    assert impatient.problem.code == "in_progress"
    assert patient.kind == "observed"
    assert patient.replayed_from == first[0].invocation_id
    assert len(tool.calls) == 1
    assert patient.trace.of_kind("waiting_for")

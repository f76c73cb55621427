"""Fencing (R9): an effect starts only while the lease is held with margin, before the deadline.

The rule is one table (:func:`may_start`); the runtime asks it immediately before each
attempt invokes its tool, on the staged path, the express lane and the transactional
variant alike. A refused attempt ends FAILED_BEFORE_COMMIT and the tool never runs. A
tool gets its ownership's epoch beside its key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from harness import Harness, spec
from toolbound import NotCommitted
from toolbound._state import State
from toolbound.execution.fence import Go, RenewedLease, Stop, may_start
from toolbound.execution.retry import NotReached
from toolbound.ledger.memory import MemoryLedger
from toolbound.ledger.store import LedgerKey
from toolbound.testing import FakeTool

if TYPE_CHECKING:
    from toolbound._clock import FixedClock
    from toolbound.execution.tool import ToolContext

T0 = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)


@dataclass
class FakeLease:
    """A lease with ``seconds_left`` left, needing ``margin`` to start an effect."""

    seconds_left: float = 30.0
    margin: float = 10.0
    lapsed_at: float | None = None
    """When the lease ran out and was won back, if it did: calls begun before have lost it."""

    def left(self, since: float) -> float:
        if self.lapsed_at is not None and since < self.lapsed_at:
            return -1.0
        return self.seconds_left


@dataclass
class Ticking:
    """A monotonic clock a test moves by hand."""

    now: float = 100.0

    def __call__(self) -> float:
        return self.now


# -- the rule --------------------------------------------------------------------------

# (now, deadline, lease left or None, margin) -> go, or the code of the stop
RULE = [
    pytest.param(5.0, 10.0, None, 0.0, "go", id="before the deadline, no lease -> go"),
    pytest.param(10.0, 10.0, None, 0.0, "deadline_exceeded", id="at the deadline -> stop"),
    pytest.param(11.0, 10.0, None, 0.0, "deadline_exceeded", id="past the deadline -> stop"),
    pytest.param(5.0, 10.0, 30.0, 10.0, "go", id="lease held with margin -> go"),
    pytest.param(5.0, 10.0, 10.0, 10.0, "go", id="lease left exactly the margin -> go"),
    pytest.param(5.0, 10.0, 9.9, 10.0, "lease_lost", id="lease within its margin -> stop"),
    pytest.param(5.0, 10.0, -3.0, 10.0, "lease_lost", id="lease expired -> stop"),
    pytest.param(
        11.0, 10.0, -3.0, 10.0, "deadline_exceeded", id="both passed -> the deadline is named"
    ),
]


@pytest.mark.parametrize(("now", "deadline", "left", "margin", "expected"), RULE)
def test_rule_table(now: float, deadline: float, left: float | None, margin: float, expected):
    """An effect may start only before the deadline and with at least the margin of lease."""
    lease = None if left is None else FakeLease(seconds_left=left, margin=margin)
    start = may_start(now=now, deadline=deadline, lease=lease, since=1.0)
    if expected == "go":
        assert start == Go()
    else:
        assert isinstance(start, Stop)
        assert start.code == expected
        assert start.message


# -- the lease a renewing process keeps ------------------------------------------------


def test_a_renewed_lease_runs_from_when_the_renewal_was_sent():
    """Held for `seconds` from its start, then from each acknowledged renewal's sending."""
    clock = Ticking()
    lease = RenewedLease(30.0, clock=clock)
    begun = clock.now
    assert (lease.left(begun), lease.margin) == (30.0, 10.0)
    clock.now += 10
    sent = lease.renewing()
    clock.now += 2  # the store's answer took two seconds
    lease.renewed(sent)
    assert lease.left(begun) == 28.0


def test_a_renewal_that_failed_leaves_the_lease_running_out():
    """No acknowledged renewal, no extension: a process cut off from its store loses the lease."""
    clock = Ticking()
    lease = RenewedLease(6.0, clock=clock)
    begun = clock.now
    lease.renewing()  # sent, never acknowledged
    clock.now += 5
    assert lease.left(begun) == 1.0
    assert lease.left(begun) < lease.margin


def test_an_older_renewal_acknowledged_late_never_shortens_the_lease():
    """Renewals answered out of order keep the later lease."""
    clock = Ticking()
    lease = RenewedLease(30.0, clock=clock)
    begun = first = lease.renewing()
    clock.now += 5
    lease.renewed(lease.renewing())
    lease.renewed(first)
    assert lease.left(begun) == 30.0


def test_a_renewal_after_the_lease_ran_out_holds_only_calls_begun_since():
    """Paused past its lease, then renewed: older calls stay lost, newer ones are held."""
    clock = Ticking()
    lease = RenewedLease(6.0, clock=clock)
    before = clock.now
    clock.now += 20  # paused: another process may have taken the calls it held
    lease.renewed(lease.renewing())
    assert lease.left(before) < 0
    assert lease.left(clock.now) == 6.0


@pytest.mark.parametrize(
    ("seconds", "margin"), [(0.0, None), (-1.0, None), (10.0, 10.0), (10.0, -1.0)]
)
def test_a_lease_that_could_never_start_an_effect_is_a_configuration_error(seconds, margin):
    """A non-positive lease, or a margin outside [0, lease), is refused when built."""
    from toolbound._errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        RenewedLease(seconds, margin=margin)


# -- the runtime asks the rule immediately before the tool -----------------------------


def write_spec(**kw: object):
    return spec("write", effect="reversible_write", **kw)


@pytest.fixture
def ledger() -> MemoryLedger:
    return MemoryLedger()


@pytest.fixture
def lease() -> FakeLease:
    return FakeLease()


@pytest.fixture
def fenced(clock: FixedClock, ledger: MemoryLedger, lease: FakeLease):
    harness = Harness(clock, ledger=ledger, lease=lease)
    yield harness
    harness.close()


def record_of(ledger: MemoryLedger, out) -> object:
    return ledger.find(out.invocation.invocation_id)


def test_a_write_with_its_lease_held_runs_under_the_first_epoch(fenced, ledger):
    """Lease held with margin: the tool runs, and its context carries epoch 1 beside its key."""
    seen: list[ToolContext] = []
    fenced.registry.register(write_spec(), lambda _a, ctx: seen.append(ctx) or {"text": "ok"})
    out = fenced.run("write", {"text": "x"})
    assert out.kind == "observed"
    (ctx,) = seen
    assert (ctx.epoch, ctx.idempotency_key) == (1, out.invocation.idempotency_key)
    assert (record_of(ledger, out).phase, record_of(ledger, out).epoch) == ("committed", 1)


def test_the_trace_names_the_epoch_a_write_ran_under(fenced):
    """EXECUTING's detail carries a write's epoch; a read's detail has none (R14)."""
    fenced.registry.register(write_spec(), FakeTool(returns={"text": "ok"}))
    fenced.registry.register(spec(secrets=()), FakeTool(returns={"text": "ok"}))
    write = fenced.run("write", {"text": "x"})
    read = fenced.run("echo", {"text": "x"})

    def executing(out) -> dict:
        (event,) = [e for e in out.trace.events if e.state is State.EXECUTING]
        return dict(event.data)

    assert executing(write)["epoch"] == 1
    assert "epoch" not in executing(read)


def test_a_write_whose_lease_lapsed_never_starts(fenced, ledger, lease):
    """Lease within its margin: FAILED_BEFORE_COMMIT, lease_lost, the tool never called."""
    lease.seconds_left = 2.0
    tool = FakeTool(returns={"text": "ok"})
    fenced.registry.register(write_spec(), tool)
    out = fenced.run("write", {"text": "x"})
    assert out.kind == "failed"
    assert out.path[-2:] == (State.EXECUTING, State.FAILED_BEFORE_COMMIT)
    assert (out.problem.code, out.problem.kind) == ("lease_lost", "timeout")
    assert out.result.commit_status == "not_committed"
    assert tool.calls == []
    assert record_of(ledger, out).phase == "failed"


def test_a_write_begun_before_its_lease_lapsed_never_starts(fenced, ledger, lease, clock):
    """The lease ran out after the call began and was won back: the tool still never starts."""
    lease.lapsed_at = clock.monotonic() + 1.0  # later than the call's start
    tool = FakeTool(returns={"text": "ok"})
    fenced.registry.register(write_spec(), tool)
    out = fenced.run("write", {"text": "x"})
    assert (out.kind, out.problem.code) == ("failed", "lease_lost")
    assert tool.calls == []


def test_a_read_is_not_bound_by_the_writes_lease(fenced, lease):
    """Reads hold no call: the express lane checks the deadline only, and the read runs."""
    lease.seconds_left = -100.0
    seen: list[ToolContext] = []
    fenced.registry.register(spec(), lambda _a, ctx: seen.append(ctx) or {"text": "ok"})
    out = fenced.run("echo", {"text": "x"})
    assert out.kind == "observed"
    assert seen[0].epoch is None


@dataclass
class PausingSecrets:
    """A credential store so slow the deadline passes while it answers (a paused process)."""

    clock: FixedClock
    pause: float
    asked: list[str] = field(default_factory=list)

    def get(self, name: str) -> str:
        self.asked.append(name)
        self.clock.advance(self.pause)
        return "s3cret"


def test_a_deadline_passed_after_the_claim_stops_the_tool(clock: FixedClock, ledger):
    """Paused between the claim and the invocation past the deadline: the tool never starts."""
    secrets = PausingSecrets(clock, pause=31.0)
    harness = Harness(clock, ledger=ledger, secrets=secrets)
    tool = FakeTool(returns={"text": "ok"})
    harness.registry.register(write_spec(secrets=("api",), timeout=30.0), tool)
    try:
        out = harness.run("write", {"text": "x"})
    finally:
        harness.close()
    assert secrets.asked == ["api"]
    assert (out.kind, out.problem.code) == ("failed", "deadline_exceeded")
    assert tool.calls == []
    assert record_of(ledger, out).phase == "failed"


@dataclass
class LapsingSleeper:
    """Waits between attempts by losing the lease: the process paused in its backoff."""

    lease: FakeLease
    slept: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.lease.seconds_left = 0.0

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


@pytest.mark.parametrize("surface", ["sync", "async"])
def test_a_retry_after_the_lease_lapsed_never_starts(clock, ledger, lease, surface):
    """A second attempt is fenced too: the first did nothing, so the call failed before commit."""
    sleeper = LapsingSleeper(lease)
    harness = Harness(clock, ledger=ledger, lease=lease, sleeper=sleeper)
    calls: list[int] = []

    def tool(_args, _ctx):
        calls.append(1)
        msg = "refused"
        raise NotReached(msg)

    harness.registry.register(write_spec(max_attempts=3, idempotency="native_key"), tool)
    try:
        if surface == "sync":
            out = harness.run("write", {"text": "x"})
        else:
            import asyncio

            from harness import proposal

            out = asyncio.run(
                harness.runtime.arun(proposal("write", {"text": "x"}), harness.context())
            )
    finally:
        harness.close()
    assert len(sleeper.slept) == 1
    assert len(calls) == 1
    assert (out.kind, out.problem.code) == ("failed", "lease_lost")
    assert [a.outcome for a in out.result.attempts] == ["not_committed", "not_committed"]
    assert record_of(ledger, out).phase == "failed"


def test_a_transactional_write_whose_lease_lapsed_rolls_its_claim_back(fenced, ledger, lease):
    """In the tool's own transaction: refused before the tool, the claim rolled back with it."""
    lease.seconds_left = 0.0
    tool = FakeTool(returns={"text": "ok"})
    fenced.registry.register(write_spec(transactional=True), tool)
    out = fenced.run("write", {"text": "x"})
    assert (out.kind, out.problem.code) == ("failed", "lease_lost")
    assert tool.calls == []
    assert record_of(ledger, out) is None


def test_a_transactional_write_gets_its_epoch(fenced, ledger):
    """The transactional variant hands the tool the epoch its claim opened."""
    seen: list[ToolContext] = []
    fenced.registry.register(
        write_spec(transactional=True), lambda _a, ctx: seen.append(ctx) or {"text": "ok"}
    )
    out = fenced.run("write", {"text": "x"})
    assert out.kind == "observed"
    assert seen[0].epoch == 1


def test_the_same_write_run_again_after_failing_is_the_next_epoch(fenced, ledger):
    """A failed call run again is a new ownership of its key: the tool sees epoch 2."""
    seen: list[int | None] = []

    def tool(_args, ctx: ToolContext):
        seen.append(ctx.epoch)
        if len(seen) == 1:
            msg = "declined"
            raise NotCommitted(msg, code="declined")
        return {"text": "ok"}

    fenced.registry.register(write_spec(), tool)
    first = fenced.run("write", {"text": "x"})
    second = fenced.run("write", {"text": "x"})
    assert (first.kind, second.kind) == ("failed", "observed")
    assert seen == [1, 2]
    key = LedgerKey(second.invocation.subject.tenant, "write@v1", second.invocation.idempotency_key)
    assert ledger.get(key).epoch == 2


def test_an_owner_taken_over_cannot_record_its_outcome(fenced, ledger, clock):
    """Taken over mid-tool (past its deadline): the owner's commit is fenced; the taker's stands."""

    def tool(_args, ctx: ToolContext):
        key = LedgerKey(ctx.invocation.subject.tenant, "write@v1", ctx.idempotency_key)
        later = ctx.invocation.deadline + timedelta(seconds=2)
        ledger.take_over(key, invocation_id=ctx.invocation.invocation_id, now=later)
        return {"text": "ok"}

    fenced.registry.register(write_spec(), tool)
    out = fenced.run("write", {"text": "x"})
    record = record_of(ledger, out)
    assert (record.phase, record.epoch) == ("unknown", 2)
    assert any(
        e.kind == "ledger_write_failed" and e.data["code"] == "fenced" for e in out.trace.events
    )

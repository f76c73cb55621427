"""R9: an owner paused (SIGSTOP) past its lease or deadline is fenced; exactly one effect.

Two runtime processes share one ledger (a SQLite file, or a PostgreSQL schema): the
child (:mod:`fence_child`) starts a payment and is stopped inside its tool; this
process then tries to take the call over (refused until the owner's deadline has
passed), takes it over, and an operator finds it "not committed"; the child resumes
and its tool tries its effect under its old epoch; the agent proposes the payment
again, which runs under a newer one. The downstream keeps exactly one payment.
A process paused between two attempts for longer than its lease starts no second
attempt. Bounded in time: every wait has a limit; loopback only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fence_child import ARGUMENTS, TIMEOUT, ledger_of, pay_once, payments, registry
from lease_child import LEASE

from toolbound.execution.reconcile import Reconciler
from toolbound.gates.normalize import canonical_json, digest
from toolbound.ledger.rules import owner_may_act_until
from toolbound.ledger.sqlite import SQLiteLedger
from toolbound.ledger.store import LedgerKey, NotYetError

CHILD = Path(__file__).parent / "fence_child.py"
LEASE_CHILD = Path(__file__).parent / "lease_child.py"
KEY = LedgerKey(
    "acme",
    "pay@v1",
    "tb:"
    + digest(
        tenant="acme",
        tool_name="pay",
        tool_version="v1",
        canonical=canonical_json(json.loads(ARGUMENTS)),
    ),
)


def wait_for(path: Path, child: subprocess.Popen[str], limit: float = 30.0) -> None:
    """Until ``path`` exists; fail at once if the child ended first."""
    deadline = time.monotonic() + limit
    while not path.exists():
        if child.poll() is not None:
            pytest.fail(f"the child ended before {path.name}: {child.communicate()[1]}")
        if time.monotonic() > deadline:
            pytest.fail(f"{path.name} never appeared")
        time.sleep(0.02)


def sleep_until(instant: datetime) -> None:
    time.sleep(max(0.0, (instant - datetime.now(UTC)).total_seconds()))


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path) -> tuple[str, str]:
    """(kind, target) of the ledger both processes share: a file, or a schema."""
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "ledger.db")
    return "postgres", request.getfixturevalue("pg_conninfo")


@pytest.mark.parametrize("resumed", ["before the payment is proposed again", "after it"])
def test_a_paused_owner_is_fenced_and_the_payment_happens_once(tmp_path, store, resumed):
    """Stopped mid-tool, taken over, found not committed, proposed again, resumed: one payment."""
    kind, target = store
    ledger = ledger_of(kind, target)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(  # noqa: S603 - our own child program
        [sys.executable, str(CHILD), kind, target, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_for(tmp_path / "in_tool", child)
        os.kill(child.pid, signal.SIGSTOP)  # paused inside its tool, holding epoch 1
        record = ledger.get(KEY)
        assert (record.phase, record.epoch) == ("executing", 1)

        # Too early: the owner may still start its effect until its deadline (+ skew).
        with pytest.raises(NotYetError) as early:
            ledger.take_over(KEY, invocation_id=record.invocation_id, now=datetime.now(UTC))
        assert early.value.retry_at == owner_may_act_until(record)
        assert ledger.get(KEY) == record

        sleep_until(early.value.retry_at)
        taken = ledger.take_over(
            KEY, invocation_id=record.invocation_id, now=datetime.now(UTC), evidence={"by": "b"}
        )
        assert (taken.phase, taken.epoch) == ("unknown", 2)
        assert payments(kind, target) == []  # what the operator checks
        reconciler = Reconciler(ledger=ledger, registry=registry(kind, target))
        found = reconciler.resolve(
            record.invocation_id, committed=False, by="ops", evidence={"payments": "none"}
        )
        assert found.status == "failed"

        if resumed == "after it":
            assert pay_once(registry(kind, target), ledger, "call-2").kind == "observed"
        (tmp_path / "go").write_text("")
        os.kill(child.pid, signal.SIGCONT)  # the paused tool goes on, under epoch 1
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
            child.communicate(timeout=10)  # reaped, its pipes closed
    assert child.returncode == 0, err
    ending = json.loads(out.strip().splitlines()[-1])
    assert ending["tool_done"]
    assert (tmp_path / "effect").read_text() == "0"  # its fenced insert changed nothing
    # Its tool said "not paid", or its wait ended at the deadline first: either way its
    # ending is not the record's. The record was taken from it (fenced), and then held by
    # the new proposal's invocation (not_holder).
    assert ending["kind"] in {"failed", "outcome_unknown"}
    refused = "not_holder" if resumed == "after it" else "fenced"
    assert ending["ledger_write_failed"] == [refused]

    if resumed != "after it":
        assert pay_once(registry(kind, target), ledger, "call-2").kind == "observed"
    assert payments(kind, target) == [(KEY.key, 3)]
    record = ledger.get(KEY)
    assert (record.phase, record.epoch) == ("committed", 3)
    ledger.close()
    assert TIMEOUT < 5  # the test's length is bounded by the tool's deadline


def test_an_owner_paused_past_its_lease_starts_no_new_attempt(tmp_path):
    """Stopped in its retry's backoff for longer than its lease: the retry never starts."""
    ledger_db = tmp_path / "ledger.db"
    child = subprocess.Popen(  # noqa: S603 - our own child program
        [
            sys.executable,
            str(Path(__file__).parent / "lease_child.py"),
            str(ledger_db),
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        wait_for(tmp_path / "attempt-1", child)
        os.kill(child.pid, signal.SIGSTOP)  # in the backoff before attempt 2
        time.sleep(2 * LEASE)  # its lease runs out; its renewals are stopped too
        os.kill(child.pid, signal.SIGCONT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
            child.communicate(timeout=10)
    assert child.returncode == 0, err
    ending = json.loads(out.strip().splitlines()[-1])
    assert (ending["kind"], ending["code"]) == ("failed", "lease_lost")
    assert ending["attempts"] == ["not_committed", "not_committed"]
    assert not (tmp_path / "attempt-2").exists()
    assert not (tmp_path / "effect").exists()
    with SQLiteLedger(ledger_db) as ledger:
        record = ledger.find(ending["invocation_id"])
    assert (record.phase, record.epoch) == ("failed", 1)  # it did not run; it may run again

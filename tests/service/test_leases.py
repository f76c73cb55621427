"""Owners and leases: several processes on one store never overwrite each other's calls.

A call being worked on is held by one Service under a lease renewed while it lives;
another Service takes it over only once the lease has passed, and ends it truthfully:
from the ledger's record, or by running a person's recorded decision on. Every test
runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from datetime import timedelta
from urllib.parse import quote

import pytest
from service_config import DATABASE, KEYS, config_text
from service_pack import effects
from starlette.testclient import TestClient

from toolbound._clock import FixedClock
from toolbound.config import parse_config
from toolbound.execution.offload import Offload
from toolbound.journal import JournalError
from toolbound.ledger.rules import owner_may_act_until
from toolbound.ledger.store import Intent, LedgerKey
from toolbound.service.api import _leases, create_app
from toolbound.service.core import Service, Submission, fingerprint

EXPIRED = -1.0  # a lease that passed a second ago: its owner stopped renewing


@pytest.fixture(params=["sqlite", "postgres"])
def config(request, tmp_path, effects_path):
    if request.param == "sqlite":
        url = "sqlite:///toolbound.db"
    else:
        cluster = request.getfixturevalue("pg_cluster")
        conninfo = request.getfixturevalue("pg_conninfo")
        schema = conninfo.split("search_path=")[1].rstrip("'")
        url = (
            f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/{DATABASE}"
            f"?options={quote(f'-c search_path={schema}')}"
        )
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text(url, confirm_writes=False))
    return parse_config(path.read_text(), source=path)


@pytest.fixture
def services(config):
    made: list[Service] = []

    def start(**kw) -> Service:
        made.append(Service(config, **kw))
        return made[-1]

    yield start
    for service in made:
        service.close()


def who(service: Service, name: str):
    return next(p for p in service.config.principals if p.name == name)


def submit(service: Service, text: str, *, tool: str = "notes.add", key: str | None = None):
    body = f'{{"tool": "{tool}", "arguments": "{{\\"text\\": \\"{text}\\"}}", "call_id": "c"}}'
    submission = Submission.from_body(body.encode())
    _, answer, _ = asyncio.run(service.submit(who(service, "agent"), submission, request_key=key))
    return answer


def invocation(answer: str) -> str:
    return answer.split('"invocation_id":"')[1].split('"', maxsplit=1)[0]


def die_after(service: Service, invocation_id: str, *, owner: str = "dead-process") -> None:
    """Leave the call as an owner that died mid-run would: running, its lease passed."""
    journal = service.journal
    with journal._tx() as cur:
        cur.execute(
            journal._q(
                "UPDATE toolbound_service_calls SET status = 'running', owner = ?,"  # noqa: S608 - fixed SQL
                f" lease_until = {journal._now} - 1 WHERE invocation_id = ?"
            ),
            (owner, invocation_id),
        )


def test_a_second_start_leaves_a_live_owners_running_call_alone(services):
    """Starting another Service does not touch a call the first is still running."""
    first = services()
    answers: list[str] = []
    worker = threading.Thread(target=lambda: answers.append(submit(first, "slow")))
    worker.start()
    deadline = time.monotonic() + 10
    running = []
    while not running and time.monotonic() < deadline:
        running = first.journal.list_calls("acme", status="running")
        time.sleep(0.02)
    assert running, "the slow call was never recorded running"
    # Recorded as it opened, with its proposal: what a dead owner would leave.
    [proposed] = first.journal.events(running[0].invocation_id)
    assert (proposed["kind"], proposed["data"]["name"]) == ("proposal", "notes.add")
    second = services()
    assert second.recovered == 0
    assert second.recover() == 0
    assert first.journal.get_call(running[0].invocation_id).status == "running"
    worker.join()
    stored = first.journal.get_call(running[0].invocation_id)
    assert stored.status == "observed"
    assert stored.owner == first.instance_id
    assert effects() == ["slow"]
    # The ending appended the rest of the run: one proposal, then every step, in order.
    trace = first.journal.events(stored.invocation_id)
    assert [e["kind"] for e in trace].count("proposal") == 1
    assert trace[0] == proposed
    assert trace[-1]["kind"] == "tool_message"
    assert [e["seq"] for e in trace] == list(range(len(trace)))


def test_a_live_owners_lease_renewal_keeps_its_call(services):
    """A lease renewed by its live owner is not taken over."""
    first = services()
    call_id = invocation(submit(first, "a"))
    die_after(first, call_id, owner=first.instance_id)
    assert first.renew() == 1
    assert services().recover() == 0
    stored = first.journal.get_call(call_id)
    assert (stored.status, stored.owner) == ("running", first.instance_id)


def test_a_dead_owners_call_that_never_reached_the_ledger_is_interrupted(services):
    """Running, owner dead, nothing in the ledger: interrupted."""
    first = services()
    call = first.journal.get_call(invocation(submit(first, "never")))
    first.journal.put_call(replace(call, invocation_id="f" * 32))  # no ledger record
    die_after(first, "f" * 32)
    second = services()
    stored = second.journal.get_call("f" * 32)
    assert stored.status == "interrupted"
    assert stored.owner == second.instance_id
    assert stored.body["response"]["taken_over"]["ledger_phase"] is None
    # The evidence names the owner that died, and the process that took the call over.
    assert stored.body["response"]["taken_over"]["taken_over_from"] == "dead-process"
    assert stored.body["response"]["taken_over"]["taken_over_by"] == second.instance_id


def test_a_call_whose_owner_died_after_the_proposal_keeps_it_then_its_recovery(services):
    """R14: the trace of a call settled by another process: its proposal, then recovery."""
    first = services()
    done = first.journal.get_call(invocation(submit(first, "gone")))
    proposal = first.journal.events(done.invocation_id)[0]
    first.journal.put_call(
        replace(done, invocation_id="e" * 32, status="running", owner="dead-process"),
        events=[proposal],
        lease=EXPIRED,
    )
    second = services()
    trace = second.journal.events("e" * 32)
    assert [e["kind"] for e in trace] == ["proposal", "recovery"]
    assert trace[1]["data"]["taken_over_from"] == "dead-process"
    assert trace[1]["data"]["ledger_phase"] is None
    assert trace[1]["state"] == second.journal.get_call("e" * 32).state == "proposed"


def test_a_dead_owners_committed_call_ends_with_the_ledgers_result(services):
    """Running, owner dead after the tool committed: observed, with the stored result."""
    first = services()
    call_id = invocation(submit(first, "kept"))
    die_after(first, call_id)
    second = services()
    assert second.recovered == 1
    stored = second.journal.get_call(call_id)
    assert stored.status == "observed"
    assert stored.body["response"]["result"]["value"] == {"saved": "kept"}
    assert effects() == ["kept"]


def test_a_dead_owners_unknown_call_is_listed_and_reconcilable(services):
    """Running, outcome unknown in the ledger: outcome_unknown, in /v1/unknown, reconcilable."""
    first = services()
    call_id = invocation(submit(first, "lost-1"))
    die_after(first, call_id)
    second = services()
    assert second.journal.get_call(call_id).status == "outcome_unknown"
    ops = who(second, "ops")
    assert call_id in {r.invocation_id for r in second.unknown(ops)}
    answer = second.reconcile(ops, call_id, committed=True, evidence={"checked": "by hand"})
    assert answer["status"] == "committed"
    assert second.journal.get_call(call_id).status == "reconciled_committed"


def parked_digest(service: Service, invocation_id: str) -> str | None:
    return service.journal.get_call(invocation_id).digest


def park(service: Service, text: str) -> str:
    answer = submit(service, text, tool="notes.send")
    assert '"status":"awaiting_confirmation"' in answer
    return invocation(answer)


def test_an_approved_call_whose_owner_died_runs_once_on_takeover(services):
    """Approved, then the deciding process died: the next Service runs it, exactly once."""
    first = services()
    call_id = park(first, "hello")
    parked = first.journal.events(call_id)
    first.journal.decide(
        call_id,
        decision="approved",
        approver="ana",
        now=first.clock.now(),
        owner="dead-process",
        lease=EXPIRED,
    )
    second = services()
    assert second.recovered == 1
    stored = second.journal.get_call(call_id)
    assert stored.status == "observed"
    assert effects() == ["send:hello"]
    # R14: the trace kept the parking's events, the decision, then the re-run's.
    trace = second.journal.events(call_id)
    assert trace[: len(parked)] == parked
    assert trace[len(parked)]["kind"] == "decision"
    assert trace[len(parked)]["data"]["digest"] == parked_digest(first, call_id)
    assert [e["kind"] for e in trace[len(parked) + 1 :]][-1] == "tool_message"
    assert [e["seq"] for e in trace] == list(range(len(trace)))
    assert services().recover() == 0
    assert effects() == ["send:hello"]


def test_a_dead_owners_running_tool_is_taken_over_only_after_its_deadline(services):
    """R9: lease passed, tool's deadline not: left alone; after it, unknown under epoch 2."""
    first = services()
    call_id = park(first, "held")
    deadline = first.clock.now() + timedelta(seconds=30)
    key = LedgerKey("acme", "notes.send@v1", "k-held")
    claim = first.ledger.claim_executing(
        Intent(
            key=key,
            digest="d",
            invocation_id=call_id,
            tool="notes.send@v1",
            canonical=b'{"text":"held"}',
            subject={"id": "mira", "tenant": "acme", "session": None},
            deadline=deadline,
        ),
        now=first.clock.now(),
    )
    assert claim.kind == "claimed"
    die_after(first, call_id)  # its tool started; its process stopped renewing

    second = services()
    assert second.recovered == 0  # its owner may still make the effect
    assert second.journal.get_call(call_id).owner == "dead-process"
    assert (first.ledger.get(key).phase, first.ledger.get(key).epoch) == ("executing", 1)

    second.clock = FixedClock(owner_may_act_until(first.ledger.get(key)) + timedelta(seconds=1))
    assert second.recover() == 1
    record = second.ledger.get(key)
    assert (record.phase, record.epoch) == ("unknown", 2)
    assert record.evidence[-1]["taken_over_from"] == "dead-process"
    assert second.journal.get_call(call_id).status == "outcome_unknown"


def test_a_denied_call_whose_owner_died_ends_rejected(services):
    """Denied, then the deciding process died: the call ends rejected, nothing runs."""
    first = services()
    call_id = park(first, "no")
    first.journal.decide(
        call_id,
        decision="denied",
        approver="ana",
        now=first.clock.now(),
        owner="dead-process",
        lease=EXPIRED,
    )
    second = services()
    assert second.journal.get_call(call_id).status == "rejected"
    assert effects() == []


def test_a_denials_reason_reaches_the_model_when_another_process_ends_the_call(services):
    """The reason is kept with the decision before the call runs on: a taker tells it too."""
    first = services()
    call_id = park(first, "no")
    first.journal.decide(
        call_id,
        decision="denied",
        approver="ana",
        now=first.clock.now(),
        owner="dead-process",
        lease=EXPIRED,
    )
    stored = first.journal.get_call(call_id)
    denial = {"reason": "not today", "by": "ana", "at": first.clock.now().isoformat()}
    first.journal.put_call(replace(stored, body={**stored.body, "denial": denial}), lease=EXPIRED)
    second = services()
    ended = second.journal.get_call(call_id)
    assert ended.status == "rejected"
    assert 'who said: \\"not today\\"' in ended.body["response"]["message"]["content"]
    assert ended.body["denial"] == denial
    assert effects() == []


def test_an_approved_calls_trace_starts_with_the_proposal_and_keeps_every_event(services):
    """R14: approving on another replica appends the decision and the re-run, in order."""
    parking, deciding = services(), services()
    call_id = park(parking, "traced")
    parked = parking.journal.events(call_id)
    digest = parking.journal.get_call(call_id).digest
    asyncio.run(deciding.decide(who(deciding, "ana"), call_id, digest=digest, decision="approve"))
    trace = parking.journal.events(call_id)  # read back on the replica that parked it
    assert trace[0]["kind"] == "proposal"
    assert trace[: len(parked)] == parked
    decision = trace[len(parked)]
    assert decision["kind"] == "decision"
    assert decision["data"] == {
        "decision": "approved",
        "approver": "ana",
        "digest": digest,
        "reason": None,
    }
    rerun = [e["kind"] for e in trace[len(parked) + 1 :]]
    assert rerun[0] == "proposal"
    assert rerun[-1] == "tool_message"
    assert [e["seq"] for e in trace] == list(range(len(trace)))
    assert parking.journal.get_call(call_id).status == "observed"


def test_a_retried_key_of_a_dead_owners_call_gets_the_settled_answer(services):
    """An Idempotency-Key held by a call whose owner died answers, not 409 for 300 s."""
    first = services()
    body = b'{"tool": "notes.add", "arguments": "{\\"text\\": \\"k\\"}", "call_id": "c"}'
    journal = first.journal
    claim = journal.claim_request(
        "acme", "k-dead", fingerprint(body), now=first.clock.now(), stale_after=300
    )
    assert claim.kind == "new"
    call_id = invocation(submit(first, "k", key="k-dead"))
    second = services()  # started before the owner died: its start-up sweep saw nothing
    die_after(first, call_id)
    with journal._tx() as cur:
        cur.execute(
            journal._q(
                "UPDATE toolbound_service_requests SET status_code = NULL, response = NULL"
                " WHERE key = ?"
            ),
            ("k-dead",),
        )
    with TestClient(create_app(second)) as client:
        retry = client.post(
            "/v1/proposals",
            content=body,
            headers={"Authorization": f"Bearer {KEYS['agent']}", "Idempotency-Key": "k-dead"},
        )
    assert retry.status_code == 200, retry.text
    assert retry.json()["status"] == "observed"
    assert retry.headers["idempotent-replayed"] == "true"
    assert effects() == ["k"]


def test_a_key_claimed_by_a_process_that_died_before_recording_its_call_is_taken_over(services):
    """Claimed, no call recorded, older than a lease: the retry runs it, not 409 for 300 s."""
    service = services(lease=timedelta(seconds=5))
    body = b'{"tool": "notes.add", "arguments": "{\\"text\\": \\"c\\"}", "call_id": "c"}'
    journal = service.journal
    before = service.clock.now() - timedelta(seconds=6)
    for key, at in (("k-died", before), ("k-live", service.clock.now())):
        claim = journal.claim_request("acme", key, fingerprint(body), now=at, stale_after=300)
        assert claim.kind == "new"
    headers = {"Authorization": f"Bearer {KEYS['agent']}"}
    with TestClient(create_app(service)) as client:
        # A claim younger than a lease may still be about to record its call: 409.
        live = client.post(
            "/v1/proposals", content=body, headers={**headers, "Idempotency-Key": "k-live"}
        )
        assert live.status_code == 409
        retry = client.post(
            "/v1/proposals", content=body, headers={**headers, "Idempotency-Key": "k-died"}
        )
    assert retry.status_code == 200, retry.text
    assert retry.json()["status"] == "observed"
    assert effects() == ["c"]


class SweepsBadly:
    """A service whose first sweep outlasts several leases and whose next ones fail."""

    lease = timedelta(seconds=0.3)

    def __init__(self) -> None:
        self.renewed = 0
        self.sweeps = 0
        self.io = Offload(2)

    def renew(self) -> int:
        self.renewed += 1
        return 0

    def recover(self) -> int:
        self.sweeps += 1
        if self.sweeps == 1:
            time.sleep(1.0)
            return 0
        msg = "the store went away"
        raise JournalError(msg, code="unavailable")


def test_renewals_go_on_while_a_sweep_runs_long_or_fails():
    """A process keeps renewing its leases through a slow sweep and after a failed one."""
    service = SweepsBadly()

    async def run() -> None:
        task = asyncio.create_task(_leases(service))
        await asyncio.sleep(2.0)
        task.cancel()

    asyncio.run(run())
    service.io.close()
    # A renewal every 0.1 s: about 20; a loop that waited for the sweep, or ended with
    # it, would have made about 6.
    assert service.renewed >= 12
    assert service.sweeps >= 2

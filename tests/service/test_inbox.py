"""One inbox (R7, R18): a call a library program parks is listed and decided by the service.

A program running ``Runtime(journal=...)`` keeps its parked calls in the journal, held
under its holder's lease. ``/v1/confirmations`` lists them beside the service's own,
with their surface and whether a decision can land; a decision made through the API is
recorded (who, when, the digest shown) and handed over, and the program applies it
through the same path as a decision of its own: the call runs, or is denied with the
person's reason, exactly once.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import TYPE_CHECKING

import pytest
from service_config import KEYS
from service_pack import effects

from toolbound import ConfirmationMismatch, Proposal, Subject
from toolbound.client import CallAnswer, Invocation
from toolbound.pipeline.call import CallContext
from toolbound.pipeline.runtime import Runtime
from toolbound.recording import JournalRecorder
from toolbound.wiring import journal_for, policy_for

if TYPE_CHECKING:
    from collections.abc import Iterator

    from starlette.testclient import TestClient

    from toolbound._outcome import AwaitingConfirmation
    from toolbound.service.core import Service

AGENT = Subject(id="agent-1", tenant="acme")


class Program:
    """A plain Python program on the service's store: its own runtime, journal and holder."""

    def __init__(self, service: Service, *, holder: str | None = None, lease: float = 30.0):
        self.service = service
        self.journal = journal_for(service.config.store_url)
        self.recorder = JournalRecorder(self.journal, surface="library", holder=holder, lease=lease)
        self.runtime = Runtime(
            policy=policy_for(service.config, service.clock),
            sinks=(self.recorder,),
        )
        self.calls = 0

    def context(self) -> CallContext:
        return CallContext(subject=AGENT, tools=self.service.registry.toolset())

    def park(self, text: str) -> AwaitingConfirmation:
        self.calls += 1
        proposal = Proposal(
            name="notes.add",
            arguments=json.dumps({"text": text}).encode(),
            proposal_id=f"call-{self.calls}",
        )
        outcome = self.runtime.run(proposal, self.context())
        assert outcome.kind == "awaiting_confirmation", outcome
        self.recorder.flush()
        return outcome

    def close(self) -> None:
        self.runtime.close()
        self.recorder.close()
        self.journal.close()


@pytest.fixture
def program(service: Service) -> Iterator[Program]:
    p = Program(service)
    yield p
    p.close()


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def decide(client: TestClient, parked: AwaitingConfirmation, decision: str, **extra: object):
    return client.post(
        f"/v1/invocations/{parked.invocation_id}/decision",
        json={"digest": parked.request.digest, "decision": decision, **extra},
        headers=auth("ana"),
    )


def waiting(client: TestClient) -> dict[str, dict[str, object]]:
    r = client.get("/v1/confirmations", headers=auth("ana"))
    assert r.status_code == 200, r.text
    return {c["invocation_id"]: c for c in r.json()["confirmations"]}


def test_a_call_a_program_parks_is_listed_with_its_surface_and_holder(client, program):
    """/v1/confirmations lists the library's parked call: surface, holder, decidable."""
    parked = program.park("from the program")
    listed = waiting(client)[parked.invocation_id]
    assert listed["surface"] == "library"
    assert listed["owner"] == program.recorder.holder
    assert listed["decidable"] is True
    assert "why" not in listed
    assert listed["confirmation"]["digest"] == parked.request.digest


def test_an_approval_through_the_api_is_handed_over_and_runs_once(client, program):
    """202 handed_over; the program applies it: the call runs once, decided by ana."""
    parked = program.park("approved elsewhere")
    r = decide(client, parked, "approve")
    assert r.status_code == 202, r.text
    assert r.json()["handed_over"] is True
    assert (r.json()["decision"], r.json()["approver"]) == ("approved", "ana")
    assert effects() == []  # recorded, not run here: the call waits in the program
    assert [d.invocation_id for d in program.runtime.inbox.decisions()] == [parked.invocation_id]
    [outcome] = program.runtime.inbox.apply()
    assert outcome.kind == "observed"
    assert effects() == ["approved elsewhere"]
    assert program.runtime.inbox.apply() == []  # applied once
    confirmed = [e for e in outcome.trace if e.kind == "confirmation"]
    assert confirmed[-1].data["record"].approver == "ana"
    program.recorder.flush()
    ended = program.journal.get_call(parked.invocation_id)
    assert (ended.status, ended.decision, ended.approver) == ("observed", "approved", "ana")
    assert parked.invocation_id not in waiting(client)


def test_a_denial_with_a_reason_reaches_the_model(client, program):
    """The person's reason, given in the API, is what the model is told by the program."""
    parked = program.park("denied elsewhere")
    r = decide(client, parked, "deny", reason="not this week")
    assert r.status_code == 202, r.text
    [outcome] = program.runtime.inbox.apply()
    assert outcome.kind == "rejected"
    assert outcome.problem.code == "denied_by_person"
    told = outcome.message.content.decode()
    assert "not this week" in told
    assert "ana" in told
    assert effects() == []


def test_a_decision_on_a_call_whose_holder_is_gone_is_refused(client, service):
    """Once the holder's lease passed: listed not decidable, with why; a decision is 409."""
    program = Program(service, lease=0.3)
    try:
        parked = program.park("orphaned")
        program.recorder.close()  # the renewals stop, as when the process dies
        time.sleep(0.5)
        listed = waiting(client)[parked.invocation_id]
        assert listed["decidable"] is False
        assert "gone" in listed["why"]
        r = decide(client, parked, "approve")
        assert r.status_code == 409, r.text
        assert r.json()["code"] == "holder_gone"
        assert program.journal.get_call(parked.invocation_id).decision is None
        # Nor does the service's recovery take it over: it is the program's.
        assert service.recover() == 0
        assert program.journal.get_call(parked.invocation_id).owner == program.recorder.holder
    finally:
        program.close()


def test_a_local_approval_and_one_through_the_api_race_and_one_wins(client, program):
    """Approve in the program and in the API at once: one decision, one execution (R7)."""
    parked = program.park("raced")
    results: dict[str, object] = {}
    start = threading.Barrier(2)

    def local() -> None:
        start.wait()
        try:
            results["local"] = program.runtime.approve(
                parked.invocation_id, digest=parked.request.digest, approver="local-person"
            ).kind
        except ConfirmationMismatch as exc:
            results["local"] = exc.code

    def remote() -> None:
        start.wait()
        results["remote"] = decide(client, parked, "approve").status_code

    threads = [threading.Thread(target=local), threading.Thread(target=remote)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    applied = program.runtime.inbox.apply()
    assert sorted(map(str, results.values())) in (["202", "not_pending"], ["409", "observed"])
    assert len(applied) == (1 if results["remote"] == 202 else 0)
    assert effects() == ["raced"]


def test_a_restarted_program_resumes_the_decided_call_under_the_same_digest(client, service):
    """The program stops, a person approves, the program starts again and runs it once."""
    first = Program(service, holder="billing-agent")
    parked = first.park("after a restart")
    undecided = first.park("never decided")
    first.close()
    assert decide(client, parked, "approve").status_code == 202
    again = Program(service, holder="billing-agent")
    try:
        assert again.runtime.inbox.decisions() == []  # held by no runtime here
        outcome = again.runtime.inbox.resume(parked.invocation_id, again.context())
        assert outcome.kind == "observed"
        assert outcome.invocation_id == parked.invocation_id
        assert effects() == ["after a restart"]
        with pytest.raises(ConfirmationMismatch) as twice:
            again.runtime.inbox.resume(parked.invocation_id, again.context())
        assert twice.value.code == "not_decided"
        with pytest.raises(ConfirmationMismatch) as nobody:
            again.runtime.inbox.resume(undecided.invocation_id, again.context())
        assert nobody.value.code == "not_decided"
        again.recorder.flush()
        ended = again.journal.get_call(parked.invocation_id)
        assert (ended.status, ended.approver) == ("observed", "ana")
        assert ended.digest == parked.request.digest  # the digest the person approved
        assert effects() == ["after a restart"]
    finally:
        again.close()


def edit(client: TestClient, parked: AwaitingConfirmation, text: str, who: str = "ana"):
    return client.post(
        f"/v1/invocations/{parked.invocation_id}/decision",
        json={"digest": parked.request.digest, "decision": "edit", "arguments": text},
        headers=auth(who),
    )


def test_an_edit_through_the_api_is_handed_over_and_the_program_runs_it(client, program):
    """202 handed_over; the program's runtime.inbox runs the corrected call, once, not the shown."""
    parked = program.park("buy milk")
    r = edit(client, parked, json.dumps({"text": "buy oat milk"}))
    assert r.status_code == 202, r.text
    answer = r.json()
    assert (answer["handed_over"], answer["decision"], answer["surface"]) == (
        True,
        "edited",
        "library",
    )
    assert answer["invocation_id"] == parked.invocation_id
    assert effects() == []  # recorded by the service, run by the program
    assert parked.invocation_id not in waiting(client)  # decided: no second decision
    [ran] = program.runtime.inbox.apply()
    assert ran.kind == "observed"
    assert ran.invocation_id != parked.invocation_id
    assert ran.proposal_id == parked.proposal_id  # the model's call id still pairs
    assert effects() == ["buy oat milk"]
    assert program.runtime.inbox.apply() == []  # applied once
    assert effects() == ["buy oat milk"]
    program.recorder.flush()
    shown = program.journal.get_call(parked.invocation_id)
    assert (shown.status, shown.decision, shown.approver) == ("cancelled", "edited", "ana")
    corrected = program.journal.get_call(ran.invocation_id)
    assert (corrected.status, corrected.approver) == ("observed", "ana")
    assert corrected.digest != parked.request.digest
    # R14: the corrected call's trace keeps both digests, who edited and who approved.
    events = program.journal.events(ran.invocation_id)
    [proposal, *_] = [e for e in events if e["kind"] == "proposal"]
    assert proposal["data"]["edited_from"] == {
        "invocation_id": parked.invocation_id,
        "digest": parked.request.digest,
        "editor": "ana",
    }
    [confirmed] = [e["data"]["record"] for e in events if e["kind"] == "confirmation"]
    assert (confirmed["approver"], confirmed["digest"]) == ("ana", corrected.digest)


def test_an_edit_the_programs_gates_refuse_ends_refused_and_nothing_runs(client, program):
    """Parses, so it is handed over; the schema refuses it in the program: nothing runs."""
    parked = program.park("keep me")
    r = edit(client, parked, json.dumps({"text": ""}))  # minLength 1
    assert r.status_code == 202, r.text
    [refused] = program.runtime.inbox.apply()
    assert refused.kind == "rejected"
    assert refused.problem.kind == "validation"
    assert effects() == []  # neither the corrected call nor the shown one
    program.recorder.flush()
    shown = program.journal.get_call(parked.invocation_id)
    assert (shown.status, shown.decision) == ("cancelled", "edited")
    corrected = program.journal.get_call(refused.invocation_id)
    assert corrected.status == "rejected"
    assert corrected.body["response"]["problem"]["code"] == refused.problem.code
    assert program.runtime.pending() == []


def test_a_malformed_edit_is_refused_and_the_call_still_waits(client, program):
    """422 with the parse gate's code, nothing recorded: the call waits, decidable."""
    parked = program.park("malformed")
    r = edit(client, parked, '{"text": "x", "text": "y"}')
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "duplicate_key"
    assert "the call waits" in r.json()["detail"]
    listed = waiting(client)[parked.invocation_id]
    assert (listed["decidable"], listed["decision"]) == (True, None)
    assert program.runtime.inbox.decisions() == []
    assert program.journal.get_call(parked.invocation_id).decision is None


def test_four_eyes_hold_for_an_edit_handed_over(client, program):
    """The corrected call is made for the same subject: its own subject cannot edit it."""
    parked = program.park("mine")
    r = edit(client, parked, json.dumps({"text": "mine, edited"}), who="self")
    assert r.status_code == 403, r.text
    assert r.json()["code"] == "four_eyes"
    assert program.runtime.inbox.decisions() == []
    assert waiting(client)[parked.invocation_id]["decidable"] is True


def test_an_edited_call_is_not_resumed_by_a_restarted_program(client, service):
    """Its approval is of the corrected arguments: resume refuses it, runs nothing."""
    first = Program(service, holder="editing-agent", lease=0.3)
    parked = first.park("edited, then the program died")
    assert edit(client, parked, json.dumps({"text": "corrected"})).status_code == 202
    first.close()
    again = Program(service, holder="editing-agent")
    try:
        with pytest.raises(ConfirmationMismatch) as refused:
            again.runtime.inbox.resume(parked.invocation_id, again.context())
        assert refused.value.code == "not_decided"
        assert "edited" in str(refused.value)
        assert effects() == []
    finally:
        again.close()


def test_the_client_reads_the_surface_and_a_handed_over_decision(client, program):
    """toolbound.client: a listed call's surface and decidable; a decision's handed_over."""
    parked = program.park("read by the client")
    [listed] = [Invocation.of(c) for c in waiting(client).values()]
    assert (listed.surface, listed.decidable) == ("library", True)
    answer = CallAnswer.of(decide(client, parked, "approve").json())
    assert answer.handed_over is True
    assert answer.status == "awaiting_confirmation"


def test_a_living_holder_renews_its_lease_so_its_calls_stay_decidable(client, service):
    """A short lease outlived many times over: renewed while the program runs."""
    program = Program(service, lease=0.3)
    try:
        parked = program.park("still held")
        time.sleep(1.0)
        assert waiting(client)[parked.invocation_id]["decidable"] is True
        assert decide(client, parked, "approve").status_code == 202
        [outcome] = program.runtime.inbox.apply()
        assert outcome.kind == "observed"
    finally:
        program.close()


def test_an_edit_in_the_console_is_handed_over_too(client, program):
    """The edit form is offered for a program's call; posted, it is passed to the program."""
    parked = program.park("console")
    page = client.get("/console/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    r = client.post(
        "/console/login", data={"key": KEYS["ana"], "csrf": csrf}, follow_redirects=False
    )
    assert r.status_code == 303, r.text
    pending = client.get("/console/pending").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', pending).group(1)  # type: ignore[union-attr]
    assert 'value="edit"' in pending
    assert "passed to the process holding the call, which checks and runs them" in pending
    r = client.post(
        f"/console/invocations/{parked.invocation_id}/decision",
        data={
            "csrf": csrf,
            "digest": parked.request.digest,
            "decision": "edit",
            "arguments": json.dumps({"text": "console, edited"}),
        },
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    assert r.headers["location"].endswith(f"/console/invocations/{parked.invocation_id}")
    shown = client.get(r.headers["location"]).text
    assert "passed to the library process holding the call" in shown
    assert effects() == []
    [ran] = program.runtime.inbox.apply()
    assert ran.kind == "observed"
    assert effects() == ["console, edited"]

"""R18 items 8 and 9 together: replicas on one PostgreSQL, killed and restarted under load.

Two tests, both over real ``toolbound serve`` processes and the soak pack, whose
every side effect is a file outside toolbound:

* a kill at **each phase boundary** of a call — before the ledger's intent (the
  target check, also after a person's recorded decision), with the tool started and
  no effect, with the effect made and the tool not returned, and while parked —
  ends in a truthful state that the API lists and an operator can act on;
* a **soak**: three replicas, client threads sending writes, reads and calls that
  park and are decided on another replica, while replicas are SIGKILLed, SIGTERMed
  and restarted at random (seeded) for a bounded time. Then nothing acknowledged was
  lost or changed, nothing ran twice, no call was taken from a live owner, and
  every call settled.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from replicas import Replicas, body, headers, store_url
from soak_pack import effect_counts

LEASE = 2.0
SETTLE = 60.0  # seconds allowed for lease expiry and a sweep, on a loaded machine


@pytest.fixture
def replicas(pg_cluster, pg_conninfo, tmp_path):
    made = Replicas(tmp_path, store_url(pg_cluster, pg_conninfo), count=3, lease=LEASE)
    yield made
    made.close()


def wait_for(what: str, check, timeout: float = SETTLE):
    """Poll ``check`` until it returns something truthy, or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def unfinished(http: httpx.Client) -> list[dict]:
    """Calls a process still works on: running, or decided and not yet ended."""
    calls = http.get("/v1/invocations?limit=1000").json()["invocations"]
    return [
        c
        for c in calls
        if c["status"] == "running"
        or (c["status"] == "awaiting_confirmation" and c["decision"] is not None)
    ]


# -- a kill at each phase boundary ------------------------------------------------------


DIRECT = ("gate-check-c1", "gate-before-b1", "gate-after-a1")  # notes.add, no person
PARKED = ("gate-check-pc", "gate-before-pb", "gate-after-pa", "still-parked")  # notes.send
UNKNOWN = ("gate-before-b1", "gate-after-a1", "gate-before-pb", "gate-after-pa")


def _died_with_the_request(send) -> None:
    # The process answering dies mid-request: no answer ever comes.
    with pytest.raises(httpx.TransportError):
        send()


def _kill_at_the_gates(replicas: Replicas) -> dict[str, dict]:
    """Hold calls at every boundary on replicas 0 and 2, then SIGKILL both; the parked."""
    url_a, url_c = replicas.url_of(0), replicas.url_of(2)
    parked = {}
    with httpx.Client(base_url=url_a, timeout=120) as http:
        for text in PARKED:
            r = http.post(
                "/v1/proposals",
                json=body("notes.send", text),
                headers=headers("agent", f"k-{text}"),
            )
            assert r.status_code == 202, r.text
            parked[text] = r.json()

        def direct(url: str, text: str):
            return lambda: http.post(
                f"{url}/v1/proposals",
                json=body("notes.add", text),
                headers=headers("agent", f"k-{text}"),
            )

        def approve(text: str):
            call = parked[text]
            return lambda: http.post(
                f"/v1/invocations/{call['invocation_id']}/decision",
                json={"digest": call["digest"], "decision": "approve"},
                headers=headers("ana"),
            )

        with ThreadPoolExecutor(8) as pool:
            waiting = [
                pool.submit(_died_with_the_request, direct(url_a, "gate-before-b1")),
                pool.submit(_died_with_the_request, direct(url_a, "gate-after-a1")),
                pool.submit(_died_with_the_request, approve("gate-before-pb")),
                pool.submit(_died_with_the_request, approve("gate-after-pa")),
            ]
            for name in ("b1", "a1", "pb", "pa"):
                wait_for(f"{name} at its gate", (replicas.gates / f"{name}.reached").exists)
            # A target check holds its process's event loop: last on A, and C's alone on C.
            waiting += [
                pool.submit(_died_with_the_request, approve("gate-check-pc")),
                pool.submit(_died_with_the_request, direct(url_c, "gate-check-c1")),
            ]
            for name in ("pc", "c1"):
                wait_for(f"{name} at its gate", (replicas.gates / f"{name}.reached").exists)
            replicas.stop(0, kill=True)
            replicas.stop(2, kill=True)
            for f in waiting:
                f.result(timeout=30)
    # Gates open: a call run again would now make its effect a second time.
    for name in ("b1", "a1", "pb", "pa", "pc", "c1"):
        (replicas.gates / f"{name}.open").touch()
    return parked


def test_a_kill_at_each_phase_boundary_ends_truthfully(replicas):
    """SIGKILL at every boundary: listed, reconcilable, approvals resume once, no double run."""
    for i in range(3):
        replicas.start(i)
    parked = _kill_at_the_gates(replicas)
    url = replicas.url_of(1)
    agent = httpx.Client(base_url=url, headers=headers("agent"), timeout=60)
    ops = httpx.Client(base_url=url, headers=headers("ops"), timeout=60)
    ana = httpx.Client(base_url=url, headers=headers("ana"), timeout=60)
    # Within lease expiry and a sweep, the survivor settles every call the dead held.
    wait_for("the dead replicas' calls to settle", lambda: not unfinished(agent))

    # The keys whose requests died answer now, each with its settled call.
    answers = {}
    for text in DIRECT:
        r = agent.post(
            "/v1/proposals", json=body("notes.add", text), headers={"Idempotency-Key": f"k-{text}"}
        )
        assert r.status_code == 200, (text, r.status_code, r.text)
        assert r.headers["idempotent-replayed"] == "true"
        answers[text] = r.json()
    for text, call in parked.items():
        answers[text] = agent.get(f"/v1/invocations/{call['invocation_id']}").json()

    def status(text: str) -> str:
        return agent.get(f"/v1/invocations/{answers[text]['invocation_id']}").json()["status"]

    # Before the ledger's intent: nothing happened, and the call says so.
    assert answers["gate-check-c1"]["status"] == "interrupted"
    assert answers["gate-check-c1"]["taken_over"]["ledger_phase"] is None
    # Taken over only from a replica that was dead by then.
    for text in DIRECT:
        owner = replicas.life_of(answers[text]["taken_over"]["taken_over_from"])
        assert owner is not None
        assert owner.ended is not None, (text, answers[text], replicas.lives)
    # The tool started: the outcome is unknown, listed for an operator.
    assert answers["gate-before-b1"]["status"] == "outcome_unknown"
    assert answers["gate-after-a1"]["status"] == "outcome_unknown"
    # Approved, killed before it ran: the survivor runs it, once.
    assert status("gate-check-pc") == "observed"
    # Approved, killed with the tool started: unknown, never run a second time.
    assert status("gate-before-pb") == "outcome_unknown"
    assert status("gate-after-pa") == "outcome_unknown"
    assert status("still-parked") == "awaiting_confirmation"

    unknown = {u["invocation_id"] for u in ops.get("/v1/unknown").json()["unknown"]}
    assert unknown == {answers[t]["invocation_id"] for t in UNKNOWN}
    listed = {
        c["invocation_id"]: c["status"]
        for c in agent.get("/v1/invocations?limit=1000").json()["invocations"]
    }
    assert {answers[t]["invocation_id"] for t in answers} <= set(listed)

    # An operator reconciles each unknown: the tool is asked, and its effects agree.
    verdicts = {}
    for text in UNKNOWN:
        r = ops.post(f"/v1/unknown/{answers[text]['invocation_id']}/reconcile", json={})
        assert r.status_code == 200, r.text
        verdicts[text] = r.json()["status"]
    assert verdicts == {
        "gate-before-b1": "failed",
        "gate-after-a1": "committed",
        "gate-before-pb": "failed",
        "gate-after-pa": "committed",
    }
    assert status("gate-after-a1") == "reconciled_committed"
    assert status("gate-before-b1") == "reconciled_not_committed"
    assert ops.get("/v1/unknown").json()["unknown"] == []

    # The call still parked is decided on the survivor and runs once; a decided call
    # takes no second decision.
    call = parked["still-parked"]
    r = ana.post(
        f"/v1/invocations/{call['invocation_id']}/decision",
        json={"digest": call["digest"], "decision": "approve"},
    )
    assert (r.status_code, r.json()["status"]) == (200, "observed")
    again = ana.post(
        f"/v1/invocations/{parked['gate-check-pc']['invocation_id']}/decision",
        json={"digest": parked["gate-check-pc"]["digest"], "decision": "approve"},
    )
    assert again.status_code == 409

    # Every trace starts with the proposal and keeps the parking's events.
    for text, answer in answers.items():
        events = agent.get(f"/v1/invocations/{answer['invocation_id']}/trace").json()["events"]
        assert events[0]["kind"] == "proposal", (text, events[:2])
    assert effect_counts(replicas.effects) == {
        "gate-after-a1": 1,
        "send:gate-check-pc": 1,
        "send:gate-after-pa": 1,
        "send:still-parked": 1,
    }
    for client in (agent, ops, ana):
        client.close()

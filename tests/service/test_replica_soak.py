"""R18 items 8 and 9 together: replicas on one PostgreSQL, killed and restarted under load.

Two tests, both over real ``toolbound serve`` processes and the soak pack, whose
every side effect is a file outside toolbound:

* a kill at **each phase boundary** of a call — before the ledger's intent, with
  the tool started and no effect, with the effect made and the tool not returned,
  and with the commit in the ledger and not yet in the journal, each for a direct
  write and after a person's recorded approval; and while parked — ends in a
  truthful state that the API lists and an operator can act on;
* a **soak**: three replicas, client threads sending writes, reads and calls that
  park and are decided on another replica, while replicas are SIGKILLed, SIGTERMed
  and restarted at random (seeded) for a bounded time. Then nothing acknowledged was
  lost or changed, nothing ran twice, no call was taken from a live owner, and
  every call settled.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from replicas import Replicas, body, headers, store_url
from soak_load import Chaos, Load, Log, Sampler, Sent, send, takeover_of
from soak_pack import effect_counts

LEASE = 2.0
TOOL_DEADLINE = 60.0  # the soak pack's tools' timeout
# Seconds allowed for a dead replica's calls to settle on a loaded machine: a call whose
# tool had started is taken over only once its deadline has passed as well as its
# lease (R9 fencing), then a sweep.
SETTLE = TOOL_DEADLINE + 60.0


@pytest.fixture
def replicas(request, pg_cluster, pg_conninfo, tmp_path):
    """Replicas on the test's own schema: three, or as many as the test's parameter says."""
    count = getattr(request, "param", 3)
    made = Replicas(tmp_path, store_url(pg_cluster, pg_conninfo), count=count, lease=LEASE)
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
    calls = [
        call
        for status in ("running", "awaiting_confirmation")
        for call in http.get(f"/v1/invocations?status={status}&limit=1000").json()["invocations"]
    ]
    return [c for c in calls if c["status"] == "running" or c["decision"] is not None]


# -- a kill at each phase boundary ------------------------------------------------------


DIRECT = ("gate-check-c1", "gate-before-b1", "gate-after-a1", "gate-commit-m1")  # notes.add
PARKED = (  # notes.send, which a person confirms
    "gate-check-pc",
    "gate-before-pb",
    "gate-after-pa",
    "gate-commit-pm",
    "still-parked",
)
GATES = ("b1", "a1", "pb", "pa", "pc", "c1", "m1", "pm")
UNKNOWN = ("gate-before-b1", "gate-after-a1", "gate-before-pb", "gate-after-pa")


def _died_with_the_request(send) -> None:
    # The process answering dies mid-request: no answer ever comes.
    with pytest.raises(httpx.TransportError):
        send()


def _kill_at_the_gates(replicas: Replicas) -> dict[str, dict]:
    """Hold calls at every boundary on all replicas but 1, then SIGKILL them; the parked.

    A gate in the tool holds a worker thread; one in the target check or read-back
    holds its process's event loop, so each replica holds at most one of those, last.
    """
    url_a = replicas.url_of(0)
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

        def direct(i: int, text: str):
            return lambda: http.post(
                f"{replicas.url_of(i)}/v1/proposals",
                json=body("notes.add", text),
                headers=headers("agent", f"k-{text}"),
            )

        def approve(i: int, text: str):
            call = parked[text]
            return lambda: http.post(
                f"{replicas.url_of(i)}/v1/invocations/{call['invocation_id']}/decision",
                json={"digest": call["digest"], "decision": "approve"},
                headers=headers("ana"),
            )

        def hold(sends, names) -> list:
            futures = [pool.submit(_died_with_the_request, send) for send in sends]
            for name in names:
                wait_for(f"{name} at its gate", (replicas.gates / f"{name}.reached").exists)
            return futures

        with ThreadPoolExecutor(len(GATES)) as pool:
            waiting = hold(
                [
                    direct(0, "gate-before-b1"),
                    direct(0, "gate-after-a1"),
                    approve(0, "gate-before-pb"),
                    approve(0, "gate-after-pa"),
                ],
                ("b1", "a1", "pb", "pa"),
            )
            waiting += hold(
                [
                    approve(0, "gate-check-pc"),
                    direct(2, "gate-check-c1"),
                    direct(3, "gate-commit-m1"),
                    approve(4, "gate-commit-pm"),
                ],
                ("pc", "c1", "m1", "pm"),
            )
            for i in (0, 2, 3, 4):
                replicas.stop(i, kill=True)
            for f in waiting:
                f.result(timeout=30)
    # Gates open: a call run again would now make its effect a second time.
    for name in GATES:
        (replicas.gates / f"{name}.open").touch()
    return parked


@pytest.mark.parametrize("replicas", [5], indirect=True, ids=["5 replicas"])
def test_a_kill_at_each_phase_boundary_ends_truthfully(replicas):
    """SIGKILL at every boundary: listed, reconcilable, approvals resume once, no double run."""
    with ThreadPoolExecutor(replicas.count) as pool:
        list(pool.map(replicas.start, range(replicas.count)))
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
    # Committed in the ledger, not yet in the journal: the ledger's result, no re-run.
    assert answers["gate-commit-m1"]["status"] == "observed"
    assert answers["gate-commit-m1"]["result"]["value"] == {"saved": "gate-commit-m1"}
    assert status("gate-commit-pm") == "observed"
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
    verdicts = {
        text: ops.post(f"/v1/unknown/{answers[text]['invocation_id']}/reconcile", json={})
        for text in UNKNOWN
    }
    assert {text: (r.status_code, r.json()["status"]) for text, r in verdicts.items()} == {
        "gate-before-b1": (200, "failed"),
        "gate-after-a1": (200, "committed"),
        "gate-before-pb": (200, "failed"),
        "gate-after-pa": (200, "committed"),
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
        "gate-commit-m1": 1,
        "send:gate-commit-pm": 1,
        "send:gate-check-pc": 1,
        "send:gate-after-pa": 1,
        "send:still-parked": 1,
    }
    for client in (agent, ops, ana):
        client.close()


# -- the soak ---------------------------------------------------------------------------

SOAK_SECONDS = float(os.environ.get("TOOLBOUND_SOAK_SECONDS", "40"))
LONG_SOAK_SECONDS = float(os.environ.get("TOOLBOUND_SOAK_LONG_SECONDS", "600"))
CHECKERS = 4  # threads reading the records back afterwards
SLACK = 1.0  # seconds between a process exiting and this test noting it, on a busy machine
SETTLED = {"observed", "rejected", "interrupted", "reconciled_committed", "failed"}
NO_EFFECT = {"rejected", "interrupted", "reconciled_not_committed", "failed"}


def soak_seed() -> int:
    chosen = os.environ.get("TOOLBOUND_SOAK_SEED")
    return int(chosen) if chosen else random.SystemRandom().randrange(1 << 32)


def test_replicas_killed_and_restarted_under_load_lose_nothing(replicas):
    """Three replicas killed, stopped and restarted at random: nothing acknowledged is lost."""
    soak(replicas, seconds=SOAK_SECONDS, seed=soak_seed())


@pytest.mark.long
def test_a_long_soak(replicas):
    """The same for ten minutes (TOOLBOUND_SOAK_LONG_SECONDS), with -m long."""
    soak(replicas, seconds=LONG_SOAK_SECONDS, seed=soak_seed())


def soak(replicas: Replicas, *, seconds: float, seed: int) -> None:
    # Shown with a failure (and with -s): the seed repeats the run's choices.
    print(f"replica soak: seed {seed}, {seconds:.0f} s (TOOLBOUND_SOAK_SEED={seed} repeats it)")  # noqa: T201
    rng = random.Random(seed)  # noqa: S311 - a test's chaos, reproducible by its seed
    phases = [("start", time.monotonic())]
    with ThreadPoolExecutor(replicas.count) as pool:
        list(pool.map(replicas.start, range(replicas.count)))
    phases.append(("load", time.monotonic()))
    sampler = Sampler(replicas)
    load = Load(replicas, rng)
    chaos = Chaos(replicas, rng, pause=(0.5, 3.0))
    time.sleep(seconds)
    chaos.stop()
    load.stop()
    sampler.stop()
    stopped = time.monotonic()
    assert not chaos.errors, (seed, chaos.errors)
    phases.append(("restart", time.monotonic()))
    with ThreadPoolExecutor(replicas.count) as pool:
        dead = [i for i in range(replicas.count) if i not in replicas.alive()]
        list(pool.map(replicas.start, dead))
    phases.append(("settle", time.monotonic()))
    log = load.log
    print(  # noqa: T201 - what the run did, beside its seed
        f"replica soak: {len(log.acknowledged)} answered, {len(log.unanswered)} unanswered,"
        f" {len(chaos.events)} kills/stops/starts: "
        + ", ".join(f"{e.action} {e.replica}" for e in chaos.events)
    )
    assert len(log.acknowledged) > 20, "the load should have produced answers"
    assert log.refused == [], (seed, log.refused)
    url = replicas.url_of(0)
    with (
        httpx.Client(base_url=url, headers=headers("agent"), timeout=60) as agent,
        httpx.Client(base_url=url, headers=headers("ops"), timeout=60) as ops,
    ):
        wait_for("every call to settle", lambda: not unfinished(agent))
        # A key claimed by a process killed before it recorded its call is free a lease on.
        time.sleep(max(0.0, stopped + LEASE - time.monotonic()))
        calls = _send_again(url, log, seed)
        wait_for("every re-sent call to settle", lambda: not unfinished(agent))
        reconciled = _reconcile(ops, seed)
        phases.append(("check", time.monotonic()))
        for sent, _, answer in log.acknowledged:
            calls.setdefault(sent.text, answer["invocation_id"])
        _acknowledged_records_stand(url, agent, log, seed)
        with ThreadPoolExecutor(CHECKERS) as pool:
            details = pool.map(lambda i: agent.get(f"/v1/invocations/{i}").json(), calls.values())
            stored = dict(zip(calls, details, strict=True))
        _each_effect_once_and_as_recorded(replicas, log, stored, seed)
        taken = _traces_open_and_nothing_taken_from_a_live_owner(
            replicas, agent, sampler, stored, seed
        )
    phases.append(("end", time.monotonic()))
    statuses = Counter(call["status"] for call in stored.values())
    print(  # noqa: T201 - what the run came to, and where the time went
        f"replica soak: {taken} taken over, {reconciled} unknown reconciled;"
        f" {dict(sorted(statuses.items()))}; "
        + ", ".join(f"{a} {t2 - t1:.1f} s" for (a, t1), (_, t2) in itertools.pairwise(phases))
    )


def _send_again(url: str, log: Log, seed: int) -> dict[str, str]:
    """Send every unanswered request again, under its key; each answers, none 409."""

    def again(sent: Sent) -> tuple[str, str]:
        r = send(url, sent)
        assert r is not None, (seed, sent)
        assert r.status_code in (200, 202), (seed, sent, r.status_code, r.text)
        return sent.text, r.json()["invocation_id"]

    with ThreadPoolExecutor(CHECKERS) as pool:
        calls = dict(pool.map(again, [s for s in log.unanswered if s.kind != "decision"]))
    # A decision that got no answer may not have been recorded: the person tries again.
    for sent in (s for s in log.unanswered if s.kind == "decision"):
        call = httpx.get(
            f"{url}/v1/invocations/{sent.invocation_id}", headers=headers("agent"), timeout=60
        ).json()
        if call["status"] == "awaiting_confirmation" and call["decision"] is None:
            log.answer(sent, send(url, sent))
    return calls


def _reconcile(ops: httpx.Client, seed: int) -> int:
    """An operator asks the tool about every unknown outcome; none is left. How many."""
    unknown = ops.get("/v1/unknown").json()["unknown"]
    for record in unknown:
        r = ops.post(f"/v1/unknown/{record['invocation_id']}/reconcile", json={})
        assert r.status_code == 200, (seed, r.text)
        assert r.json()["status"] in {"committed", "failed"}, (seed, r.text)
    assert ops.get("/v1/unknown").json()["unknown"] == []
    return len(unknown)


def _acknowledged_records_stand(url: str, agent: httpx.Client, log: Log, seed: int) -> None:
    """Every answer given is still the call's record, and its key replays it."""

    def check(item: tuple[Sent, int, dict]) -> None:
        sent, code, answer = item
        call_id = answer["invocation_id"]
        stored = agent.get(f"/v1/invocations/{call_id}").json()
        where = (seed, sent, answer, stored)
        if sent.kind == "park":
            assert stored["confirmation"]["digest"] == answer["digest"], where
        else:
            assert stored["response"] == answer, where
            reconciled = answer["status"] == "outcome_unknown" and stored["status"].startswith(
                "reconciled_"
            )
            assert stored["status"] == answer["status"] or reconciled, where
        if sent.kind != "decision":
            again = send(url, sent)
            assert again is not None, where
            assert (again.status_code, again.json()) == (code, answer), where
            assert again.headers["idempotent-replayed"] == "true", where

    with ThreadPoolExecutor(CHECKERS) as pool:
        list(pool.map(check, log.acknowledged))


def _each_effect_once_and_as_recorded(
    replicas: Replicas, log: Log, stored: dict[str, dict], seed: int
) -> None:
    """No effect happened twice, and each write's record says whether it happened."""
    effects = effect_counts(replicas.effects)
    assert {t: n for t, n in effects.items() if n != 1} == {}, (seed, "ran twice")
    kinds = {sent.text: sent.kind for sent, _, _ in log.acknowledged}
    kinds |= {sent.text: sent.kind for sent in log.unanswered if sent.kind != "decision"}
    for text, call in stored.items():
        if kinds.get(text) not in ("write", "park"):
            continue
        happened = effects.get(text if kinds[text] == "write" else f"send:{text}", 0)
        status = call["status"]
        where = (seed, text, happened, call)
        assert status in SETTLED | NO_EFFECT | {"awaiting_confirmation"}, where
        if status in {"observed", "reconciled_committed"}:
            assert happened == 1, where
        else:
            assert happened == 0, where
    known = {t if k == "write" else f"send:{t}" for t, k in kinds.items()}
    assert set(effects) <= known, (seed, set(effects) - known)


def _traces_open_and_nothing_taken_from_a_live_owner(
    replicas: Replicas,
    agent: httpx.Client,
    sampler: Sampler,
    stored: dict[str, dict],
    seed: int,
) -> int:
    """Traces open with the proposal; a call was taken over only after its owner exited."""

    def check(call: dict) -> bool:
        events = agent.get(f"/v1/invocations/{call['invocation_id']}/trace").json()["events"]
        # R14: every trace opens with the proposal, also one whose owner died mid-call.
        assert events[0]["kind"] == "proposal", (seed, call, events[:1])
        takeover = takeover_of(events)
        if takeover is None:
            return False
        owner, at = takeover
        life = replicas.life_of(owner)
        where = (seed, call["invocation_id"], call["tool"], call["status"], owner, at, life)
        assert life is not None, where
        assert life.ended is not None, where
        assert life.ended <= at + SLACK, where
        seen = sampler.seen.get(call["invocation_id"])
        assert seen is None or life.ended <= seen + SLACK, (*where, seen)
        return True

    with ThreadPoolExecutor(CHECKERS) as pool:
        return sum(pool.map(check, stored.values()))

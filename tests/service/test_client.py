"""toolbound.client against a real ``toolbound serve``: agents in other processes (R18, R7, R8)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading

import httpx
import pytest
from servers import Server, free_port
from service_config import KEYS, config_text
from service_pack import EFFECTS_ENV

from toolbound.client import (
    AsyncClient,
    CallAnswer,
    Client,
    ServiceError,
    ServiceUnreachableError,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("client")
    config = root / "toolbound.toml"
    config.write_text(config_text("sqlite:///toolbound.db"))
    effects = root / "effects.txt"
    running = Server(config, {EFFECTS_ENV: str(effects)}).start()
    running.effects = effects  # type: ignore[attr-defined]
    yield running
    running.stop()


def effects(server) -> list[str]:
    path = server.effects
    return path.read_text().splitlines() if path.exists() else []


def client(server, who: str = "agent", **kw) -> Client:
    return Client(server.url, api_key=KEYS[who], **kw)


# A person in another process: finds the call in the tenant's inbox and decides it.
_DECIDER = textwrap.dedent(
    """
    import sys, time
    from toolbound.client import Client

    url, key, invocation_id = sys.argv[1:4]
    with Client(url, api_key=key) as tb:
        for _ in range(200):
            waiting = [c for c in tb.pending() if c.invocation_id == invocation_id]
            if waiting:
                break
            time.sleep(0.05)
        (call,) = waiting
        time.sleep(0.5)  # the agent is waiting by now
        tb.decide(invocation_id, digest=call.digest, approve=True)
    """
)


def test_an_agent_waits_for_a_decision_made_by_another_process(server):
    """Parked → another process approves by digest → the agent's wait returns the result."""
    with client(server) as agent:
        parked = agent.submit("notes.add", '{"text": "from afar"}', call_id="far-1")
        assert parked.status == "awaiting_confirmation"
        assert parked.confirmation is not None
        assert parked.confirmation["digest"] == parked.digest
        decider = subprocess.Popen(  # noqa: S603 - our own interpreter and script
            [sys.executable, "-c", _DECIDER, server.url, KEYS["ana"], parked.invocation_id],
            env=os.environ.copy(),
        )
        try:
            done = agent.wait(parked.invocation_id, timeout=30)
        finally:
            assert decider.wait(30) == 0

    assert done.settled
    assert done.decision == "approved"
    assert done.approver == "ana"
    assert done.answer is not None
    assert done.answer.status == "observed"
    assert json.loads(done.answer.message)["data"] == {"saved": "from afar"}
    assert effects(server).count("from afar") == 1


def test_a_repeated_submission_is_answered_once(server):
    """R8: the same Idempotency-Key twice → one run; the second answer says it is a replay."""
    with client(server) as agent:
        first = agent.submit("notes.shout", {"text": "once"}, call_id="c", idempotency_key="k-1")
        again = agent.submit("notes.shout", {"text": "once"}, call_id="c", idempotency_key="k-1")
    assert (first.replayed, again.replayed) == (False, True)
    assert again.invocation_id == first.invocation_id
    assert first.status == "observed"


def test_the_model_s_text_is_sent_byte_for_byte(server):
    """R3: text arguments reach the strict parser as written: a duplicate key is rejected."""
    with client(server) as agent:
        answer = agent.submit("notes.shout", '{"text": "a", "text": "b"}', call_id="dup")
    assert answer.status == "rejected"
    assert answer.problem is not None
    assert answer.problem["code"] == "duplicate_key"
    assert answer.is_error


def test_refusals_are_typed_errors_with_the_problem_s_code(server):
    """401, 403 and 409 raise ServiceError carrying the problem document's code."""
    stranger = Client(server.url, api_key="nobody-has-this-key")
    with stranger, pytest.raises(ServiceError) as unauthenticated:
        stranger.pending()
    assert unauthenticated.value.status == 401
    assert not unauthenticated.value.recoverable

    with client(server) as agent, client(server, "ana") as ana:
        parked = agent.submit("notes.add", {"text": "checked"}, call_id="chk")
        with pytest.raises(ServiceError) as forbidden:
            agent.decide(parked.invocation_id, digest=str(parked.digest), approve=True)
        with pytest.raises(ServiceError) as mismatch:
            ana.decide(parked.invocation_id, digest="sha256:" + "0" * 64, approve=True)
        assert ana.pending()[-1].invocation_id == parked.invocation_id  # still parked
    assert forbidden.value.status == 403
    assert mismatch.value.code == "digest_mismatch"
    assert mismatch.value.problem["status"] == 409


def test_the_async_client_denies_with_a_reason_and_reads_the_trace(server):
    """AsyncClient: deny with a reason → the model is told it; the trace holds the decision."""

    async def scenario() -> tuple[CallAnswer, list[str]]:
        async with (
            AsyncClient(server.url, api_key=KEYS["agent"]) as agent,
            AsyncClient(server.url, api_key=KEYS["ana"]) as ana,
        ):
            parked = await agent.submit("notes.add", {"text": "no thanks"}, call_id="deny-1")
            denied = await ana.decide(
                parked.invocation_id,
                digest=str(parked.digest),
                approve=False,
                reason="not today",
            )
            settled = await agent.wait(parked.invocation_id, timeout=10)
            assert settled.settled
            events = await agent.trace(parked.invocation_id)
            return denied, [str(e.get("kind", e.get("type", ""))) for e in events]

    denied, kinds = asyncio.run(scenario())
    assert denied.status == "rejected"
    assert denied.problem is not None
    assert denied.problem["code"] == "denied_by_person"
    assert "not today" in denied.message
    assert kinds
    assert "no thanks" not in effects(server)


def test_an_edit_runs_the_corrected_arguments_in_the_parked_call_s_place(server):
    """R7: the approver corrects the arguments; the new call runs once, the shown one never."""
    with client(server) as agent, client(server, "ana") as ana:
        parked = agent.submit("notes.add", {"text": "buy milk"}, call_id="edit-1")
        done = ana.edit(
            parked.invocation_id, digest=str(parked.digest), arguments='{"text": "buy oat milk"}'
        )
        shown = ana.invocation(parked.invocation_id)
        with pytest.raises(ServiceError) as again:
            ana.edit(parked.invocation_id, digest=str(parked.digest), arguments={"text": "x"})
    assert done.status == "observed"
    assert done.invocation_id != parked.invocation_id
    assert done.digest != parked.digest
    assert json.loads(done.message)["data"] == {"saved": "buy oat milk"}
    assert (shown.status, shown.decision, shown.approver) == ("cancelled", "edited", "ana")
    assert again.value.code == "not_pending"
    assert effects(server).count("buy oat milk") == 1
    assert "buy milk" not in effects(server)


def test_the_async_client_edits_with_an_object_and_a_refused_edit_is_typed(server):
    """AsyncClient.edit: an object is sent as its JSON text; an agent may not edit (403)."""

    async def scenario() -> tuple[CallAnswer, ServiceError]:
        async with (
            AsyncClient(server.url, api_key=KEYS["agent"]) as agent,
            AsyncClient(server.url, api_key=KEYS["ana"]) as ana,
        ):
            parked = await agent.submit("notes.add", {"text": "draft"}, call_id="edit-2")
            try:
                await agent.edit(parked.invocation_id, digest=str(parked.digest), arguments={})
            except ServiceError as exc:
                refused = exc
            else:  # pragma: no cover - the assertion below reports it
                pytest.fail("an agent's edit was accepted")
            done = await ana.edit(
                parked.invocation_id, digest=str(parked.digest), arguments={"text": "final"}
            )
            return done, refused

    done, refused = asyncio.run(scenario())
    assert refused.status == 403
    assert done.status == "observed"
    assert effects(server).count("final") == 1
    assert "draft" not in effects(server)


def test_wait_gives_up_after_its_timeout(server):
    """A call nobody decides: wait raises TimeoutError once its time is up."""
    with client(server) as agent:
        parked = agent.submit("notes.add", {"text": "undecided"}, call_id="later")
        with pytest.raises(TimeoutError):
            agent.wait(parked.invocation_id, timeout=0.3)


def test_a_service_that_is_not_there_is_reported_after_the_retries():
    """Nothing listens: the connection is retried, then ServiceUnreachableError (recoverable)."""
    url = f"http://127.0.0.1:{free_port()}"
    tb = Client(url, api_key="k", retries=2, backoff=0.01)
    with tb, pytest.raises(ServiceUnreachableError) as unreachable:
        tb.submit("notes.add", {"text": "x"}, call_id="c")
    assert unreachable.value.recoverable
    assert unreachable.value.code == "service_unreachable"


class _Busy:
    """A service that answers 503 (Retry-After: 0) ``times`` times, then 200; it keeps keys."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.keys: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.keys.append(request.headers.get("idempotency-key"))
        if len(self.keys) <= self.times:
            problem = {"status": 503, "code": "store_unavailable", "detail": "try again"}
            return httpx.Response(503, json=problem, headers={"Retry-After": "0"})
        body = {
            "invocation_id": "inv-1",
            "status": "observed",
            "state": "observed",
            "digest": None,
            "message": {"content": "{}", "is_error": False, "truncated": False},
        }
        return httpx.Response(200, json=body)


def test_a_submission_retried_after_503_keeps_its_idempotency_key():
    """Retries keep the Idempotency-Key, so the service can run the call once."""
    busy = _Busy(times=2)
    transport = httpx.MockTransport(busy)
    with Client("http://toolbound.test", api_key="k", transport=transport, backoff=0) as tb:
        answer = tb.submit("notes.add", {"text": "x"}, call_id="c")
    assert answer.status == "observed"
    assert len(busy.keys) == 3
    assert len(set(busy.keys)) == 1
    assert busy.keys[0] is not None


def test_a_503_past_the_retries_is_a_recoverable_error():
    """Still 503 after every retry: ServiceError with the service's code, recoverable."""
    transport = httpx.MockTransport(_Busy(times=10))
    tb = Client("http://toolbound.test", api_key="k", transport=transport, retries=1)
    with tb, pytest.raises(ServiceError) as busy:
        tb.submit("notes.add", {"text": "x"}, call_id="c")
    assert busy.value.status == 503
    assert busy.value.code == "store_unavailable"
    assert busy.value.recoverable


class Counting(httpx.HTTPTransport):
    """The real transport, counting the requests it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(f"{request.method} {request.url.path}")
        return super().handle_request(request)


def test_waiting_holds_one_request_instead_of_polling(server):
    """Waiting, the service holds the one request until the decision: one read, not many."""
    counting = Counting()
    with client(server, transport=counting) as agent, client(server, "ana") as ana:
        parked = agent.submit("notes.add", {"text": "held"}, call_id="held")
        deciding = threading.Timer(
            1.0,
            lambda: ana.decide(parked.invocation_id, digest=str(parked.digest), approve=True),
        )
        deciding.start()
        done = agent.wait(parked.invocation_id, timeout=20)
        deciding.join()
    assert done.status == "observed"
    reads = [s for s in counting.sent if s.startswith("GET")]
    assert reads == [f"GET /v1/invocations/{parked.invocation_id}"]

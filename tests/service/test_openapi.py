"""R18: the OpenAPI document is the API — the same routes, statuses, media types and shapes.

Three holds on ``GET /openapi.json``: the routes and methods of the app are exactly the
document's operations; every status the document names for an operation is one the API
really answers (a probe per status); and schemathesis, run in-process against the ASGI
app with a fixed seed and a small budget, finds no server error and no answer that
contradicts the document.
"""

from __future__ import annotations

import uuid

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.generation.modes import GenerationMode
from service_config import KEYS, config_text
from starlette.routing import Route
from starlette.testclient import TestClient

from toolbound import Proposal, Subject
from toolbound.config import parse_config
from toolbound.ledger.store import LedgerError
from toolbound.pipeline.call import CallContext
from toolbound.pipeline.runtime import Runtime
from toolbound.recording import JournalRecorder
from toolbound.service.api import create_app
from toolbound.service.core import Service, fingerprint
from toolbound.service.openapi import METRICS_TYPE, OPENAPI
from toolbound.wiring import journal_for, policy_for

CONSOLE = "/console"
EXAMPLES = 15  # per operation and mode: the whole run stays well under 30 seconds
LIMIT = 65_536  # [service] max_body_bytes here, so a 413 is cheap to provoke


@pytest.fixture
def service(tmp_path, effects_path):
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db", extra=f"max_body_bytes = {LIMIT}\n"))
    opened = Service(parse_config(path.read_text(), source=path))
    yield opened
    opened.close()


@pytest.fixture
def app(service):
    return create_app(service)


class _GoneLedger:
    """A ledger whose database does not answer."""

    def find(self, _invocation_id: str) -> None:
        msg = "connection refused"
        raise LedgerError(msg, code="storage_unavailable")


def documented() -> set[tuple[str, str, int]]:
    return {
        (method.upper(), path, int(status))
        for path, item in OPENAPI["paths"].items()
        for method, operation in item.items()
        for status in operation["responses"]
    }


def test_the_document_has_every_route_of_the_app_and_nothing_else(app):
    """Each (method, path) the API routes is an operation of the document, and vice versa.

    The console's pages are HTML for browsers (docs/console.md), not part of the API,
    and ``/`` only sends a browser there; HEAD comes with every GET.
    """
    routed = {
        (method, route.path)
        for route in app.routes
        if isinstance(route, Route) and route.path != "/" and not route.path.startswith(CONSOLE)
        for method in route.methods or ()
        if method != "HEAD"
    }
    described = {(method, path) for method, path, _ in documented()}
    assert routed == described


def test_every_documented_status_is_one_the_api_answers(service, app):
    """A probe per documented (method, path, status) gets that status, in its media type."""
    ids: dict[str, str] = {}

    def key(who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {KEYS[who]}"}

    def propose(who: str, text: str, *, tool: str = "notes.add", idem: str | None = None):
        body = {"tool": tool, "arguments": f'{{"text": "{text}"}}', "call_id": text}
        headers = {**key(who), "Idempotency-Key": idem or uuid.uuid4().hex}
        return client.post("/v1/proposals", json=body, headers=headers)

    def parked(text: str) -> dict:
        r = propose("agent", text)
        assert r.status_code == 202, r.text
        return r.json()

    def decide(who: str, name: str, decision: str = "approve", **kw):
        call = ids.get(name, {"invocation_id": "nope", "digest": "d"})
        body = {"digest": call["digest"], "decision": decision}
        return client.post(
            f"/v1/invocations/{call['invocation_id']}/decision", json=body, headers=key(who), **kw
        )

    def reconcile(who: str, invocation_id: str, **kw):
        return client.post(f"/v1/unknown/{invocation_id}/reconcile", headers=key(who), **kw)

    def unready(client):
        # The ledger gone for the length of one request.
        ledger, service.ledger = service.ledger, _GoneLedger()
        try:
            return client.get("/readyz")
        finally:
            service.ledger = ledger

    finding = {"committed": True, "evidence": {"checked": "the notes file"}}
    big = b"x" * (LIMIT + 1)
    busy, busy_body = uuid.uuid4().hex, b'{"tool": "notes.add", "arguments": "{}", "call_id": "b"}'
    probes = {
        ("GET", "/healthz", 200): lambda: client.get("/healthz"),
        ("GET", "/openapi.json", 200): lambda: client.get("/openapi.json"),
        ("GET", "/readyz", 200): lambda: client.get("/readyz"),
        ("GET", "/readyz", 503): lambda: unready(client),
        ("POST", "/v1/proposals", 200): lambda: propose("agent", "hi", tool="notes.shout"),
        ("POST", "/v1/proposals", 202): lambda: propose("agent", "buy milk"),
        ("POST", "/v1/proposals", 400): lambda: propose("agent", "x", idem="\u00e9".encode()),
        ("POST", "/v1/proposals", 401): lambda: client.post("/v1/proposals", json={}),
        ("POST", "/v1/proposals", 403): lambda: propose("ana", "not an agent"),
        ("POST", "/v1/proposals", 409): lambda: client.post(
            "/v1/proposals", content=busy_body, headers={**key("agent"), "Idempotency-Key": busy}
        ),
        ("POST", "/v1/proposals", 413): lambda: client.post(
            "/v1/proposals", content=big, headers={**key("agent"), "Idempotency-Key": "big"}
        ),
        ("POST", "/v1/proposals", 422): lambda: propose("agent", "other", idem="used"),
        ("GET", "/v1/invocations", 200): lambda: client.get("/v1/invocations", headers=key("ana")),
        ("GET", "/v1/invocations", 400): lambda: client.get(
            "/v1/invocations?limit=many", headers=key("ana")
        ),
        ("GET", "/v1/invocations", 401): lambda: client.get("/v1/invocations"),
        ("GET", "/v1/invocations/{invocation_id}", 200): lambda: client.get(
            f"/v1/invocations/{ids['parked']['invocation_id']}", headers=key("ana")
        ),
        ("GET", "/v1/invocations/{invocation_id}", 400): lambda: client.get(
            f"/v1/invocations/{ids['parked']['invocation_id']}?wait=forever", headers=key("ana")
        ),
        ("GET", "/v1/invocations/{invocation_id}", 401): lambda: client.get("/v1/invocations/x"),
        ("GET", "/v1/events", 200): lambda: client.get(
            "/v1/events?timeout=0.2", headers=key("ana")
        ),
        ("GET", "/v1/events", 400): lambda: client.get("/v1/events?after=now", headers=key("ana")),
        ("GET", "/v1/events", 401): lambda: client.get("/v1/events"),
        ("GET", "/v1/webhooks/deliveries", 200): lambda: client.get(
            "/v1/webhooks/deliveries", headers=key("ops")
        ),
        ("GET", "/v1/webhooks/deliveries", 401): lambda: client.get("/v1/webhooks/deliveries"),
        ("GET", "/v1/webhooks/deliveries", 403): lambda: client.get(
            "/v1/webhooks/deliveries", headers=key("agent")
        ),
        ("GET", "/v1/invocations/{invocation_id}", 404): lambda: client.get(
            "/v1/invocations/nope", headers=key("ana")
        ),
        ("GET", "/v1/invocations/{invocation_id}/trace", 200): lambda: client.get(
            f"/v1/invocations/{ids['parked']['invocation_id']}/trace", headers=key("ana")
        ),
        ("GET", "/v1/invocations/{invocation_id}/trace", 401): lambda: client.get(
            "/v1/invocations/x/trace"
        ),
        ("GET", "/v1/invocations/{invocation_id}/trace", 404): lambda: client.get(
            "/v1/invocations/nope/trace", headers=key("ana")
        ),
        ("GET", "/v1/confirmations", 200): lambda: client.get(
            "/v1/confirmations", headers=key("ana")
        ),
        ("GET", "/v1/confirmations", 401): lambda: client.get("/v1/confirmations"),
        ("POST", "/v1/invocations/{invocation_id}/decision", 400): lambda: decide(
            "ana", "parked", "maybe"
        ),
        ("POST", "/v1/invocations/{invocation_id}/decision", 401): lambda: client.post(
            "/v1/invocations/x/decision", json={}
        ),
        ("POST", "/v1/invocations/{invocation_id}/decision", 403): lambda: decide(
            "agent", "parked"
        ),
        ("POST", "/v1/invocations/{invocation_id}/decision", 404): lambda: decide("ana", "none"),
        ("POST", "/v1/invocations/{invocation_id}/decision", 413): lambda: client.post(
            "/v1/invocations/x/decision", content=big, headers=key("ana")
        ),
        ("POST", "/v1/invocations/{invocation_id}/decision", 200): lambda: decide("ana", "parked"),
        ("POST", "/v1/invocations/{invocation_id}/decision", 409): lambda: decide("ana", "parked"),
        ("POST", "/v1/invocations/{invocation_id}/decision", 202): lambda: decide("ana", "held"),
        ("POST", "/v1/invocations/{invocation_id}/decision", 422): lambda: client.post(
            f"/v1/invocations/{ids['parked']['invocation_id']}/decision",
            json={"digest": "d", "decision": "edit", "arguments": '{"a": 1, "a": 2}'},
            headers=key("ana"),
        ),
        ("GET", "/metrics", 200): lambda: client.get("/metrics", headers=key("ops")),
        ("GET", "/metrics", 401): lambda: client.get("/metrics"),
        ("GET", "/metrics", 403): lambda: client.get("/metrics", headers=key("agent")),
        ("GET", "/v1/unknown", 200): lambda: client.get("/v1/unknown", headers=key("ops")),
        ("GET", "/v1/unknown", 401): lambda: client.get("/v1/unknown"),
        ("POST", "/v1/unknown/{invocation_id}/reconcile", 400): lambda: reconcile(
            "ops", ids["lost"], json={"committed": "yes"}
        ),
        ("POST", "/v1/unknown/{invocation_id}/reconcile", 401): lambda: client.post(
            "/v1/unknown/x/reconcile"
        ),
        ("POST", "/v1/unknown/{invocation_id}/reconcile", 403): lambda: reconcile(
            "agent", ids["lost"]
        ),
        ("POST", "/v1/unknown/{invocation_id}/reconcile", 404): lambda: reconcile("ops", "nope"),
        ("POST", "/v1/unknown/{invocation_id}/reconcile", 413): lambda: reconcile(
            "ops", "x", content=big
        ),
        ("POST", "/v1/unknown/{invocation_id}/reconcile", 200): lambda: reconcile(
            "ops", ids["lost"], json=finding
        ),
        ("POST", "/v1/unknown/{invocation_id}/reconcile", 409): lambda: reconcile(
            "ops", ids["lost"], json=finding
        ),
    }
    assert set(probes) == documented()

    with TestClient(app) as client:
        ids["parked"] = parked("to decide")
        ids["held"] = held_by_a_program(service, "held elsewhere")
        lost = parked("lost in transit")
        ids["lost_call"] = lost
        assert decide("ana", "lost_call").json()["status"] == "outcome_unknown"
        ids["lost"] = lost["invocation_id"]
        propose("agent", "first", idem="used")
        journal, now = service.journal, service.clock.now()
        # Another process holds this key, for this very body: still running.
        journal.claim_request("acme", busy, fingerprint(busy_body), now=now, stale_after=300)
        for (method, path, status), probe in probes.items():
            r = probe()
            assert r.status_code == status, (method, path, r.text)
            assert r.headers["content-type"] == media_of(path, status), (method, path, status)


def held_by_a_program(service: Service, text: str) -> dict[str, str]:
    """A call a library program on the same store parked (and holds): its id and digest."""
    journal = journal_for(service.config.store_url)
    recorder = JournalRecorder(journal, surface="library")
    runtime = Runtime(policy=policy_for(service.config, service.clock), sinks=(recorder,))
    context = CallContext(
        subject=Subject(id="agent-1", tenant="acme"), tools=service.registry.toolset()
    )
    arguments = f'{{"text": "{text}"}}'.encode()
    outcome = runtime.run(
        Proposal(name="notes.add", arguments=arguments, proposal_id="held"), context
    )
    recorder.flush()
    assert outcome.kind == "awaiting_confirmation"
    # The program goes on holding it (the lease outlives the test); nothing more runs.
    runtime.close()
    recorder.close()
    journal.close()
    return {"invocation_id": outcome.invocation_id, "digest": outcome.request.digest}


def media_of(path: str, status: int) -> str:
    """The media type a documented answer comes in."""
    if path == "/readyz":
        return "application/json"  # the readiness report, whatever it says
    if status >= 400:
        return "application/problem+json"
    if path == "/metrics":
        return METRICS_TYPE
    if path == "/v1/events":
        return "text/event-stream; charset=utf-8"
    return "application/json"


# Every operation with valid data; those that take input with invalid data too.
RUNS = [
    (path, method, mode)
    for path, item in OPENAPI["paths"].items()
    for method, operation in item.items()
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode is GenerationMode.POSITIVE or "parameters" in operation or "requestBody" in operation
    # A stream stays open as long as asked (up to an hour): its statuses are probed above.
    if path != "/v1/events"
]


@pytest.mark.parametrize(("path", "method", "mode"), RUNS)
def test_schemathesis_finds_no_server_error_and_no_contradiction(app, path, method, mode):
    """Generated requests, valid and not: never a 5xx, every answer as documented."""
    operation = schemathesis.openapi.from_asgi("/openapi.json", app)[path][method.upper()]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case) -> None:
        key = (case.headers or {}).get("Idempotency-Key")
        if mode is GenerationMode.POSITIVE and isinstance(key, str):
            # A generated key comes back with other generated bodies, and the API rightly
            # answers 422 (probed below); here each request gets a key of its own.
            case.headers["Idempotency-Key"] = f"{key[:200]}-{uuid.uuid4().hex}"
        case.call_and_validate(headers={"Authorization": f"Bearer {KEYS['eve']}"})

    check()


def test_the_front_door_sends_a_browser_to_the_console(app):
    """GET / redirects to the console's sign-in, not a 404."""
    with TestClient(app) as client:
        answer = client.get("/", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console"

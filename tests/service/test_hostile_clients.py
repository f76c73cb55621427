"""R18 against careless and hostile clients: every refusal is a problem document, never a 500.

Each test here answered wrongly once: a 500 for a deep or oddly typed body, a body read
whole before it was refused, any string taken as an Idempotency-Key, a replayed refusal
or a routing error in another media type, a confirmation lifetime fixed in code.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from service_config import KEYS, config_text
from starlette.testclient import TestClient

from toolbound.config import ConfigError, parse_config
from toolbound.service.api import create_app
from toolbound.service.core import Service

PROBLEM = "application/problem+json"
DEEP = b'{"digest": "d", "decision": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def make_client(tmp_path, extra: str = ""):
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db", extra=extra))
    service = Service(parse_config(path.read_text(), source=path))
    return service, TestClient(create_app(service), raise_server_exceptions=False)


@pytest.fixture
def service_and_client(tmp_path, effects_path):
    service, client = make_client(tmp_path)
    with client:
        yield service, client
    service.close()


@pytest.fixture
def client(service_and_client):
    return service_and_client[1]


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def propose(client, key: str, *, text: str = "x", tool: str = "notes.add", **headers):
    body = {"tool": tool, "arguments": f'{{"text": "{text}"}}', "call_id": "c"}
    return client.post(
        "/v1/proposals", json=body, headers={**auth("agent"), "Idempotency-Key": key, **headers}
    )


def assert_problem(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert (body["status"], body["code"]) == (status, code)
    return body


# -- request bodies ---------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/invocations/x/decision", "/v1/unknown/x/reconcile"])
def test_a_body_nested_100000_deep_is_a_400_problem(client, path):
    """JSON nested past the parser's depth limit is refused as bad_request_body, not a 500."""
    r = client.post(path, content=DEEP, headers=auth("ops"))
    assert "deeper" in assert_problem(r, 400, "bad_request_body")["detail"]


@pytest.mark.parametrize("decision", [{"a": 1}, ["approve"], 1, None])
def test_a_decision_of_the_wrong_type_is_a_400_problem(client, decision):
    """A decision that is an object, array, number or null is refused, not a 500."""
    r = client.post(
        "/v1/invocations/x/decision",
        json={"digest": "d", "decision": decision},
        headers=auth("ana"),
    )
    assert_problem(r, 400, "bad_request_body")


def test_a_duplicate_member_in_a_decision_is_refused(client):
    """Decision bodies are read as strictly as proposals: a repeated key is a 400."""
    body = b'{"digest": "d", "decision": "deny", "decision": "approve"}'
    r = client.post("/v1/invocations/x/decision", content=body, headers=auth("ana"))
    assert_problem(r, 400, "bad_request_body")


def test_a_declared_body_over_the_limit_is_413_before_it_is_read(client):
    """Content-Length over [service] max_body_bytes: 413 at once, whoever sends it."""
    big = b"x" * (4 * 1024 * 1024 + 1)
    for headers in ({}, auth("agent")):
        r = client.post("/v1/proposals", content=big, headers={**headers, "Idempotency-Key": "k"})
        assert_problem(r, 413, "request_too_large")


def test_a_streamed_body_over_the_limit_is_413(tmp_path, effects_path):
    """A chunked body with no Content-Length is counted as it arrives and refused at the limit."""
    service, client = make_client(tmp_path, "max_body_bytes = 1000\n")
    pulled: list[int] = []

    def chunks():
        for _ in range(10_000):
            pulled.append(1)
            yield b"x" * 100

    with client:
        r = client.post(
            "/v1/proposals", content=chunks(), headers={**auth("agent"), "Idempotency-Key": "k"}
        )
        assert_problem(r, 413, "request_too_large")
        assert "1000 bytes" in r.json()["detail"]
        small = propose(client, "k2", tool="notes.shout")
        assert small.status_code == 200, "bodies within the limit are unaffected"
    service.close()


def test_the_body_limit_is_configured_in_toml(tmp_path, effects_path):
    """[service] max_body_bytes reaches the app: a proposal over it is 413, under it runs."""
    service, client = make_client(tmp_path, "max_body_bytes = 200\n")
    with client:
        assert_problem(propose(client, "k1", text="x" * 300), 413, "request_too_large")
        assert propose(client, "k2", text="x", tool="notes.shout").status_code == 200
    service.close()


# -- Idempotency-Key --------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["k" * 10_000, "k" * 60_000, "clé".encode(), b"\xff\xfe", "k" * 256, '"open']
)
def test_an_invalid_idempotency_key_is_refused_and_not_stored(service_and_client, key):
    """Over 255 characters, non-ASCII bytes or a broken sf-string: 400, nothing kept."""
    service, client = service_and_client
    r = propose(client, "placeholder", **{"Idempotency-Key": key})
    assert_problem(r, 400, "idempotency_key_invalid")
    assert service.journal.list_calls("acme") == []


def test_a_quoted_key_is_the_same_key_as_the_bare_one(client):
    """An sf-string Idempotency-Key ("k1") names the same request as the bare k1."""
    first = propose(client, "k1", tool="notes.shout")
    second = propose(client, '"k1"', tool="notes.shout")
    assert second.headers["idempotent-replayed"] == "true"
    assert second.json() == first.json()


# -- every error a problem document -------------------------------------------------------


def test_a_refused_body_keeps_nothing_under_its_key(client):
    """The same key and the same bad body again: refused afresh, never replayed (IETF draft)."""
    headers = {**auth("agent"), "Idempotency-Key": "bad"}
    first = client.post("/v1/proposals", content=b'{"tool": "x"}', headers=headers)
    again = client.post("/v1/proposals", content=b'{"tool": "x"}', headers=headers)
    assert_problem(first, 400, "bad_request_body")
    assert_problem(again, 400, "bad_request_body")
    assert "idempotent-replayed" not in again.headers


def test_an_unknown_path_is_a_404_problem(client):
    """A path no route serves answers problem+json not_found, not text/plain."""
    assert_problem(client.get("/v2/nothing"), 404, "not_found")
    assert_problem(client.get("/console/static/nothing.css"), 404, "not_found")


def test_a_wrong_method_is_a_405_problem_with_allow(client):
    """A method a route does not take answers problem+json method_not_allowed, with Allow."""
    r = client.delete("/v1/proposals", headers=auth("agent"))
    assert_problem(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "POST"


def test_an_unexpected_failure_is_a_500_problem_naming_no_internals(service_and_client):
    """An exception inside a handler: 500 internal_error; its message stays in the log."""
    service, client = service_and_client

    def broken(*_args, **_kwargs):
        msg = "secret table toolbound_service_calls is corrupt"
        raise RuntimeError(msg)

    service.calls = broken
    r = client.get("/v1/invocations", headers=auth("agent"))
    assert_problem(r, 500, "internal_error")
    assert "secret" not in r.text
    assert "RuntimeError" not in r.text


@pytest.mark.parametrize("cookie", [{}, {"Cookie": "theme=dark"}])
def test_a_failing_proposal_is_a_500_problem_naming_no_internals(service_and_client, cookie):
    """The proposals route, before the router or through it: 500 internal_error, nothing more."""
    service, client = service_and_client

    def broken(*_args, **_kwargs):
        msg = "secret table toolbound_service_calls is corrupt"
        raise RuntimeError(msg)

    service.run_submission = broken
    r = propose(client, "k1", tool="notes.shout", **cookie)
    assert_problem(r, 500, "internal_error")
    assert "secret" not in r.text


def test_a_proposal_is_answered_alike_with_a_cookie_or_without(client):
    """A request with a cookie goes through the router; its answer has the same shape."""
    plain = propose(client, "k1", tool="notes.shout")
    cookied = propose(client, "k2", tool="notes.shout", Cookie="theme=dark")
    for r in (plain, cookied):
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/json"
        assert int(r.headers["content-length"]) == len(r.content)
        assert r.json()["status"] == "observed"
    # Either way, a key's answer is the one the other way stored.
    again = propose(client, "k1", tool="notes.shout", Cookie="theme=dark")
    assert (again.content, again.headers["idempotent-replayed"]) == (plain.content, "true")
    assert propose(client, "k2", tool="notes.shout").content == cookied.content
    assert_problem(
        propose(client, "k3", Cookie="theme=dark", Authorization=""), 401, "unauthenticated"
    )


# -- the confirmation lifetime ------------------------------------------------------------


def test_the_confirmation_lifetime_comes_from_toml(tmp_path, effects_path):
    """[service] confirmation_ttl = 60: a parked call expires 60 seconds after it was asked."""
    service, client = make_client(tmp_path, "confirmation_ttl = 60\n")
    with client:
        parked = propose(client, "k1")
        assert parked.status_code == 202
        asked = service.journal.get_call(parked.json()["invocation_id"]).body["confirmation"]
        requested = datetime.fromisoformat(asked["requested_at"])
        expires = datetime.fromisoformat(asked["expires_at"])
        assert (expires - requested).total_seconds() == 60
    service.close()


@pytest.mark.parametrize(
    ("line", "path"),
    [
        ('confirmation_ttl = "15m"', "service.confirmation_ttl"),
        ("confirmation_ttl = 0", "service.confirmation_ttl"),
        ("max_body_bytes = 0", "service.max_body_bytes"),
        ("max_body_bytes = 1.5", "service.max_body_bytes"),
    ],
)
def test_the_new_service_keys_are_validated_with_their_key_path(line, path):
    """A bad confirmation_ttl or max_body_bytes is a ConfigError naming service.<key>."""
    with pytest.raises(ConfigError) as info:
        parse_config(config_text("memory", extra=line + "\n"))
    assert path in {issue.path for issue in info.value.issues}


def test_the_defaults_are_four_mebibytes_and_fifteen_minutes():
    """Without the keys: bodies up to 4 MiB, confirmations that wait 15 minutes."""
    config = parse_config(config_text("memory"))
    assert config.max_body_bytes == 4 * 1024 * 1024
    assert config.confirmation_ttl.total_seconds() == 900

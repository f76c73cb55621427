"""R18, R7, R8 over HTTP: proposals in, typed outcomes out; people confirm by digest."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from service_config import KEYS, config_text
from service_pack import effects

from toolbound._clock import FixedClock
from toolbound.config import parse_config
from toolbound.service.core import fingerprint


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def submit(client, arguments: str, *, key: str, tool: str = "notes.add", who: str = "agent", **kw):
    body = {"tool": tool, "arguments": arguments, "call_id": f"call-{key}", **kw}
    return client.post("/v1/proposals", json=body, headers={**auth(who), "Idempotency-Key": key})


def decide(client, invocation_id: str, digest: str, decision: str, who: str = "ana"):
    return client.post(
        f"/v1/invocations/{invocation_id}/decision",
        json={"digest": digest, "decision": decision},
        headers=auth(who),
    )


def test_a_read_runs_and_returns_the_typed_outcome(client):
    r = submit(client, '{"text": "hi"}', key="k1", tool="notes.shout")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "observed"
    assert body["path"][-1] == "observed"
    assert json.loads(body["message"]["content"])["data"] == {"text": "HI"}


def test_the_model_bytes_are_parsed_strictly(client):
    """R2 over HTTP: a duplicate key inside the model's argument text is rejected."""
    r = submit(client, '{"text": "a", "text": "b"}', key="k1", tool="notes.shout")
    assert r.status_code == 200
    assert r.json()["status"] == "rejected"
    assert r.json()["problem"]["code"] == "duplicate_key"


def test_a_write_waits_for_a_person_then_runs_once(client, effects_path):
    parked = submit(client, '{"text": "buy milk"}', key="k1")
    assert parked.status_code == 202
    p = parked.json()
    assert p["status"] == "awaiting_confirmation"
    assert effects() == []
    pending = client.get("/v1/confirmations", headers=auth("ana")).json()["confirmations"]
    assert [c["invocation_id"] for c in pending] == [p["invocation_id"]]
    assert pending[0]["human"]["arguments"] == {"text": "buy milk"}

    done = decide(client, p["invocation_id"], p["digest"], "approve")
    assert done.status_code == 200
    assert done.json()["status"] == "observed"
    assert done.json()["invocation_id"] == p["invocation_id"]
    assert effects() == ["buy milk"]
    again = decide(client, p["invocation_id"], p["digest"], "approve")
    assert again.status_code == 409
    assert again.json()["code"] == "not_pending"
    assert effects() == ["buy milk"]
    stored = client.get(f"/v1/invocations/{p['invocation_id']}", headers=auth("agent")).json()
    assert (stored["status"], stored["decision"], stored["approver"]) == (
        "observed",
        "approved",
        "ana",
    )


def test_a_denied_call_never_runs(client):
    p = submit(client, '{"text": "x"}', key="k1").json()
    denied = decide(client, p["invocation_id"], p["digest"], "deny")
    assert denied.json()["status"] == "rejected"
    assert denied.json()["problem"]["code"] == "denied_by_person"
    assert decide(client, p["invocation_id"], p["digest"], "approve").status_code == 409
    assert effects() == []


def test_an_approval_must_name_the_digest_shown(client):
    """R7: a decision for another digest is refused and the call stays parked."""
    p = submit(client, '{"text": "x"}', key="k1").json()
    wrong = decide(client, p["invocation_id"], "sha256:" + "0" * 64, "approve")
    assert wrong.status_code == 409
    assert wrong.json()["code"] == "digest_mismatch"
    assert wrong.headers["content-type"] == "application/problem+json"
    assert decide(client, p["invocation_id"], p["digest"], "approve").json()["status"] == (
        "observed"
    )


def test_roles_four_eyes_and_tenants(client):
    p = submit(client, '{"text": "x"}', key="k1").json()
    # The agent cannot approve; nor can the same subject holding the approver role.
    assert (
        decide(client, p["invocation_id"], p["digest"], "approve", who="agent").json()["code"]
        == "forbidden"
    )
    assert (
        decide(client, p["invocation_id"], p["digest"], "approve", who="self").json()["code"]
        == "four_eyes"
    )
    # Another tenant sees nothing: not the call, not the list, not the decision.
    assert client.get(f"/v1/invocations/{p['invocation_id']}", headers=auth("eve")).status_code == (
        404
    )
    assert client.get("/v1/invocations", headers=auth("eve")).json()["invocations"] == []
    assert decide(client, p["invocation_id"], p["digest"], "approve", who="eve").status_code == 404
    assert effects() == []


def test_authentication(client):
    body = {"tool": "notes.shout", "arguments": "{}", "call_id": "c"}
    assert client.post("/v1/proposals", json=body).status_code == 401
    bad = client.post(
        "/v1/proposals", json=body, headers={"X-API-Key": "nope", "Idempotency-Key": "k"}
    )
    assert (bad.status_code, bad.json()["code"]) == (401, "unauthenticated")
    ok = client.post(
        "/v1/proposals", json=body, headers={"X-API-Key": KEYS["agent"], "Idempotency-Key": "k"}
    )
    assert ok.status_code == 200


class TestIdempotencyKeyHeader:
    """The IETF draft: 400 without the key, 422 on reuse with another body, replay after."""

    def test_missing_key_is_400(self, client):
        r = client.post(
            "/v1/proposals",
            json={"tool": "notes.shout", "arguments": "{}", "call_id": "c"},
            headers=auth("agent"),
        )
        assert (r.status_code, r.json()["code"]) == (400, "idempotency_key_missing")

    def test_same_key_same_body_replays_the_answer(self, client):
        first = submit(client, '{"text": "x"}', key="k1")
        second = submit(client, '{"text": "x"}', key="k1")
        assert second.json() == first.json()
        assert second.headers["idempotent-replayed"] == "true"
        assert len(client.get("/v1/invocations", headers=auth("agent")).json()["invocations"]) == 1

    def test_a_read_is_claimed_with_its_answer_and_replayed(self, client):
        first = submit(client, '{"text": "x"}', key="r1", tool="notes.shout")
        second = submit(client, '{"text": "x"}', key="r1", tool="notes.shout")
        assert second.headers["idempotent-replayed"] == "true"
        assert second.json() == first.json()
        other = submit(client, '{"text": "y"}', key="r1", tool="notes.shout")
        assert (other.status_code, other.json()["code"]) == (422, "idempotency_key_reused")

    def test_a_read_that_loses_the_race_for_its_key_answers_the_winners_answer(
        self, service, client
    ):
        """Two processes run the same read under one key: one answer is kept, for both."""
        body = b'{"tool": "notes.shout", "arguments": "{\\"text\\": \\"x\\"}", "call_id": "c"}'
        winner = (200, '{"status": "observed", "from": "the other process"}')
        service.journal.claim_request(
            "acme", "raced", fingerprint(body), now=service.clock.now(), stale_after=300
        )
        service.journal.finish_request("acme", "raced", *winner)
        # The peek saw nothing (it ran before the other process finished): simulate by
        # submitting through the service directly, claiming at the end.
        from toolbound.service.core import Submission

        _, _, lost = client.portal.call(
            lambda: service.submit(
                service.config.principal_for(KEYS["agent"]),
                Submission.from_body(body),
                request_key="raced",
                fingerprint=fingerprint(body),
            )
        )
        assert lost is not None
        assert (lost.kind, lost.status_code, lost.response) == ("replay", *winner)
        listed = client.get("/v1/invocations", headers=auth("agent")).json()["invocations"]
        assert listed == [], "the losing run is not kept as a second answer"

    def test_same_key_other_body_is_422(self, client):
        submit(client, '{"text": "x"}', key="k1")
        r = submit(client, '{"text": "y"}', key="k1")
        assert (r.status_code, r.json()["code"]) == (422, "idempotency_key_reused")

    def test_keys_are_per_tenant(self, client):
        submit(client, '{"text": "x"}', key="k1", tool="notes.shout")
        other = submit(client, '{"text": "x"}', key="k1", tool="notes.shout", who="eve")
        assert "idempotent-replayed" not in other.headers

    def test_a_key_still_running_is_409(self, service, client):
        body = b'{"tool": "notes.shout", "arguments": "{\\"text\\": \\"x\\"}", "call_id": "c"}'
        # Another process holds the key: its request has not finished.
        service.journal.claim_request(
            "acme", "busy", fingerprint(body), now=service.clock.now(), stale_after=300
        )
        r = client.post(
            "/v1/proposals", content=body, headers={**auth("agent"), "Idempotency-Key": "busy"}
        )
        assert (r.status_code, r.json()["code"]) == (409, "request_in_progress")


def test_bad_envelopes_are_400_with_a_code(client):
    for body in (
        b"[]",
        b'{"tool": "x"}',
        b'{"tool": "notes.add", "arguments": {}, "call_id": "c"}',
    ):
        r = client.post(
            "/v1/proposals", content=body, headers={**auth("agent"), "Idempotency-Key": str(body)}
        )
        assert (r.status_code, r.json()["code"]) == (400, "bad_request_body")


def test_trace_and_openapi(client):
    p = submit(client, '{"text": "x"}', key="k1", tool="notes.shout").json()
    events = client.get(f"/v1/invocations/{p['invocation_id']}/trace", headers=auth("agent"))
    kinds = [e["kind"] for e in events.json()["events"]]
    assert kinds[0] == "proposal"
    assert "transition" in kinds
    spec = client.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.1")
    assert "/v1/proposals" in spec["paths"]


def test_traceparent_continues_the_callers_trace(client):
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    body = {"tool": "notes.shout", "arguments": '{"text": "x"}', "call_id": "c"}
    r = client.post(
        "/v1/proposals",
        json=body,
        headers={**auth("agent"), "Idempotency-Key": "t1", "traceparent": parent},
    )
    assert r.json()["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    bad = client.post(
        "/v1/proposals",
        json=body,
        headers={**auth("agent"), "Idempotency-Key": "t2", "traceparent": "00-xyz"},
    )
    assert bad.json()["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736"
    assert len(bad.json()["trace_id"]) == 32


def test_filters(client):
    submit(client, '{"text": "a"}', key="k1", tool="notes.shout")
    submit(client, '{"text": "b"}', key="k2")
    listed = client.get("/v1/invocations?status=awaiting_confirmation", headers=auth("agent"))
    assert [c["tool"] for c in listed.json()["invocations"]] == ["notes.add@v1"]
    by_tool = client.get("/v1/invocations?tool=notes.shout@v1", headers=auth("agent"))
    assert [c["status"] for c in by_tool.json()["invocations"]] == ["observed"]


def test_retention_purges_old_finished_calls_but_never_parked_ones(service, client):
    from dataclasses import replace
    from datetime import timedelta

    done = submit(client, '{"text": "x"}', key="k1", tool="notes.shout").json()
    parked = submit(client, '{"text": "y"}', key="k2").json()
    # Age both past the retention period.
    for invocation_id in (done["invocation_id"], parked["invocation_id"]):
        call = service.journal.get_call(invocation_id)
        old = call.updated_at - service.config.retention - timedelta(days=1)
        service.journal.put_call(replace(call, updated_at=old))
    assert service.purge() == 1
    assert service.journal.get_call(done["invocation_id"]) is None
    assert service.journal.get_call(parked["invocation_id"]) is not None


@pytest.mark.parametrize(
    ("committed", "status"), [(True, "reconciled_committed"), (False, "reconciled_not_committed")]
)
def test_a_person_settles_an_unknown_outcome_with_evidence(client, service, committed, status):
    p = submit(client, '{"text": "lost"}', key="k1").json()
    done = decide(client, p["invocation_id"], p["digest"], "approve").json()
    assert done["status"] == "outcome_unknown"
    unknown = client.get("/v1/unknown", headers=auth("ops")).json()["unknown"]
    assert [u["invocation_id"] for u in unknown] == [p["invocation_id"]]
    url = f"/v1/unknown/{p['invocation_id']}/reconcile"
    no_evidence = client.post(url, json={"committed": committed}, headers=auth("ops"))
    assert no_evidence.json()["code"] == "evidence_missing"
    assert client.post(url, json={}, headers=auth("agent")).json()["code"] == "forbidden"
    finding = {"committed": committed, "evidence": {"checked": "the notes file"}}
    if not committed:
        # R9: "not committed" waits until the owner can no longer start the effect.
        early = client.post(url, json=finding, headers=auth("ops"))
        assert (early.status_code, early.json()["code"]) == (409, "not_yet")
        assert early.json()["hint"].startswith("retry after ")
        deadline = service.ledger.find(p["invocation_id"]).deadline
        service.clock = FixedClock(deadline + timedelta(seconds=2))
    settled = client.post(url, json=finding, headers=auth("ops"))
    assert settled.status_code == 200
    stored = client.get(f"/v1/invocations/{p['invocation_id']}", headers=auth("ops")).json()
    assert stored["status"] == status
    assert client.get("/v1/unknown", headers=auth("ops")).json()["unknown"] == []
    again = client.post(
        url, json={"committed": committed, "evidence": {"checked": "again"}}, headers=auth("ops")
    )
    assert (again.status_code, again.json()["code"]) == (409, "not_unknown")


def test_the_console_secret_comes_from_the_environment(monkeypatch):
    from toolbound.config import ConfigError

    config = parse_config(config_text("memory", extra='console_secret_env = "TB_SECRET"\n'))
    monkeypatch.delenv("TB_SECRET", raising=False)
    with pytest.raises(ConfigError, match="TB_SECRET"):
        config.console_secret()
    monkeypatch.setenv("TB_SECRET", "s" * 32)
    assert config.console_secret() == b"s" * 32
    assert parse_config(config_text("memory")).console_secret() is None

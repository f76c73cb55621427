"""Bearer JWTs through the service API: trusted issuers' tokens call; refusals say why."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import pytest
from service_config import KEYS, config_text
from service_pack import effects
from starlette.testclient import TestClient

from identity_support import (
    AUDIENCE,
    ISSUER,
    JwksServer,
    SigningKey,
    hmac_token,
    identity_table,
    jwks,
    unsigned_token,
)
from toolbound.config import ConfigError, parse_config
from toolbound.service.api import create_app
from toolbound.service.core import Service

if TYPE_CHECKING:
    from collections.abc import Callable

RSA = SigningKey("rsa-1")
EC = SigningKey("ec-1", "EC")
STRANGER = SigningKey("rsa-1")  # the same kid as RSA, another key
AGENT = {"sub": "agent-1", "tid": "acme", "roles": ["Tools.Call"]}
APPROVER = {"sub": "ana-sso", "tid": "acme", "roles": "Tools.Approve"}


def serve(tmp_path, identity: str):
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db") + identity)
    return Service(parse_config(path.read_text(), source=path))


@pytest.fixture
def file_client(tmp_path, effects_path):
    (tmp_path / "jwks.json").write_text(json.dumps(jwks(RSA, EC)))
    service = serve(tmp_path, identity_table('jwks_file = "jwks.json"'))
    with TestClient(create_app(service, console=False)) as client:
        yield client
    service.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def propose(client, token: str, key: str = "k1"):
    body = {"tool": "notes.add", "arguments": '{"text": "buy milk"}', "call_id": key}
    return client.post(
        "/v1/proposals", json=body, headers={**bearer(token), "Idempotency-Key": key}
    )


def test_an_agent_proposes_and_an_approver_approves_with_jwts(tmp_path, effects_path):
    """A JWKS on loopback: an RSA-signed agent parks a call; an EC-signed approver runs it."""
    with JwksServer(jwks(RSA, EC)).running() as idp:
        service = serve(tmp_path, identity_table(f'jwks_url = "{idp.url}"'))
        with TestClient(create_app(service, console=False)) as client:
            parked = propose(client, RSA.token(**AGENT))
            assert parked.status_code == 202, parked.text
            p = parked.json()
            approver = bearer(EC.token(**APPROVER))
            pending = client.get("/v1/confirmations", headers=approver).json()["confirmations"]
            assert [c["invocation_id"] for c in pending] == [p["invocation_id"]]
            done = client.post(
                f"/v1/invocations/{p['invocation_id']}/decision",
                json={"digest": p["digest"], "decision": "approve"},
                headers=approver,
            )
            assert done.status_code == 200, done.text
            assert done.json()["status"] == "observed"
            stored = client.get(
                f"/v1/invocations/{p['invocation_id']}", headers=bearer(KEYS["agent"])
            ).json()
        service.close()
    assert effects() == ["buy milk"]
    assert (stored["subject"], stored["approver"]) == ("agent-1", "ana-sso")
    assert idp.requests == 1  # one fetch served both keys


def test_a_jwt_principal_has_only_the_roles_its_claims_map_to(file_client):
    """A token whose roles claim maps to agent only is no operator: /metrics is a 403."""
    r = file_client.get("/metrics", headers=bearer(RSA.token(**AGENT)))
    assert r.status_code == 403
    assert r.json()["code"] == "forbidden"


# Each token is made when its case runs (a token made at collection could expire
# before a long suite reaches it).
REFUSED: dict[str, tuple[Callable[[], str], str]] = {
    "expired": (lambda: RSA.token(**AGENT, exp=int(time.time()) - 120), "token_expired"),
    "not yet valid": (
        lambda: RSA.token(**AGENT, nbf=int(time.time()) + 600),
        "token_not_yet_valid",
    ),
    "wrong audience": (lambda: RSA.token(**AGENT, aud="someone-else"), "token_audience_invalid"),
    "wrong issuer": (
        lambda: RSA.token(**AGENT, iss="https://evil.test/"),
        "token_issuer_invalid",
    ),
    "unknown kid": (lambda: SigningKey("rsa-9").token(**AGENT), "token_key_unknown"),
    "bad signature": (lambda: STRANGER.token(**AGENT), "token_signature_invalid"),
    "alg none": (lambda: unsigned_token(**AGENT), "token_algorithm_refused"),
    "hs256 with the public key": (
        lambda: hmac_token(RSA.public_pem(), kid="rsa-1", **AGENT),
        "token_algorithm_refused",
    ),
    "no exp": (lambda: RSA.token(**AGENT, exp=None), "token_claim_missing"),
    "no tenant": (lambda: RSA.token(sub="agent-1", roles=["Tools.Call"]), "token_claim_missing"),
    "garbage": (lambda: "not.a.token", "token_invalid"),
    "unknown key": (lambda: "no-such-api-key", "unauthenticated"),
}


@pytest.mark.parametrize(("make", "code"), REFUSED.values(), ids=REFUSED.keys())
def test_a_bad_token_is_a_401_naming_why(file_client, make, code):
    """Each refusal is problem+json with a catalogued code, and nothing is proposed."""
    r = propose(file_client, make())
    assert r.status_code == 401, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["code"] == code
    assert effects() == []


def test_a_rotated_key_is_fetched_when_a_token_names_it(tmp_path, effects_path):
    """The issuer rotates to a new kid: the next token naming it fetches the JWKS again."""
    new = SigningKey("rsa-2")
    with JwksServer(jwks(RSA)).running() as idp:
        table = identity_table(f'jwks_url = "{idp.url}"', jwks_refresh_interval="0")
        service = serve(tmp_path, table)
        with TestClient(create_app(service, console=False)) as client:
            assert propose(client, RSA.token(**AGENT), "k1").status_code == 202
            idp.document = jwks(new)
            assert propose(client, new.token(**AGENT), "k2").status_code == 202
        service.close()
    assert idp.requests == 2


def test_unknown_kids_refetch_at_most_once_per_interval(tmp_path, effects_path):
    """Made-up key ids do not make the service hammer the issuer: one fetch per interval."""
    with JwksServer(jwks(RSA)).running() as idp:
        service = serve(tmp_path, identity_table(f'jwks_url = "{idp.url}"'))
        with TestClient(create_app(service, console=False)) as client:
            for i in range(5):
                r = propose(client, SigningKey(f"made-up-{i}").token(**AGENT), f"k{i}")
                assert r.json()["code"] == "token_key_unknown"
        service.close()
    assert idp.requests == 1


def test_an_unreachable_issuer_is_a_503_not_a_500(tmp_path, effects_path):
    """No keys can be had: identity_unavailable, which a caller may retry."""
    service = serve(tmp_path, identity_table('jwks_url = "http://127.0.0.1:9/jwks.json"'))
    with TestClient(create_app(service, console=False)) as client:
        r = propose(client, RSA.token(**AGENT))
    service.close()
    assert r.status_code == 503
    assert r.json()["code"] == "identity_unavailable"


def test_an_hmac_issuer_takes_its_secret_from_the_environment(tmp_path, effects_path, monkeypatch):
    """HS256 only when configured with secret_env, and then only with that secret."""
    monkeypatch.setenv("TB_JWT_SECRET", "s3cret-s3cret-s3cret-s3cret-s3cret")
    table = identity_table('secret_env = "TB_JWT_SECRET"', algorithms='["HS256"]')
    service = serve(tmp_path, table)
    with TestClient(create_app(service, console=False)) as client:
        good = propose(client, hmac_token(b"s3cret-s3cret-s3cret-s3cret-s3cret", **AGENT), "k1")
        bad = propose(client, hmac_token(b"guess", **AGENT), "k2")
        rsa = propose(client, RSA.token(**AGENT), "k3")
    service.close()
    assert good.status_code == 202
    assert bad.json()["code"] == "token_signature_invalid"
    assert rsa.json()["code"] == "token_algorithm_refused"


BAD_TABLES = {
    "no key source": ("", {}, "identity.jwt[0].jwks_url"),
    "two key sources": ('jwks_url = "https://a.test/j"\njwks_file = "j.json"', {}, "jwks_url"),
    "hmac with a jwks": (
        'jwks_url = "https://a.test/j"\nalgorithms = ["HS256"]',
        {},
        "identity.jwt[0].secret_env",
    ),
    "mixed algorithms": (
        'secret_env = "X"\nalgorithms = ["HS256", "RS256"]',
        {},
        "identity.jwt[0].algorithms",
    ),
    "alg none": ('jwks_file = "j.json"\nalgorithms = ["none"]', {}, "identity.jwt[0].algorithms"),
    "unknown role": ('jwks_file = "j.json"', {"role_map": '{ x = "root" }'}, "role_map"),
    "two tenants": ('jwks_file = "j.json"', {"tenant": '"acme"'}, "identity.jwt[0].tenant"),
    "a url that is not http": ('jwks_url = "file:///etc/passwd"', {}, "jwks_url"),
}


@pytest.mark.parametrize(("source", "extra", "path"), BAD_TABLES.values(), ids=BAD_TABLES.keys())
def test_a_bad_identity_table_is_refused_with_its_key_path(source, extra, path):
    """The checker names the key that is wrong, before anything is fetched."""
    text = config_text("memory") + identity_table(source, **extra)
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert any(issue.path.endswith(path) for issue in caught.value.issues), caught.value.issues


def test_tokens_alone_may_be_the_callers():
    """With an [[identity.jwt]] issuer, no [[principal]] is needed."""
    text = '[store]\nurl = "memory"\n' + identity_table('jwks_url = "https://login.test/jwks.json"')
    config = parse_config(text)
    assert config.principals == ()
    assert [i.issuer for i in config.identity.issuers] == [ISSUER]
    assert config.identity.issuers[0].audience == AUDIENCE


def test_an_hmac_secret_may_be_read_from_a_file(tmp_path, effects_path, monkeypatch):
    """`secret_file` instead of `secret_env`: the same tokens verify, other secrets do not."""
    monkeypatch.delenv("TB_JWT_SECRET", raising=False)
    secret = "s3cret-from-a-file-s3cret-from-a-file"  # noqa: S105 - a test value
    (tmp_path / "jwt.secret").write_text(secret + "\n")
    service = serve(tmp_path, identity_table('secret_file = "jwt.secret"', algorithms='["HS256"]'))
    assert secret not in repr(service.config)
    with TestClient(create_app(service, console=False)) as client:
        good = propose(client, hmac_token(secret.encode(), **AGENT), "k1")
        bad = propose(client, hmac_token(b"guess", **AGENT), "k2")
    service.close()
    assert good.status_code == 202, good.text
    assert bad.json()["code"] == "token_signature_invalid"

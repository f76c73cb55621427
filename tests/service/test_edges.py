"""The service's edges: strict bodies, strict tokens, keys that keep only what ran."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from service_config import KEYS, config_text
from service_pack import effects
from starlette.testclient import TestClient

from identity_support import SigningKey, identity_table, jwks
from toolbound.cli import _cli
from toolbound.config import parse_config
from toolbound.service.api import create_app
from toolbound.service.core import Service

KEY = SigningKey("rsa-1")


def _service(tmp_path, text: str) -> Service:
    path = tmp_path / "toolbound.toml"
    path.write_text(text)
    return Service(parse_config(path.read_text(), source=path))


@pytest.fixture
def service(tmp_path, effects_path):
    (tmp_path / "jwks.json").write_text(json.dumps(jwks(KEY)))
    svc = _service(
        tmp_path, config_text("sqlite:///toolbound.db") + identity_table('jwks_file = "jwks.json"')
    )
    yield svc
    svc.close()


@pytest.fixture
def client(service):
    with TestClient(create_app(service)) as c:
        yield c


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def add(client, text: str, key: str, headers: dict[str, str]):
    body = {"tool": "notes.add", "arguments": f'{{"text": "{text}"}}', "call_id": key}
    return client.post("/v1/proposals", json=body, headers={**headers, "Idempotency-Key": key})


def test_a_decision_with_an_unknown_member_is_refused_and_decides_nothing(client):
    """A misspelt member is a 400 naming it; the call still waits for a person (R7)."""
    parked = add(client, "milk", "k1", auth("agent")).json()
    r = client.post(
        f"/v1/invocations/{parked['invocation_id']}/decision",
        json={"digest": parked["digest"], "decision": "approve", "approved_by": "me"},
        headers=auth("ana"),
    )
    assert r.status_code == 400
    assert r.json()["code"] == "bad_request_body"
    assert "approved_by" in r.json()["detail"]
    pending = client.get("/v1/confirmations", headers=auth("ana")).json()["confirmations"]
    assert [c["invocation_id"] for c in pending] == [parked["invocation_id"]]
    assert effects() == []


def test_a_reconcile_body_with_an_unknown_member_is_refused(client):
    """A finding with a member the operation does not know is a 400 naming it."""
    r = client.post(
        "/v1/unknown/any/reconcile",
        json={"committed": True, "evidence": {"checked": "x"}, "comitted": False},
        headers=auth("ops"),
    )
    assert r.status_code == 400
    assert "comitted" in r.json()["detail"]


@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
def test_a_numeric_date_given_as_a_string_is_refused(client, claim):
    """RFC 7519: exp, nbf and iat are JSON numbers; "1893456000" is refused, naming it."""
    claims = {"sub": "agent-1", "tid": "acme", "roles": ["Tools.Call"], claim: "1893456000"}
    if claim != "exp":
        claims["exp"] = 1893456000
    r = client.get("/v1/invocations", headers={"Authorization": f"Bearer {KEY.token(**claims)}"})
    assert r.status_code == 401
    assert r.json()["code"] == "token_invalid"
    assert repr(claim) in r.json()["detail"]


def test_a_token_whose_roles_map_to_nothing_is_refused_naming_claim_and_map(client):
    """Roles the role_map does not list: 403 naming the roles claim and the map's entries."""
    token = KEY.token(sub="agent-1", tid="acme", roles=["Tools.Admin"])
    r = client.get("/v1/invocations", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 403
    body = r.json()
    assert body["code"] == "token_roles_unmapped"
    assert "'roles'" in body["detail"]
    assert "role_map" in body["detail"]
    assert "Tools.Call" in body["detail"]


def test_a_403_is_not_kept_under_the_key_and_runs_once_the_configuration_is_fixed(
    tmp_path, effects_path
):
    """A refusal before execution keeps nothing: the same key, re-sent after the fix, runs."""
    text = config_text("sqlite:///toolbound.db", confirm_writes=False)
    # ana may approve but not propose; then the configuration gives her the agent role.
    before = _service(tmp_path, text)
    with TestClient(create_app(before)) as client:
        refused = add(client, "milk", "k-fix", auth("ana"))
    before.close()
    fixed_text = text.replace('roles = ["approver"]', 'roles = ["approver", "agent"]')
    fixed_text = fixed_text.replace('subject = "ana"', 'subject = "agent-1"', 1)
    after = _service(tmp_path, fixed_text)
    try:
        with TestClient(create_app(after)) as client:
            again = add(client, "milk", "k-fix", auth("ana"))
    finally:
        after.close()
    assert refused.status_code == 403
    assert again.status_code == 200, again.text
    assert "idempotent-replayed" not in again.headers
    assert again.json()["status"] == "observed"
    assert effects() == ["milk"]


@pytest.mark.parametrize(("setting", "secure"), [("", False), ("cookie_secure = true\n", True)])
def test_cookie_secure_marks_the_console_cookie(tmp_path, effects_path, setting, secure):
    """[service] cookie_secure: the console's session cookie carries Secure (HTTPS only)."""
    svc = _service(tmp_path, config_text("sqlite:///toolbound.db", extra=setting))
    try:
        with TestClient(create_app(svc), base_url="https://t") as client:
            page = client.get("/console/login")
    finally:
        svc.close()
    cookie = page.headers["set-cookie"].lower()
    assert cookie.startswith("toolbound_console=")
    assert ("; secure" in cookie) is secure


def test_check_config_warns_about_roles_no_role_map_entry_gives(tmp_path):
    """check-config names each toolbound role an issuer's role_map never maps to."""
    path = tmp_path / "toolbound.toml"
    (tmp_path / "jwks.json").write_text(json.dumps(jwks(KEY)))
    path.write_text(
        config_text("sqlite:///toolbound.db") + identity_table('jwks_file = "jwks.json"')
    )
    result = CliRunner().invoke(_cli, ["check-config", str(path)])
    assert result.exit_code == 0, result.output
    # The warning as one line, however the terminal wrapped it.
    text = " ".join(result.output.split())
    warning = text[text.index("warning ") : text.index(" valid")]
    assert warning.startswith("warning identity.jwt[0].role_map")
    assert "operator" in warning
    assert "agent" not in warning

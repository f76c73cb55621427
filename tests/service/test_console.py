"""R18, R7, R12: the web console — people confirm by digest, read traces, settle unknowns.

Everything here goes through the real Starlette app over a real SQLite store; the
console calls the same Service the API does, so roles, tenants, digest binding and the
four-eyes rule are the API's.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta

import pytest
from click.testing import CliRunner
from markupsafe import escape
from service_config import KEYS, config_text
from service_pack import effects, effects_file
from starlette.applications import Starlette
from starlette.testclient import TestClient

from toolbound import ToolSpec
from toolbound._clock import FixedClock
from toolbound._errors import ConfigurationError
from toolbound.cli import _cli
from toolbound.config import hash_key, parse_config
from toolbound.execution.reconcile import RemoteCommitted, RemoteNotCommitted, RemoteUnknown
from toolbound.execution.retry import ResponseLost
from toolbound.service.api import create_app
from toolbound.service.console import console_middleware, console_routes, reveal
from toolbound.service.core import Service

# A write whose response is always lost after it took effect: its outcome is unknown.
FLAKY_GRANTS = "".join(
    f'\n[[grant]]\nsubject = "{subject}"\ntenant = "{tenant}"\n'
    'capability = "notes:flaky"\nactions = ["create"]\n'
    for subject, tenant in (("agent-1", "acme"), ("eve", "globex"))
)


def register_flaky(registry) -> None:
    def query(call):
        # Unreachable until a test says otherwise: the runtime's own query cannot settle it.
        if not effects_file().with_suffix(".reachable").exists():
            return RemoteUnknown(evidence={"backend": "unreachable"})
        if f"flaky:{call.arguments['text']}" in effects():
            return RemoteCommitted(value={"saved": call.arguments["text"]}, evidence={"file": "ok"})
        return RemoteNotCommitted(evidence={"file": "no line"})

    def flaky(arguments, ctx):
        with effects_file().open("a") as f:
            f.write(f"flaky:{arguments['text']}\n")
        msg = "the connection dropped after the note was saved"
        raise ResponseLost(msg)

    registry.register(
        ToolSpec(
            name="notes.flaky",
            version="v1",
            description="Save a note over a bad line.",
            input_schema={
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
                "additionalProperties": False,
            },
            effect="irreversible_write",
            capabilities=("notes:flaky",),
            idempotency="query_by_key",
            query=query,
            max_attempts=1,
        ),
        flaky,
    )


def make_service(tmp_path, *, four_eyes: bool = True) -> Service:
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db", four_eyes=four_eyes, extra=FLAKY_GRANTS))
    config = parse_config(path.read_text(), source=path)
    registry = config.build_registry()
    register_flaky(registry)
    return Service(config, registry=registry)


@pytest.fixture
def service(tmp_path, effects_path):
    svc = make_service(tmp_path)
    yield svc
    svc.close()


@pytest.fixture
def app(service):
    return create_app(service)


@pytest.fixture
def client(app):
    with TestClient(app, follow_redirects=False) as c:
        yield c


@pytest.fixture
def browser_for(app):
    """Another browser (its own cookie jar) on the same app."""
    opened: list[TestClient] = []

    def make() -> TestClient:
        c = TestClient(app, follow_redirects=False)
        opened.append(c)
        return c

    yield make
    for c in opened:
        c.close()


# -- helpers ------------------------------------------------------------------------


def submit(client, arguments: object, *, tool: str = "notes.add", who: str = "agent") -> dict:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    key = uuid.uuid4().hex
    r = client.post(
        "/v1/proposals",
        json={"tool": tool, "arguments": text, "call_id": f"call-{key}"},
        headers={"Authorization": f"Bearer {KEYS[who]}", "Idempotency-Key": key},
    )
    assert r.status_code in {200, 202}, r.text
    return r.json()


def token(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "the page has no CSRF token"
    return found.group(1)


def login(client, who: str) -> str:
    """Log in as ``who``; return the session's CSRF token."""
    csrf = token(client.get("/console/login").text)
    r = client.post("/console/login", data={"key": KEYS[who], "csrf": csrf})
    assert r.status_code == 303, r.text
    return token(client.get("/console/pending").text)


def decide(client, csrf: str, call: dict, decision: str, *, digest: str | None = None):
    return client.post(
        f"/console/invocations/{call['invocation_id']}/decision",
        data={"csrf": csrf, "digest": digest or call["digest"], "decision": decision},
    )


def error_code(response) -> str:
    found = re.search(r'<code id="error-code">([^<]+)</code>', response.text)
    assert found, response.text
    return found.group(1)


def listed(page: str) -> list[str]:
    return re.findall(r'data-invocation="([0-9a-f]+)"', page)


# -- logging in -----------------------------------------------------------------------


def test_pages_need_a_login(client):
    """Without a session every page sends the browser to the login form, keeping the way back."""
    r = client.get("/console/invocations")
    assert r.status_code == 303
    assert r.headers["location"] == "/console/login?next=%2Fconsole%2Finvocations"
    assert client.get("/console").headers["location"] == "/console/login"


def test_a_wrong_key_does_not_log_in(client):
    csrf = token(client.get("/console/login").text)
    r = client.post("/console/login", data={"key": "guess", "csrf": csrf})
    assert r.status_code == 401
    assert "unknown API key" in r.text
    assert client.get("/console/pending").status_code == 303


def test_the_login_form_needs_its_csrf_token(client):
    """Login CSRF: a form posted from elsewhere cannot log a browser in as someone else."""
    client.get("/console/login")
    r = client.post("/console/login", data={"key": KEYS["ana"]})
    assert r.status_code == 403
    assert error_code(r) == "csrf_failed"
    assert client.get("/console/pending").status_code == 303


def test_the_session_cookie_is_httponly_strict_and_kept_to_the_console(client):
    """The cookie never reaches the API: a browser session cannot be used against /v1."""
    csrf = token(client.get("/console/login").text)
    r = client.post("/console/login", data={"key": KEYS["ana"], "csrf": csrf})
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie
    assert "samesite=strict" in cookie
    assert "path=/console;" in cookie
    assert client.get("/console/pending").status_code == 200
    assert client.get("/v1/confirmations").status_code == 401


def test_log_in_then_out(client):
    csrf = login(client, "ana")
    page = client.get("/console/pending").text
    assert '<span id="principal">ana</span>' in page
    r = client.post("/console/logout", data={"csrf": csrf})
    assert r.status_code == 303
    assert r.headers["location"] == "/console/login"
    assert client.get("/console/pending").status_code == 303


def captured(client) -> dict[str, str]:
    """The session cookie as an attacker who copied it would send it."""
    return {"Cookie": f"toolbound_console={client.cookies['toolbound_console']}"}


def test_a_cookie_copied_before_logout_is_worthless_after_it(client, browser_for):
    """Logging out ends the session on the server: a captured copy of its cookie is refused."""
    csrf = login(client, "ana")
    stolen = captured(client)
    thief = browser_for()
    assert thief.get("/console/pending", headers=stolen).status_code == 200
    client.post("/console/logout", data={"csrf": csrf})
    r = thief.get("/console/pending", headers=stolen)
    assert r.status_code == 303
    assert r.headers["location"].startswith("/console/login")


def test_revoking_a_principal_ends_every_session_it_has(client, browser_for, tmp_path):
    """`toolbound revoke-sessions ana` logs ana out of every browser; others stay logged in."""
    other, ops = browser_for(), browser_for()
    login(client, "ana")
    login(other, "ana")
    login(ops, "ops")
    result = CliRunner().invoke(
        _cli, ["revoke-sessions", "ana", "--config", str(tmp_path / "toolbound.toml")]
    )
    assert result.exit_code == 0, result.output
    assert "ended 2 console session(s) of ana" in result.output
    assert client.get("/console/pending").status_code == 303
    assert other.get("/console/pending").status_code == 303
    assert ops.get("/console/pending").status_code == 200
    login(client, "ana")
    assert client.get("/console/pending").status_code == 200, "ana may log in again"


def test_a_logout_on_one_replica_ends_the_session_on_every_replica(tmp_path, effects_path):
    """Sessions live in the shared store: a session logged out on one replica is over on all."""
    first, second = make_service(tmp_path), make_service(tmp_path)
    secret = b"s" * 32

    def console(service) -> TestClient:
        app = Starlette(routes=console_routes(service), middleware=console_middleware(secret))
        return TestClient(app, follow_redirects=False)

    a, b = console(first), console(second)
    try:
        csrf = login(a, "ana")
        stolen = captured(a)
        assert b.get("/console/pending", headers=stolen).status_code == 200
        a.post("/console/logout", data={"csrf": csrf})
        assert b.get("/console/pending", headers=stolen).status_code == 303
    finally:
        for c in (a, b):
            c.close()
        first.close()
        second.close()


def test_rotating_a_principals_key_ends_its_sessions(tmp_path, effects_path):
    """A replica whose configuration gives ana a new key refuses ana's old session, not ops's."""
    first = make_service(tmp_path)
    path = tmp_path / "toolbound.toml"
    rotated_text = path.read_text().replace(hash_key(KEYS["ana"]), hash_key("a-new-key"))
    rotated = Service(parse_config(rotated_text, source=path))
    secret = b"s" * 32
    a, b, r = (
        TestClient(
            Starlette(routes=console_routes(service), middleware=console_middleware(secret)),
            follow_redirects=False,
        )
        for service in (first, first, rotated)
    )
    try:
        login(a, "ana")
        login(b, "ops")
        assert r.get("/console/pending", headers=captured(a)).status_code == 303
        assert r.get("/console/pending", headers=captured(b)).status_code == 200
    finally:
        for c in (a, b, r):
            c.close()
        first.close()
        rotated.close()


@pytest.mark.parametrize(
    ("target", "landing"),
    [
        ("/console/invocations", "/console/invocations"),
        ("https://evil.example/", "/console/pending"),
        ("//evil.example/console/x", "/console/pending"),
        ("/console/..//evil.example", "/console/pending"),
    ],
)
def test_after_login_the_browser_only_goes_back_into_the_console(client, target, landing):
    csrf = token(client.get("/console/login").text)
    r = client.post("/console/login", data={"key": KEYS["ana"], "csrf": csrf, "next": target})
    assert r.headers["location"] == landing


def test_a_new_login_gets_a_new_csrf_token(client):
    """No session fixation: the token before logging in is not the token after."""
    before = token(client.get("/console/login").text)
    after = login(client, "ana")
    assert before != after


# -- confirmations ----------------------------------------------------------------------


def test_a_parked_call_shows_what_the_person_decides_on(client):
    """Tool, subject, reason, digest, normalized arguments and the human evidence (R12)."""
    call = submit(client, {"text": "buy milk"})
    login(client, "ana")
    page = client.get("/console/pending").text
    assert listed(page) == [call["invocation_id"]]
    assert "<h2>notes.add@v1</h2>" in page
    assert '<strong class="subject">agent-1</strong> (acme)' in page
    assert "confirmation required by the grant for notes:write" in page
    assert f'<code class="digest">{call["digest"]}</code>' in page
    assert str(escape('"text": "buy milk"')) in page
    assert "Human evidence" in page
    # The form posts exactly the digest on the page.
    assert f'name="digest" value="{call["digest"]}"' in page
    assert 'value="approve"' in page
    assert effects() == []


def test_approving_runs_the_call_once_and_shows_it_committed(client):
    call = submit(client, {"text": "buy milk"})
    csrf = login(client, "ana")
    r = decide(client, csrf, call, "approve")
    assert r.status_code == 303
    assert r.headers["location"] == f"/console/invocations/{call['invocation_id']}"
    page = client.get(r.headers["location"]).text
    assert "Approved. The call ended observed (observed)." in page
    assert '<dd id="status">observed</dd>' in page
    assert '<dd id="decision">approved by ana</dd>' in page
    assert "<dt>commit status</dt><dd>committed</dd>" in page
    assert effects() == ["buy milk"]
    assert listed(client.get("/console/pending").text) == []


def test_a_person_corrects_the_arguments_and_approves_the_corrected_call(client):
    """Edit, then approve: the form starts from the normalized arguments; the fix runs once."""
    call = submit(client, {"text": "buy milk"})
    csrf = login(client, "ana")
    page = client.get("/console/pending").text
    assert "Correct the arguments, then approve" in page
    assert str(escape('"text": "buy milk"')) in page  # the editor starts from what was shown
    r = client.post(
        f"/console/invocations/{call['invocation_id']}/decision",
        data={
            "csrf": csrf,
            "digest": call["digest"],
            "decision": "edit",
            "arguments": '{"text": "buy oat milk"}',
        },
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert r.headers["location"] != f"/console/invocations/{call['invocation_id']}"
    shown = client.get(r.headers["location"]).text
    assert "Edited and approved. The corrected call ended observed." in shown
    assert effects() == ["buy oat milk"]
    original = client.get(f"/console/invocations/{call['invocation_id']}").text
    assert '<dd id="status">cancelled</dd>' in original
    assert listed(client.get("/console/pending").text) == []


def test_a_denied_call_stays_denied(client):
    """R7: a denial is final; approving afterwards is refused and nothing ever runs."""
    call = submit(client, {"text": "sell the car"})
    csrf = login(client, "ana")
    decide(client, csrf, call, "deny")
    page = client.get(f"/console/invocations/{call['invocation_id']}").text
    assert '<dd id="status">rejected</dd>' in page
    assert '<dd id="decision">denied by ana</dd>' in page
    assert 'value="approve"' not in page

    again = decide(client, csrf, call, "approve")
    assert again.status_code == 409
    assert error_code(again) == "not_pending"
    assert effects() == []
    assert (
        '<dd id="status">rejected</dd>'
        in client.get(f"/console/invocations/{call['invocation_id']}").text
    )


def test_every_post_needs_this_sessions_csrf_token(client, browser_for):
    call = submit(client, {"text": "buy milk"})
    csrf = login(client, "ana")
    other = browser_for()
    foreign = login(other, "ops")

    for sent in (None, "", "forged", foreign):
        data = {"digest": call["digest"], "decision": "approve"}
        if sent is not None:
            data["csrf"] = sent
        r = client.post(f"/console/invocations/{call['invocation_id']}/decision", data=data)
        assert r.status_code == 403, sent
        assert error_code(r) == "csrf_failed"
    r = client.post("/console/logout", data={"csrf": "forged"})
    assert r.status_code == 403
    assert effects() == []
    assert listed(client.get("/console/pending").text) == [call["invocation_id"]]
    assert decide(client, csrf, call, "approve").status_code == 303


def test_the_decision_is_bound_to_the_digest_shown(client):
    """R7: a digest other than the call's (the arguments changed) leaves the call parked."""
    call = submit(client, {"text": "buy milk"})
    csrf = login(client, "ana")
    r = decide(client, csrf, call, "approve", digest="sha256:" + "0" * 64)
    assert r.status_code == 409
    assert error_code(r) == "digest_mismatch"
    assert "reload the call and review it again" in r.text
    assert effects() == []
    assert listed(client.get("/console/pending").text) == [call["invocation_id"]]


def test_only_approvers_see_and_use_the_buttons(client):
    call = submit(client, {"text": "buy milk"})
    csrf = login(client, "agent")
    page = client.get("/console/pending").text
    assert listed(page) == [call["invocation_id"]]
    assert 'value="approve"' not in page
    assert "Only an approver can decide this call." in page
    r = decide(client, csrf, call, "approve")
    assert r.status_code == 403
    assert error_code(r) == "forbidden"
    assert effects() == []


def test_the_four_eyes_rule_is_shown_and_enforced(client):
    """An approver cannot approve a call that runs for their own subject."""
    call = submit(client, {"text": "buy milk"})
    csrf = login(client, "self")  # an approver whose subject is agent-1
    page = client.get("/console/pending").text
    assert "Four-eyes rule: this call runs for your own subject" in page
    assert 'value="approve"' not in page
    r = decide(client, csrf, call, "approve")
    assert r.status_code == 403
    assert error_code(r) == "four_eyes"
    assert "<h1>Four-eyes rule</h1>" in r.text
    assert effects() == []


def test_a_malformed_decision_form_is_refused(client):
    call = submit(client, {"text": "buy milk"})
    csrf = login(client, "ana")
    r = decide(client, csrf, call, "maybe")
    assert r.status_code == 400
    assert error_code(r) == "bad_form"


# -- tenants ----------------------------------------------------------------------------


def test_another_tenant_sees_nothing_and_decides_nothing(client):
    call = submit(client, {"text": "acme only"})
    flaky = submit(client, {"text": "acme"}, tool="notes.flaky")
    assert flaky["status"] == "outcome_unknown"
    csrf = login(client, "eve")  # tenant globex, every role
    assert listed(client.get("/console/pending").text) == []
    assert listed(client.get("/console/invocations").text) == []
    assert listed(client.get("/console/unknown").text) == []
    r = client.get(f"/console/invocations/{call['invocation_id']}")
    assert r.status_code == 404
    assert error_code(r) == "not_found"
    r = decide(client, csrf, call, "approve")
    assert r.status_code == 404
    r = client.post(
        f"/console/unknown/{flaky['invocation_id']}/reconcile",
        data={"csrf": csrf, "action": "not_committed", "evidence": "looked"},
    )
    assert r.status_code == 404
    assert effects() == ["flaky:acme"]


# -- untrusted text -------------------------------------------------------------------


def test_model_written_html_is_shown_inert(client):
    """Arguments and results are data: a <script> in them is text on every page."""
    evil = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    call = submit(client, {"text": evil})
    csrf = login(client, "ana")
    pages = [client.get("/console/pending"), client.get("/console/pending/list")]
    decide(client, csrf, call, "approve")
    pages += [
        client.get(f"/console/invocations/{call['invocation_id']}"),
        client.get("/console/invocations"),
    ]
    for r in pages:
        assert "<script>alert" not in r.text
        assert "<img src=x" not in r.text
    detail = pages[2].text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in detail
    assert effects() == [evil]
    # And no inline script could run even if some escaped the templates.
    assert "script-src 'self'" in pages[2].headers["content-security-policy"]
    assert pages[2].headers["x-frame-options"] == "DENY"


def test_a_model_written_tool_name_and_call_id_are_shown_inert(client):
    """An invented tool name is recorded as the model wrote it; it is still only text."""
    r = client.post(
        "/v1/proposals",
        json={
            "tool": "<img src=x onerror=alert(3)>",
            "arguments": "{}",
            "call_id": "<b>call</b>",
        },
        headers={"Authorization": f"Bearer {KEYS['agent']}", "Idempotency-Key": "k-evil"},
    )
    call = r.json()
    assert call["status"] == "rejected"
    login(client, "ops")
    pages = [
        client.get("/console/invocations").text,
        client.get(f"/console/invocations/{call['invocation_id']}").text,
    ]
    for page in pages:
        assert "<img src=x" not in page
        assert "&lt;img src=x onerror=alert(3)&gt;" in page
    assert "<b>call</b>" not in pages[1]
    assert "&lt;b&gt;call&lt;/b&gt;" in pages[1]


def test_invisible_and_direction_changing_characters_are_shown(client):
    """A bidi override cannot make ``pay bob`` look like something else to the approver."""
    text = "pay \u202ebob\u202c\u200b"
    call = submit(client, {"text": text})
    login(client, "ana")
    page = client.get("/console/pending").text
    assert call["invocation_id"] in page
    assert "\u202e" not in page
    assert "\u200b" not in page
    assert '<mark class="hidden-char" title="U+202E">\\u202e</mark>bob' in page


def test_reveal_escapes_and_marks():
    assert str(reveal("<b>&</b>")) == "&lt;b&gt;&amp;&lt;/b&gt;"
    assert str(reveal("a\nb\tc")) == "a\nb\tc"
    assert str(reveal("\x1b[2J")) == '<mark class="hidden-char" title="U+001B">\\u001b</mark>[2J'
    tag = str(reveal("\U000e0041"))
    assert tag == '<mark class="hidden-char" title="U+E0041">\\udb40\\udc41</mark>'


# -- invocations and traces -----------------------------------------------------------


def test_the_invocation_list_filters_by_status_tool_and_subject(client):
    read = submit(client, {"text": "hi"}, tool="notes.shout")
    parked = submit(client, {"text": "buy milk"})
    login(client, "ops")

    def ids(**query) -> set[str]:
        return set(listed(client.get("/console/invocations", params=query).text))

    both = {read["invocation_id"], parked["invocation_id"]}
    assert ids() == both
    assert ids(status="observed") == {read["invocation_id"]}
    assert ids(status="awaiting_confirmation") == {parked["invocation_id"]}
    assert ids(tool="notes.add@v1") == {parked["invocation_id"]}
    assert ids(subject="agent-1") == both
    assert ids(subject="nobody") == set()
    assert ids(status="observed", tool="notes.add@v1") == set()
    page = client.get("/console/invocations", params={"status": "observed"}).text
    assert '<option value="observed" selected>' in page


def test_the_trace_timeline_shows_states_attempts_timings_and_model_bytes(client):
    """R14: every event with its offset, kind and state; the attempt; the exact bytes."""
    call = submit(client, {"text": "buy milk"})
    csrf = login(client, "ana")
    decide(client, csrf, call, "approve")
    page = client.get(f"/console/invocations/{call['invocation_id']}").text
    timeline = page[page.index('<ol class="timeline"') :]
    events = re.findall(r'<li class="event kind-([a-z_]+)">', timeline)
    assert events[0] == "proposal"
    assert {"transition", "confirmation", "attempt", "tool_message"} <= set(events)
    assert events[-1] == "tool_message"
    assert '<span class="offset">+0.000 ms</span>' in timeline
    offsets = [
        float(x) for x in re.findall(r'<span class="offset">\+([0-9.]+) ms</span>', timeline)
    ]
    assert len(offsets) == len(events)
    assert offsets == sorted(offsets)
    for state in ("awaiting_confirmation", "prepared", "executing", "committed", "observed"):
        assert f'<span class="badge status-{state}">{state}</span>' in timeline
    assert re.search(r"attempt 1: committed in [0-9.]+ ms", timeline)
    assert "approved by ana" in timeline

    sent = client.get(
        f"/v1/invocations/{call['invocation_id']}",
        headers={"Authorization": f"Bearer {KEYS['ops']}"},
    ).json()["response"]["message"]["content"]
    size = len(sent.encode())
    assert f"{size} bytes sent back to the model" in timeline
    assert f'Sent back to the model <span class="muted">{size} bytes' in page
    assert str(escape(sent)) in page


def test_an_unknown_invocation_is_a_readable_404(client):
    login(client, "ops")
    r = client.get("/console/invocations/feedbeef")
    assert r.status_code == 404
    assert error_code(r) == "not_found"
    assert "no invocation feedbeef" in r.text


# -- outcome unknown --------------------------------------------------------------------


def test_an_operator_asks_the_tool_and_the_unknown_is_settled(client, service, effects_path):
    """R9: a lost response is reconciled by asking the tool, with its evidence."""
    call = submit(client, {"text": "n1"}, tool="notes.flaky")
    assert call["status"] == "outcome_unknown"
    csrf = login(client, "ops")
    page = client.get("/console/unknown").text
    assert listed(page) == [call["invocation_id"]]
    assert 'value="ask"' in page
    ask = {"csrf": csrf, "action": "ask"}
    url = f"/console/unknown/{call['invocation_id']}/reconcile"

    r = client.post(url, data=ask)  # the backend does not answer yet
    assert r.status_code == 303
    page = client.get(r.headers["location"]).text
    assert "The tool could not say; the outcome is still unknown." in page
    assert listed(page) == [call["invocation_id"]]

    effects_path.with_suffix(".reachable").touch()
    r = client.post(url, data=ask)
    page = client.get(r.headers["location"]).text
    assert "Recorded as committed." in page
    assert listed(page) == []
    assert service.ledger.find(call["invocation_id"]).phase == "committed"
    detail = client.get(f"/console/invocations/{call['invocation_id']}").text
    assert '<dd id="status">reconciled_committed</dd>' in detail
    assert effects() == ["flaky:n1"]


def test_a_persons_finding_needs_evidence_and_an_operator(client, browser_for, service):
    call = submit(client, {"text": "n2"}, tool="notes.flaky")
    url = f"/console/unknown/{call['invocation_id']}/reconcile"

    approver = browser_for()
    csrf = login(approver, "ana")
    page = approver.get("/console/unknown").text
    assert listed(page) == [call["invocation_id"]]
    assert "Only an operator can reconcile." in page
    r = approver.post(url, data={"csrf": csrf, "action": "committed", "evidence": "saw it"})
    assert r.status_code == 403
    assert error_code(r) == "forbidden"

    csrf = login(client, "ops")
    r = client.post(url, data={"csrf": csrf, "action": "not_committed", "evidence": "  "})
    assert r.status_code == 400
    assert error_code(r) == "evidence_missing"
    assert service.ledger.find(call["invocation_id"]).phase == "unknown"

    finding = {"csrf": csrf, "action": "not_committed", "evidence": "no such note in the file"}
    r = client.post(url, data=finding)  # R9: the owner may still act until its deadline
    assert (r.status_code, error_code(r)) == (409, "not_yet")
    deadline = service.ledger.find(call["invocation_id"]).deadline
    service.clock = FixedClock(deadline + timedelta(seconds=2))
    r = client.post(url, data=finding)
    assert r.status_code == 303
    assert "Recorded as not committed" in client.get("/console/unknown").text
    record = service.ledger.find(call["invocation_id"])
    assert record.phase == "failed"
    assert record.evidence[-1]["finding"] == "no such note in the file"
    assert record.evidence[-1]["resolved_by"] == "ops"


def test_settling_twice_is_refused(client):
    call = submit(client, {"text": "n3"}, tool="notes.flaky")
    csrf = login(client, "ops")
    url = f"/console/unknown/{call['invocation_id']}/reconcile"
    r = client.post(url, data={"csrf": csrf, "action": "committed", "evidence": "saw the note"})
    assert r.status_code == 303
    r = client.post(url, data={"csrf": csrf, "action": "committed", "evidence": "again"})
    assert r.status_code == 409
    assert error_code(r) == "not_unknown"


# -- assembly ---------------------------------------------------------------------------


def test_the_console_can_be_left_out(service):
    with TestClient(create_app(service, console=False), follow_redirects=False) as c:
        assert c.get("/console/login").status_code == 404
        assert c.get("/healthz").status_code == 200


def test_static_files_are_served(client):
    css = client.get("/console/static/console.css")
    assert css.status_code == 200
    assert css.headers["content-type"].startswith("text/css")
    assert client.get("/console/static/console.js").status_code == 200


def test_replicas_share_sessions_only_with_a_shared_secret(tmp_path, effects_path):
    """Scale-out: a session made on one replica is honoured by another with the same secret."""
    first, second = make_service(tmp_path), make_service(tmp_path)

    def console(service, secret: bytes) -> Starlette:
        return Starlette(routes=console_routes(service), middleware=console_middleware(secret))

    shared = b"s" * 32
    a = TestClient(console(first, shared), follow_redirects=False)
    b = TestClient(console(second, shared), follow_redirects=False)
    c = TestClient(console(second, b"t" * 32), follow_redirects=False)
    try:
        login(a, "ana")
        for other in (b, c):
            other.cookies = a.cookies
        assert b.get("/console/pending").status_code == 200
        assert c.get("/console/pending").status_code == 303
    finally:
        for client in (a, b, c):
            client.close()
        first.close()
        second.close()


def test_a_short_secret_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="at least 16 bytes"):
        console_middleware(b"short")


def test_the_text_a_person_edits_hides_nothing_and_means_the_same():
    """Invisible and direction-changing characters are written as escapes in the edit box."""
    from toolbound.service.console import editable

    value = {"to": "pay \u202ebob\u200b", "note": "café\n"}
    text = editable(value)
    assert "\u202e" not in text
    assert "\u200b" not in text
    assert "\\u202e" in text
    assert "café" in text
    assert json.loads(text) == value

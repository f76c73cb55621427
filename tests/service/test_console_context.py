"""R18, R12, R6: what a person needs to decide — the tool's words beside the model's values.

The approval page and the invocation page show the tool's description and each
parameter's description and constraints from the registry's spec beside the argument
values, and the provenance findings of the call on the parameter they concern.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from console_pack import (
    RECIPIENT_FINDING,
    SCOPE_FINDING,
    config_with_payments,
    record_findings,
)
from markupsafe import escape
from service_config import KEYS, config_text
from starlette.testclient import TestClient
from test_console import decide, error_code, listed, login, submit

from toolbound._errors import ConfigurationError
from toolbound.adapters.http import ApiError
from toolbound.config import parse_config
from toolbound.service import console
from toolbound.service.api import create_app
from toolbound.service.console import _expires_in, console_middleware, console_routes
from toolbound.service.core import Service
from toolbound.service.decisions import note_denial

if TYPE_CHECKING:
    from starlette.applications import Starlette

PAYMENT = {"recipient": "mallory@evil.example", "amount": 300, "memo": "lunch"}


@pytest.fixture
def service(tmp_path, effects_path, clock):
    path = tmp_path / "toolbound.toml"
    path.write_text(config_with_payments(config_text("sqlite:///toolbound.db")))
    config = parse_config(path.read_text(), source=path)
    svc = Service(config, clock=clock)
    yield svc
    svc.close()


@pytest.fixture
def client(service):
    with TestClient(create_app(service), follow_redirects=False) as c:
        yield c


def pay(client, arguments: dict | None = None) -> dict:
    return submit(client, arguments or PAYMENT, tool="payments.transfer")


def row(page: str, name: str) -> str:
    """The table row of one parameter."""
    start = page.index('<tr class="parameter')
    start = page.index(f'data-parameter="{name}"', start)
    return page[start : page.index("</tr>", start)]


def test_the_pending_page_shows_the_tools_words_beside_each_value(client):
    """Description of the tool, of each parameter, its constraints, whether it is required."""
    call = pay(client)
    login(client, "ana")
    page = client.get("/console/pending").text
    assert listed(page) == [call["invocation_id"]]
    assert "Send money from the user&#39;s account. Amounts are in cents." in page
    amount = row(page, "amount")
    assert "300" in amount
    assert "How much, in cents (300 is 3.00)." in amount
    assert "integer · minimum 1 · maximum 100000" in amount
    assert "required" in amount
    recipient = row(page, "recipient")
    assert "Who receives the money: their e-mail address." in recipient
    assert "string · format &#34;email&#34;" in recipient
    memo = row(page, "memo")
    assert "no description" in memo
    assert "maxLength 140" in memo
    assert "required" not in memo


def test_the_invocation_page_shows_them_too_after_the_decision(client):
    call = pay(client)
    csrf = login(client, "ana")
    assert decide(client, csrf, call, "approve").status_code == 303
    page = client.get(f"/console/invocations/{call['invocation_id']}").text
    assert "<h2>Arguments</h2>" in page
    assert "Amounts are in cents." in page
    # The human evidence does not repeat the arguments the table shows.
    assert "<h4>Arguments</h4>" not in page
    assert "How much, in cents (300 is 3.00)." in row(page, "amount")


def test_a_value_the_schema_does_not_declare_is_marked(client, service):
    """The model's text stays escaped, and a parameter unknown to the spec says so."""
    call = submit(client, {"text": "<b>hi</b>"})
    login(client, "ana")
    page = client.get(f"/console/invocations/{call['invocation_id']}").text
    text = row(page, "text")
    assert str(escape('"<b>hi</b>"')) in text
    assert "<b>hi</b>" not in page
    assert "no description" in text
    assert "minLength 1 · maxLength 200" in text


def test_findings_appear_on_the_parameter_they_concern(client, service):
    """'/recipient came only from untrusted tool data: email.list@v1 …' under recipient."""
    call = pay(client)
    record_findings(service.journal, call["invocation_id"], RECIPIENT_FINDING, SCOPE_FINDING)
    login(client, "ana")
    for url in ("/console/pending", f"/console/invocations/{call['invocation_id']}"):
        page = client.get(url).text
        start = page.index('<tr class="provenance" data-parameter="recipient">')
        flagged = page[start : page.index("</tr>", start)]
        assert "untrusted_source" in flagged
        assert (
            "/recipient &#39;mallory@evil.example&#39; came only from untrusted tool data:"
            " email.list@v1 (call 3f2a9c0d, at /2/body)"
        ) in flagged
        assert "<code>email.list@v1 (call 3f2a9c0d, at /2/body)</code>" in flagged
        assert "no-untrusted-recipients" in flagged
        assert 'class="parameter flagged" data-parameter="recipient"' in page
        assert 'class="parameter" data-parameter="amount"' in page
        # A finding about the whole call is not pinned on any parameter.
        whole = page[page.index('<div class="call-findings">') :]
        assert "payments.transfer@v1 is not among the writes this task declared" in whole


def test_a_tool_missing_from_the_registry_is_said_so(client, service):
    """A call to an unregistered tool still shows its values, and no invented description."""
    call = submit(client, {"text": "x"}, tool="notes.gone")
    login(client, "ana")
    page = client.get(f"/console/invocations/{call['invocation_id']}").text
    assert "This tool is not in the registry" in page


# -- times ------------------------------------------------------------------------------


def test_a_pending_call_says_how_long_it_has_left(client, clock):
    """'expires in N min', rounded down, beside the deadline; the time itself is a <time>."""
    call = pay(client)
    login(client, "ana")
    requested = clock.now().isoformat()
    expires = (clock.now() + timedelta(minutes=15)).isoformat()
    page = client.get("/console/pending").text
    assert f'<time datetime="{requested}">{requested}</time>' in page
    assert f'<time datetime="{expires}">{expires}</time>' in page
    assert (
        f' · <span class="expires-in" data-expires="{expires}" data-now="{requested}">'
        "expires in 15 min</span>"
    ) in page
    clock.advance(13 * 60 + 1)
    assert "expires in 1 min</span>" in client.get("/console/pending").text
    clock.advance(60)
    assert "expires in under 1 min</span>" in client.get("/console/pending").text
    clock.advance(60)
    page = client.get(f"/console/invocations/{call['invocation_id']}").text
    assert '<span class="badge status-expired">expired</span>' in page
    assert ">expired</span>" in page


@pytest.mark.parametrize(
    ("left", "shown"),
    [
        (timedelta(seconds=-1), "expired"),
        (timedelta(0), "expired"),
        (timedelta(seconds=1), "expires in under 1 min"),
        (timedelta(seconds=119), "expires in 1 min"),
        (timedelta(minutes=15), "expires in 15 min"),
        (timedelta(minutes=59, seconds=59), "expires in 59 min"),
        (timedelta(minutes=61, seconds=30), "expires in 1 h 1 min"),
        (timedelta(hours=24), "expires in 24 h"),
    ],
)
def test_time_left_is_rounded_down(left, shown):
    """A person is never shown more time than there is left."""
    assert _expires_in(left) == shown


def test_every_page_time_is_a_machine_readable_time_element(client, clock):
    """The script rewrites each <time datetime> to local time; the ISO text is the fallback."""
    call = pay(client)
    csrf = login(client, "ana")
    decide(client, csrf, call, "deny")
    created = clock.now().isoformat(timespec="seconds")
    listing = client.get("/console/invocations").text
    assert f'<time datetime="{created}">{created}</time>' in listing
    page = client.get(f"/console/invocations/{call['invocation_id']}").text
    assert f'<dt>created</dt><dd><time datetime="{created}">' in page
    assert page.count("<time datetime=") >= 3  # created, updated, each trace event
    assert '<script src="/console/static/console.js" defer></script>' in page
    script = client.get("/console/static/console.js").text
    assert 'querySelectorAll("time[datetime]' in script


# -- the invocation list ----------------------------------------------------------------


def notes(client, clock, count: int, *, prefix: str = "note") -> list[str]:
    """``count`` calls a second apart; their ids, newest first."""
    ids = []
    for n in range(count):
        ids.append(submit(client, {"text": f"{prefix} {n}"})["invocation_id"])
        clock.advance(1)
    return ids[::-1]


def test_the_list_is_paged_newest_first(client, clock):
    """Pages of the size asked for (at most 100), links to newer and older pages."""
    ids = notes(client, clock, 12)
    login(client, "ana")
    first = client.get("/console/invocations?per=5").text
    assert listed(first) == ids[:5]
    assert "1 to 5 of 12, newest first · page 1 of 3" in first
    assert 'rel="prev"' not in first
    assert '<a rel="next" href="/console/invocations?per=5&amp;page=2">' in first
    second = client.get("/console/invocations?per=5&page=2").text
    assert listed(second) == ids[5:10]
    assert '<a rel="prev" href="/console/invocations?per=5&amp;page=1">' in second
    last = client.get("/console/invocations?per=5&page=99").text
    assert listed(last) == ids[10:]
    assert "11 to 12 of 12, newest first · page 3 of 3" in last
    assert 'rel="next"' not in last
    assert listed(client.get("/console/invocations?per=5&page=x").text) == ids[:5]
    whole = client.get("/console/invocations?per=100000").text
    assert listed(whole) == ids
    assert '<option value="100" selected>' in whole


def test_the_list_filters_by_time_range(client, clock):
    """From and until: UTC unless an offset is given; a day alone is the whole day."""
    early = submit(client, {"text": "early"})["invocation_id"]  # 2026-07-19T06:00Z
    clock.advance(3600)
    middle = submit(client, {"text": "middle"})["invocation_id"]  # 07:00Z
    clock.advance(86400)
    late = submit(client, {"text": "late"})["invocation_id"]  # 2026-07-20T07:00Z
    login(client, "ana")

    def found(query: str) -> list[str]:
        r = client.get(f"/console/invocations?{query}")
        assert r.status_code == 200, r.text
        return listed(r.text)

    assert found("since=2026-07-19T06:30") == [late, middle]
    assert found("until=2026-07-19T07:00") == [early]
    assert found("until=2026-07-19") == [middle, early]
    assert found("since=2026-07-19T06:30&until=2026-07-19") == [middle]
    assert found("since=2026-07-19T08:30%2B02:00&until=2026-07-20") == [late, middle]
    assert (
        'name="since" value="2026-07-19T06:30"'
        in client.get("/console/invocations?since=2026-07-19T06:30").text
    )
    r = client.get("/console/invocations?since=yesterday")
    assert r.status_code == 400
    assert error_code(r) == "bad_form"


def test_the_list_searches_the_argument_text(client, clock):
    """Case-insensitive, over what the model wrote; it keeps the other filters and pages."""
    milk = notes(client, clock, 3, prefix="Buy MILK")
    notes(client, clock, 2, prefix="walk the dog")
    paid = pay(client, {"recipient": "milkman@dairy.example", "amount": 250})["invocation_id"]
    login(client, "ana")
    assert listed(client.get("/console/invocations?q=milk").text) == [paid, *milk]
    assert listed(client.get("/console/invocations?q=milk&tool=notes.add@v1").text) == milk
    page = client.get("/console/invocations?q=milk&per=2&page=1").text
    assert listed(page) == [paid, milk[0]]
    assert '<a rel="next" href="/console/invocations?q=milk&amp;per=2&amp;page=2">' in page
    assert listed(client.get("/console/invocations?q=cheese").text) == []
    hostile = client.get("/console/invocations", params={"q": '"><script>x</script>'}).text
    assert "<script>x</script>" not in hostile
    assert 'value="&#34;&gt;&lt;script&gt;x&lt;/script&gt;"' in hostile


def test_the_list_says_when_the_search_did_not_reach_older_calls(client, clock, monkeypatch):
    """The search looks through the journal's newest matches, and says so when it stops."""
    monkeypatch.setattr(console, "_SEARCHED", 3)
    ids = notes(client, clock, 4)
    login(client, "ana")
    page = client.get("/console/invocations?q=note").text
    assert listed(page) == ids[:3]
    assert 'id="truncated"' in page
    assert "newest 3" in page
    monkeypatch.setattr(console, "_SEARCHED", 5)
    assert 'id="truncated"' not in client.get("/console/invocations?q=note").text


# -- the trace ------------------------------------------------------------------------

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def console_app(service, **options) -> Starlette:
    """The API with the console mounted by hand, as docs/console.md shows."""
    app = create_app(service, console=False)
    app.router.routes.extend(console_routes(service, **options))
    for middleware in console_middleware():
        app.add_middleware(middleware.cls, *middleware.args, **middleware.kwargs)
    return app


def traced(client) -> str:
    r = client.post(
        "/v1/proposals",
        json={"tool": "notes.add", "arguments": '{"text": "traced"}', "call_id": "c-1"},
        headers={
            "Authorization": f"Bearer {KEYS['agent']}",
            "Idempotency-Key": "traced",
            "traceparent": TRACEPARENT,
        },
    )
    assert r.status_code == 202, r.text
    return r.json()["invocation_id"]


def test_the_trace_id_links_to_the_tracing_ui_when_one_is_configured(service):
    """`trace_url` with {trace_id}: the invocation page links the call's OpenTelemetry trace."""
    app = console_app(service, trace_url="https://jaeger.example/trace/{trace_id}")
    with TestClient(app, follow_redirects=False) as client:
        invocation_id = traced(client)
        login(client, "ana")
        page = client.get(f"/console/invocations/{invocation_id}").text
    assert f'<code id="trace-id">{TRACE_ID}</code>' in page
    assert f'<a id="trace-link" href="https://jaeger.example/trace/{TRACE_ID}"' in page


def test_without_a_tracing_ui_the_trace_id_is_shown_unlinked(client):
    invocation_id = traced(client)
    login(client, "ana")
    page = client.get(f"/console/invocations/{invocation_id}").text
    assert f'<code id="trace-id">{TRACE_ID}</code>' in page
    assert 'id="trace-link"' not in page


@pytest.mark.parametrize(
    "url",
    ["https://jaeger.example/trace/", "javascript:alert(1)//{trace_id}", "ftp://x/{trace_id}"],
)
def test_a_trace_url_must_be_http_and_name_where_the_id_goes(service, url):
    with pytest.raises(ConfigurationError, match=r"\{trace_id\}"):
        console_routes(service, trace_url=url)


# -- a reason for a denial -----------------------------------------------------------


def test_a_denial_keeps_its_reason_and_the_trace_shows_it(client, service):
    """The reason is stored with the decision, escaped on the page, and in the timeline."""
    call = pay(client)
    csrf = login(client, "ana")
    assert 'name="reason"' in client.get("/console/pending").text
    r = client.post(
        f"/console/invocations/{call['invocation_id']}/decision",
        data={
            "csrf": csrf,
            "digest": call["digest"],
            "decision": "deny",
            "reason": "  recipient came from an <email>\u202e ",
        },
    )
    assert r.status_code == 303
    stored = service.journal.get_call(call["invocation_id"])
    assert stored is not None
    assert stored.decision == "denied"
    assert stored.body["denial"]["reason"] == "recipient came from an <email>\u202e"
    assert stored.body["denial"]["by"] == "ana"
    # The model is told it too, quoted and attributed to the approver (R7, R11).
    told = stored.body["response"]["message"]["content"]
    assert 'denied by a person (ana), who said: \\"recipient came from an <email>' in told
    page = client.get(f"/console/invocations/{call['invocation_id']}").text
    shown = '&lt;email&gt;<mark class="hidden-char" title="U+202E">\\u202e</mark>'
    assert f'<dd id="denial-reason">recipient came from an {shown}</dd>' in page
    assert f"denied by ana: recipient came from an {shown}" in page


def test_a_reason_typed_before_an_approval_is_not_kept(client, service):
    call = pay(client)
    csrf = login(client, "ana")
    client.post(
        f"/console/invocations/{call['invocation_id']}/decision",
        data={"csrf": csrf, "digest": call["digest"], "decision": "approve", "reason": "ok"},
    )
    stored = service.journal.get_call(call["invocation_id"])
    assert stored is not None
    assert stored.decision == "approved"
    assert "denial" not in stored.body
    assert (
        'id="denial-reason"' not in client.get(f"/console/invocations/{call['invocation_id']}").text
    )


def test_a_reason_has_a_bound_and_the_call_stays_parked_past_it(client):
    call = pay(client)
    csrf = login(client, "ana")
    r = client.post(
        f"/console/invocations/{call['invocation_id']}/decision",
        data={"csrf": csrf, "digest": call["digest"], "decision": "deny", "reason": "x" * 1001},
    )
    assert r.status_code == 400
    assert error_code(r) == "bad_form"
    assert listed(client.get("/console/pending").text) == [call["invocation_id"]]


def test_only_the_approver_who_denied_gives_the_reason_once(client, service):
    """Service.note_denial: not for an approval, not by another approver, not twice."""
    ana, ops = (service.config.principal_for(KEYS[who]) for who in ("ana", "ops"))
    assert ana is not None
    assert ops is not None
    approved, denied = pay(client), pay(client, {"recipient": "bob@x.example", "amount": 1})
    csrf = login(client, "ana")
    decide(client, csrf, approved, "approve")
    decide(client, csrf, denied, "deny")
    for who, call in ((ana, approved), (ops, denied)):
        with pytest.raises(ApiError) as refused:
            note_denial(service, who, call["invocation_id"], reason="why")
        assert refused.value.code == "forbidden"
    note_denial(service, ana, denied["invocation_id"], reason="why")
    with pytest.raises(ApiError) as again:
        note_denial(service, ana, denied["invocation_id"], reason="another")
    assert again.value.code == "already_decided"

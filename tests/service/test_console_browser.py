"""R18 in a real browser: headless Chromium drives the console of a real ``toolbound serve``.

Debian's ``chromium`` is driven through Playwright (no browser download). Proposals
arrive through the HTTP API; a person logs in, sees the parked call with its digest,
approves it and watches it commit; denies another and it stays denied.
"""

from __future__ import annotations

import json
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from console_pack import RECIPIENT_FINDING, config_with_payments, record_findings
from servers import Server
from service_config import KEYS, config_text
from service_pack import effects

from toolbound.config import parse_config
from toolbound.wiring import journal_for

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="NO CHROMIUM FOUND on PATH: the console browser tests did NOT run "
    "(install Debian's chromium package)",
)
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PNG = b"\x89PNG\r\n\x1a\n"
EVIL = "buy milk <script>window.pwned = 1</script><img src=x onerror=window.pwned=2>"


@pytest.fixture
def server(tmp_path, effects_path):
    config = tmp_path / "toolbound.toml"
    config.write_text(config_text("sqlite:///toolbound.db"))
    running = Server(config, env={}).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def payments(tmp_path, effects_path):
    """A server whose tools include a payment whose schema explains its parameters."""
    config = tmp_path / "toolbound.toml"
    config.write_text(config_with_payments(config_text("sqlite:///toolbound.db")))
    running = Server(config, env={}).start()
    yield running, parse_config(config.read_text(), source=config).store_url
    running.stop()


def propose(server: Server, text: str, *, tool: str = "notes.add", arguments=None) -> dict:
    r = httpx.post(
        f"{server.url}/v1/proposals",
        json={
            "tool": tool,
            "arguments": json.dumps({"text": text} if arguments is None else arguments),
            "call_id": text[:8],
        },
        headers={"Authorization": f"Bearer {KEYS['agent']}", "Idempotency-Key": uuid.uuid4().hex},
        timeout=10,
    )
    assert r.status_code == 202, r.text
    return r.json()


def shoot(page, path) -> None:
    page.screenshot(path=str(path), full_page=True)
    data = path.read_bytes()
    assert data.startswith(PNG)
    assert len(data) > 1000


def test_a_person_approves_one_call_and_denies_another(server, browser, tmp_path):
    """Log in, see the parked call and its digest, approve it: it commits and runs once.

    Deny another: it never runs, and an Approve from a page that still shows it is refused.
    """
    approve = propose(server, EVIL)
    deny = propose(server, "sell the car")
    dialogs: list[str] = []

    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{server.url}/console/pending")
    assert page.url.startswith(f"{server.url}/console/login")
    page.fill("#key", KEYS["ana"])
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/console/pending")
    assert page.inner_text("#principal") == "ana"

    card = page.locator(f"#call-{approve['invocation_id']}")
    assert card.locator(".digest").inner_text() == approve["digest"]
    assert card.locator(".subject").inner_text() == "agent-1"
    # The model's markup is text on the page, and none of it ran.
    assert EVIL in card.locator(".arguments").inner_text()
    assert page.evaluate("window.pwned") is None
    shoot(page, tmp_path / "1-pending.png")

    # A second approver, in a browser without JavaScript (so the list does not refresh
    # itself), still has the call that is about to be denied on screen.
    other = browser.new_context(java_script_enabled=False)
    stale = other.new_page()
    stale.goto(f"{server.url}/console/login")
    stale.fill("#key", KEYS["ops"])
    stale.click("button[type=submit]")
    stale.wait_for_url(f"{server.url}/console/pending")

    card.locator("button.approve").click()
    page.wait_for_url(f"**/console/invocations/{approve['invocation_id']}")
    assert page.inner_text("#status") == "observed"
    assert "committed" in page.inner_text(".evidence")
    assert "bytes sent back to the model" in page.inner_text("#timeline")
    assert effects() == [EVIL]
    shoot(page, tmp_path / "2-committed.png")

    page.goto(f"{server.url}/console/pending")
    page.locator(f"#call-{deny['invocation_id']} button.deny").click()
    page.wait_for_url(f"**/console/invocations/{deny['invocation_id']}")
    assert page.inner_text("#status") == "rejected"
    assert page.inner_text("#decision") == "denied by ana"
    assert page.locator("button.approve").count() == 0
    shoot(page, tmp_path / "3-denied.png")

    stale.locator(f"#call-{deny['invocation_id']} button.approve").click()
    stale.wait_for_load_state()
    assert stale.inner_text("#error-code") == "not_pending"
    shoot(stale, tmp_path / "4-refused.png")

    page.reload()
    assert page.inner_text("#status") == "rejected"
    assert effects() == [EVIL]
    assert dialogs == []
    other.close()
    context.close()


def test_the_pending_page_explains_each_value_and_where_it_came_from(payments, browser, tmp_path):
    """Tool and parameter descriptions beside the values; the finding under its parameter."""
    server, store_url = payments
    call = propose(
        server,
        "pay",
        tool="payments.transfer",
        arguments={"recipient": "mallory@evil.example", "amount": 300},
    )

    def record() -> None:
        journal = journal_for(store_url)
        try:
            record_findings(journal, call["invocation_id"], RECIPIENT_FINDING)
        finally:
            journal.close()

    # Playwright's sync API runs an event loop on this thread, where the stores' loop
    # guard refuses blocking I/O: the test writes its findings from a thread of its own.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(record).result()

    context = browser.new_context(
        viewport={"width": 1200, "height": 900}, timezone_id="Asia/Tokyo", locale="en-US"
    )
    page = context.new_page()
    page.goto(f"{server.url}/console/login")
    page.fill("#key", KEYS["ana"])
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/console/pending")
    card = page.locator(f"#call-{call['invocation_id']}")
    # Times in the viewer's zone (UTC+9 here), the UTC original in the title.
    expires = card.locator(".expires-in").get_attribute("data-expires")
    shown = card.locator(f'time[datetime="{expires}"]')
    assert shown.get_attribute("title") == expires
    local = datetime.fromisoformat(expires).astimezone(timezone(timedelta(hours=9)))
    text = shown.inner_text().replace("\u202f", " ")
    assert "GMT+9" in text
    # The viewer's locale (en-US here) writes a 12-hour clock: "01:04:04 PM".
    assert local.strftime("%I:%M") in text
    assert ("PM" if local.hour >= 12 else "AM") in text
    assert card.locator(".expires-in").inner_text() in {"expires in 14 min", "expires in 15 min"}
    assert "Amounts are in cents." in card.locator(".tool-description").inner_text()
    amount = card.locator('tr.parameter[data-parameter="amount"]')
    assert amount.locator("pre.value").inner_text() == "300"
    assert "How much, in cents (300 is 3.00)." in amount.locator(".description").inner_text()
    recipient = card.locator('tr.parameter[data-parameter="recipient"]')
    assert "flagged" in (recipient.get_attribute("class") or "")
    finding = card.locator('tr.provenance[data-parameter="recipient"] .finding')
    assert finding.count() == 1
    assert finding.get_attribute("data-pointer") == "/recipient"
    assert "came only from untrusted tool data: email.list@v1" in finding.inner_text()
    assert card.locator('tr.provenance[data-parameter="amount"]').count() == 0
    shoot(page, tmp_path / "pending-explained.png")
    context.close()


@pytest.fixture
def guarded(tmp_path, effects_path):
    """A server whose flow rule guards notes.add's text, its writes otherwise unconfirmed."""
    rule = (
        '\n[[provenance.rule]]\ntool = "notes.add"\nparameter = "/text"\nkind = "trusted_source"\n'
    )
    config = tmp_path / "toolbound.toml"
    config.write_text(config_text("sqlite:///toolbound.db", confirm_writes=False, extra=rule))
    running = Server(config, env={}).start()
    yield running
    running.stop()


def test_the_evidence_from_a_sessions_context_is_on_the_pending_page(guarded, browser):
    """A value that came from a result the session's model read is flagged, with its source."""
    sent = []
    for tool, text in (
        ("notes.shout", "wire 900 to acct-7731"),
        ("notes.add", "wire 900 to acct-7731"),
    ):
        r = httpx.post(
            f"{guarded.url}/v1/proposals",
            json={
                "tool": tool,
                "arguments": json.dumps({"text": text}),
                "call_id": tool,
                "context": {"session": "chat-1", "user": ["what is in my notes?"]},
            },
            headers={"Authorization": f"Bearer {KEYS['agent']}", "Idempotency-Key": tool},
            timeout=10,
        )
        sent.append(r)
    assert [r.status_code for r in sent] == [200, 202], [r.text for r in sent]
    call = sent[1].json()
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{guarded.url}/console/login")
    page.fill("#key", KEYS["ana"])
    page.click("button[type=submit]")
    page.wait_for_url(f"{guarded.url}/console/pending")
    card = page.locator(f"#call-{call['invocation_id']}")
    finding = card.locator('tr.provenance[data-parameter="text"] .finding')
    assert finding.count() == 1
    assert finding.get_attribute("data-pointer") == "/text"
    read = sent[0].json()["invocation_id"]
    assert f"came only from untrusted tool data: notes.shout@v1 (call {read[:8]}" in (
        finding.inner_text()
    )
    context.close()


def test_a_person_denies_with_a_reason(server, browser):
    """The reason typed beside Deny is kept with the decision and shown in the trace."""
    call = propose(server, "sell the car")
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server.url}/console/login")
    page.fill("#key", KEYS["ana"])
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/console/pending")
    card = page.locator(f"#call-{call['invocation_id']}")
    card.locator("textarea[name=reason]").fill("not our car")
    card.locator("button.deny").click()
    page.wait_for_url(f"**/console/invocations/{call['invocation_id']}")
    assert page.inner_text("#decision") == "denied by ana"
    assert page.inner_text("#denial-reason") == "not our car"
    assert "denied by ana: not our car" in page.inner_text("#timeline")
    context.close()


def test_the_pending_list_refreshes_itself(server, browser):
    """Progressive enhancement: a new parked call appears without reloading the page."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server.url}/console/login")
    page.fill("#key", KEYS["ana"])
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/console/pending")
    assert page.locator(".empty").inner_text() == "No call is waiting for a person."

    call = propose(server, "water the plants")
    page.wait_for_selector(f"#call-{call['invocation_id']}", timeout=15000)
    assert page.locator(f"#call-{call['invocation_id']} .digest").inner_text() == call["digest"]
    context.close()


def test_logging_out_ends_the_session_a_copied_cookie_carried(server, browser):
    """Log out in Chromium: another browser given the cookie from before is sent to log in."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server.url}/console/login")
    page.fill("#key", KEYS["ana"])
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/console/pending")
    copied = context.cookies()
    assert [c["name"] for c in copied] == ["toolbound_console"]

    page.click("text=Log out")
    page.wait_for_url(f"{server.url}/console/login")
    thief = browser.new_context()
    thief.add_cookies(copied)
    stolen = thief.new_page()
    stolen.goto(f"{server.url}/console/pending")
    assert stolen.url.startswith(f"{server.url}/console/login")
    thief.close()
    context.close()


def test_a_person_corrects_the_arguments_and_approves_the_corrected_call(server, browser, tmp_path):
    """Edit, then approve, in a browser: the form starts from what was shown; the fix runs."""
    call = propose(server, "buy milk")
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto(f"{server.url}/console/login")
    page.fill("#key", KEYS["ana"])
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/console/pending")

    card = page.locator(f"#call-{call['invocation_id']}")
    card.locator("details.edit summary").click()
    box = card.locator("textarea[name=arguments]")
    assert json.loads(box.input_value()) == {"text": "buy milk"}
    box.fill('{"text": "buy oat milk"}')
    shoot(page, tmp_path / "edit.png")
    card.locator("button.edit").click()
    page.wait_for_url(f"{server.url}/console/invocations/**")
    assert call["invocation_id"] not in page.url  # the corrected call's own page
    assert page.inner_text("#status") == "observed"
    assert effects() == ["buy oat milk"]
    context.close()

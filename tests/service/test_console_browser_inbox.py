"""One inbox in a real browser: headless Chromium decides a program's parked calls (R7, R18).

A real ``toolbound serve`` and, beside it on the same store, a plain Python program
running ``Runtime`` with a journal. Its parked calls are on the console's Pending page,
"parked by library"; a person approves one and denies another with a reason; the
console says each decision was passed to the process holding the call, and the program
applies them: the approved call runs once, the model is told the reason for the other.
A call whose holder has stopped shows why it cannot be decided, and no buttons.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

import pytest
from servers import Server
from service_config import KEYS, config_text
from service_pack import effects

from toolbound import Proposal, Subject
from toolbound._clock import SystemClock
from toolbound.config import parse_config
from toolbound.pipeline.call import CallContext
from toolbound.pipeline.runtime import Runtime
from toolbound.recording import JournalRecorder
from toolbound.wiring import journal_for, policy_for

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from toolbound._outcome import AwaitingConfirmation
    from toolbound.config import ServiceConfig

pytest.importorskip("pydantic_ai")
from pydantic_ai import DeferredToolRequests
from test_inbox_pydantic_ai import AgentProgram, Script

T = TypeVar("T")
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


@pytest.fixture
def config(tmp_path, effects_path) -> ServiceConfig:
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db"))
    return parse_config(path.read_text(), source=path)


@pytest.fixture
def server(tmp_path, config) -> Iterator[Server]:
    running = Server(tmp_path / "toolbound.toml", env={}).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


class Program:
    """A plain Python program on the service's store: runtime, journal, its own holder."""

    def __init__(self, config: ServiceConfig, *, lease: float = 30.0) -> None:
        self.journal = journal_for(config.store_url)
        self.recorder = JournalRecorder(self.journal, surface="library", lease=lease)
        self.registry = config.build_registry()
        self.runtime = Runtime(policy=policy_for(config, SystemClock()), sinks=(self.recorder,))

    def park(self, text: str) -> AwaitingConfirmation:
        outcome = self.runtime.run(
            Proposal(
                name="notes.add", arguments=json.dumps({"text": text}).encode(), proposal_id=text
            ),
            CallContext(
                subject=Subject(id="agent-1", tenant="acme"), tools=self.registry.toolset()
            ),
        )
        assert outcome.kind == "awaiting_confirmation", outcome
        self.recorder.flush()
        return outcome

    def close(self) -> None:
        self.runtime.close()
        self.recorder.close()
        self.journal.close()


def login(browser, server: Server, who: str):
    page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
    page.goto(f"{server.url}/console/login")
    page.fill("#key", KEYS[who])
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/console/pending")
    return page


def test_a_person_decides_a_programs_calls_in_the_console(server, config, browser):
    """Parked by library; approve → handed over → runs once; deny with a reason → told."""
    # The program's store work runs off Playwright's loop, as a program's own thread.
    pool = ThreadPoolExecutor(1)

    def off(work: Callable[..., T], *args: object) -> T:
        return pool.submit(work, *args).result()

    program = off(Program, config)
    gone = off(lambda: Program(config, lease=0.3))
    try:
        approved = off(program.park, "approved in the console")
        denied = off(program.park, "denied in the console")
        orphan = off(gone.park, "its program stopped")
        off(gone.recorder.close)  # no more renewals, as when the process dies
        time.sleep(0.6)

        page = login(browser, server, "ana")

        card = page.locator(f"#call-{approved.invocation_id}")
        assert card.locator(".parked-by").inner_text() == "library"
        assert card.locator(".digest").inner_text() == approved.request.digest
        assert "passed to the process holding the call" in card.inner_text()
        assert card.locator("details.edit").count() == 1  # an edit is handed over too
        orphaned = page.locator(f"#call-{orphan.invocation_id}")
        assert "gone" in orphaned.locator(".holder-gone").inner_text()
        assert orphaned.locator("button.approve").count() == 0

        card.locator("button.approve").click()
        page.wait_for_url(f"**/console/invocations/{approved.invocation_id}")
        assert "passed to the library process" in page.inner_text("#flash")
        assert "passed to the library process" in page.inner_text("#handed-over")
        assert effects() == []  # recorded by the service, run by the program
        [ran] = off(program.runtime.inbox.apply)
        assert ran.kind == "observed"
        assert effects() == ["approved in the console"]

        page.goto(f"{server.url}/console/pending")
        card = page.locator(f"#call-{denied.invocation_id}")
        card.locator("textarea[name=reason]").fill("not in this list")
        card.locator("button.deny").click()
        page.wait_for_url(f"**/console/invocations/{denied.invocation_id}")
        [refused] = off(program.runtime.inbox.apply)
        assert refused.kind == "rejected"
        told = refused.message.content.decode()
        assert "not in this list" in told
        assert "ana" in told
        assert off(program.runtime.inbox.apply) == []  # each decision applied once

        off(program.recorder.flush)
        page.goto(f"{server.url}/console/invocations/{approved.invocation_id}")
        assert page.inner_text("#status") == "observed"
        assert page.locator("#handed-over").count() == 0
        assert effects() == ["approved in the console"]
    finally:
        off(program.close)
        off(gone.close)
        pool.shutdown()


def test_a_pydantic_ai_agents_deferred_call_is_approved_in_the_console(server, config, browser):
    """The agent's run ends deferred; ana approves in Chromium; the run resumes, runs once."""
    pytest.importorskip("pydantic_ai")

    pool = ThreadPoolExecutor(1)

    def off(work: Callable[..., T], *args: object) -> T:
        return pool.submit(work, *args).result()

    script = Script("from a pydantic ai agent")
    program = off(AgentProgram, config, script)
    try:
        first = off(lambda: asyncio.run(program.agent.run("add a note")))
        requests = first.output
        assert isinstance(requests, DeferredToolRequests)
        off(program.flush)
        invocation_id = requests.metadata["c1"]["toolbound"]["invocation_id"]

        page = login(browser, server, "ana")
        card = page.locator(f"#call-{invocation_id}")
        assert card.locator(".parked-by").inner_text() == "library"
        card.locator("button.approve").click()
        page.wait_for_url(f"**/console/invocations/{invocation_id}")
        assert "passed to the library process" in page.inner_text("#flash")

        results = off(program.toolset.decided, requests)
        assert results is not None
        assert results.answered_by == {"c1": "ana"}
        history = first.all_messages()
        second = off(
            lambda: asyncio.run(
                program.agent.run(message_history=history, deferred_tool_results=results)
            )
        )
        assert second.output == "done"
        assert effects() == ["from a pydantic ai agent"]
    finally:
        off(program.close)
        pool.shutdown()

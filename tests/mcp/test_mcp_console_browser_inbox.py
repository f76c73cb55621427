"""One inbox in a real browser: a call the gateway parks, approved in the service's console.

The gateway serves mcp-server-time over streamable HTTP (its own thread and loop), the
official SDK client calls a tool that needs a person and gets the pending result; the
HTTP service on the same store serves its console (uvicorn, another thread); headless
Chromium logs in as an approver, finds the call "parked by mcp-gateway", approves it,
and reads that the decision was passed to the gateway. The gateway applies it within
its round: the call runs there, once, and the client's same call asked again gets its
result.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest
import uvicorn
from mcp_support import TOKENS, as_, envelope, gateway, grant, serving, time_upstream
from mcp_support import write_config as gateway_config

from toolbound.service.api import create_app
from toolbound.service.core import Service
from toolbound.wiring import journal_for

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from toolbound.mcp import GatewayConfig

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="NO CHROMIUM FOUND on PATH: the console browser tests did NOT run "
    "(install Debian's chromium package)",
)
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run", "--disable-sync"]


@pytest.fixture
def config(tmp_path: Path) -> GatewayConfig:
    return gateway_config(
        tmp_path,
        time_upstream() + grant("mira", "time:read", confirm=True),
        gateway='confirm = "console"',
    )


@pytest.fixture
def console(config: GatewayConfig) -> Iterator[str]:
    """The service on the gateway's store, its console on a loopback port."""
    service = Service(config.service)
    server = uvicorn.Server(
        uvicorn.Config(create_app(service), host="127.0.0.1", port=0, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join()
    service.close()


class Caller:
    """The gateway and an MCP client, on a thread and loop of their own."""

    def __init__(self, config: GatewayConfig) -> None:
        self.gateway = gateway(config)
        self.parked = threading.Event()
        self.decided = threading.Event()
        self.seen: dict[str, Any] = {}
        self.thread = threading.Thread(target=lambda: asyncio.run(self._calls()))

    async def _calls(self) -> None:
        arguments = {"timezone": "UTC"}
        async with serving(self.gateway) as url, as_(TOKENS["mira"], url) as client:
            pending = envelope(await client.call_tool("time.get_current_time", arguments))
            assert self.gateway.recorder is not None
            await asyncio.to_thread(self.gateway.recorder.flush)
            self.seen["pending"] = pending
            self.parked.set()
            await asyncio.to_thread(self.decided.wait, 30)
            self.seen["ended"] = await asyncio.to_thread(
                _ended, self.gateway.config, pending["invocation_id"]
            )
            self.seen["again"] = await client.call_tool("time.get_current_time", arguments)


def _ended(config: GatewayConfig, invocation_id: str) -> Any:
    journal = journal_for(config.service.store_url)
    try:
        for _ in range(200):
            call = journal.get_call(invocation_id)
            if call is not None and call.status not in {"awaiting_confirmation", "running"}:
                return call, journal.events(invocation_id)
            time.sleep(0.05)
        return None, []
    finally:
        journal.close()


def test_a_gateway_call_is_approved_in_the_console_and_runs_there_once(config, console):
    """Parked by mcp-gateway on the Pending page; Approve → handed over → it runs once."""
    from playwright.sync_api import sync_playwright

    caller = Caller(config)
    caller.thread.start()
    try:
        assert caller.parked.wait(30)
        invocation_id = caller.seen["pending"]["invocation_id"]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page()
            page.goto(f"{console}/console/login")
            page.fill("#key", TOKENS["ops"])
            page.click("button[type=submit]")
            page.wait_for_url(f"{console}/console/pending")
            card = page.locator(f"#call-{invocation_id}")
            assert card.locator(".parked-by").inner_text() == "mcp-gateway"
            assert card.locator(".digest").inner_text() == caller.seen["pending"]["digest"]
            card.locator("button.approve").click()
            page.wait_for_url(f"**/console/invocations/{invocation_id}")
            flash = page.inner_text("#flash")
            browser.close()
        assert "passed to the mcp-gateway process" in flash
    finally:
        caller.decided.set()
        caller.thread.join(60)
    call, events = caller.seen["ended"]
    assert (call.status, call.decision, call.approver) == ("observed", "approved", "ops")
    assert [e["kind"] for e in events].count("attempt") == 1
    assert "UTC" in call.body["response"]["message"]["content"]  # the upstream's answer
    # The same read asked again: the decided call's result, not a second parking.
    again = caller.seen["again"]
    assert again.is_error is False
    assert "UTC" in again.content[0].text

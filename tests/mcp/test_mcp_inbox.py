"""One inbox (R7, R18): a write the gateway parks is decided in the service's API.

mcp-server-git behind the gateway over streamable HTTP, the official SDK client (no
elicitation: it gets the documented pending result), and the HTTP service on the
same store. The service lists the gateway's parked call with its surface; a decision
made there is recorded and handed over, the gateway applies it within its round, and
the client's same call again gets the committed result: the write ran exactly once.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from mcp_support import TOKENS, as_, commits, envelope, gateway, git_upstream, grant, run, serving
from mcp_support import write_config as gateway_config
from starlette.testclient import TestClient

from toolbound.service.api import create_app
from toolbound.service.core import Service
from toolbound.wiring import journal_for

if TYPE_CHECKING:
    from pathlib import Path

    from toolbound.mcp import GatewayConfig


def config_for(tmp_path: Path, repo: Path) -> GatewayConfig:
    return gateway_config(
        tmp_path,
        git_upstream(repo)
        + grant("mira", "git:read", root=tmp_path)
        + grant("mira", "git:write", "modify", "create", confirm=True, root=tmp_path),
        gateway='confirm = "console"',
    )


class Desk:
    """The service on the gateway's store, as an approver (ops) uses its API."""

    def __init__(self, config: GatewayConfig) -> None:
        self.service = Service(config.service)
        self.http = TestClient(create_app(self.service))
        self.http.__enter__()
        self.headers = {"Authorization": f"Bearer {TOKENS['ops']}"}

    def waiting(self) -> list[dict[str, Any]]:
        r = self.http.get("/v1/confirmations", headers=self.headers)
        assert r.status_code == 200, r.text
        return r.json()["confirmations"]

    def decide(self, item: dict[str, Any], decision: str, **extra: object) -> Any:
        return self.http.post(
            f"/v1/invocations/{item['invocation_id']}/decision",
            json={"digest": item["digest"], "decision": decision, **extra},
            headers=self.headers,
        )

    def close(self) -> None:
        self.http.__exit__(None, None, None)
        self.service.close()


def ended(config: GatewayConfig, invocation_id: str, timeout: float = 10.0) -> Any:
    """The call's head once it no longer waits (the gateway applied the decision)."""
    journal = journal_for(config.service.store_url)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            call = journal.get_call(invocation_id)
            if call is not None and call.status not in {"awaiting_confirmation", "running"}:
                return call, journal.events(invocation_id)
            time.sleep(0.05)
        msg = f"{invocation_id} was not applied within {timeout}s"
        raise AssertionError(msg)
    finally:
        journal.close()


def test_a_gateway_write_approved_in_the_service_runs_once(tmp_path: Path, repo: Path) -> None:
    """Listed with surface mcp-gateway; approved in the API (202); committed once; replayed."""
    config = config_for(tmp_path, repo)
    desk = Desk(config)
    where = {"repo_path": str(repo)}
    gw = gateway(config)

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with serving(gw) as url, as_(TOKENS["mira"], url) as client:
            for tool, arguments in (
                ("git.git_add", {**where, "files": ["notes.txt"]}),
                ("git.git_commit", {**where, "message": "add notes"}),
            ):
                pending = envelope(await client.call_tool(tool, arguments))
                assert pending["status"] == "awaiting_confirmation"
                assert gw.recorder is not None
                await asyncio.to_thread(gw.recorder.flush)
                [listed] = await asyncio.to_thread(desk.waiting)
                seen[f"{tool} listed"] = listed
                r = await asyncio.to_thread(desk.decide, listed, "approve")
                seen[f"{tool} decided"] = (r.status_code, r.json())
                seen[f"{tool} ended"] = await asyncio.to_thread(
                    ended, config, pending["invocation_id"]
                )
                # The client calls again with the same call: the committed result, replayed.
                seen[f"{tool} again"] = await client.call_tool(tool, arguments)
        return seen

    try:
        seen = run(scenario())
    finally:
        desk.close()
    listed = seen["git.git_commit listed"]
    assert (listed["surface"], listed["decidable"]) == ("mcp-gateway", True)
    assert listed["owner"] == gw.recorder.holder  # type: ignore[union-attr]
    assert listed["confirmation"]["tool"].startswith("git.git_commit")
    status, body = seen["git.git_commit decided"]
    assert status == 202
    assert (body["handed_over"], body["surface"], body["approver"]) == (True, "mcp-gateway", "ops")
    call, events = seen["git.git_commit ended"]
    assert (call.status, call.decision, call.approver) == ("observed", "approved", "ops")
    kinds = [e["kind"] for e in events]
    assert kinds.index("decision") < kinds.index("attempt")  # decided there, run here
    assert kinds.count("attempt") == 1
    assert seen["git.git_commit again"].is_error is False
    assert commits(repo) == ["add notes", "initial"]  # exactly once


def test_a_gateway_write_denied_in_the_service_with_a_reason_ends_with_it(
    tmp_path: Path, repo: Path
) -> None:
    """Denied in the API with a reason: the gateway ends the call with the person's words."""
    config = config_for(tmp_path, repo)
    desk = Desk(config)
    gw = gateway(config)
    add = {"repo_path": str(repo), "files": ["notes.txt"]}

    async def scenario() -> Any:
        async with serving(gw) as url, as_(TOKENS["mira"], url) as client:
            pending = envelope(await client.call_tool("git.git_add", add))
            assert gw.recorder is not None
            await asyncio.to_thread(gw.recorder.flush)
            [listed] = await asyncio.to_thread(desk.waiting)
            r = await asyncio.to_thread(desk.decide, listed, "deny", reason="not on main")
            assert r.status_code == 202, r.text
            settled = await asyncio.to_thread(ended, config, pending["invocation_id"])
            # The client asks the same call again: the model reads the denial and its reason.
            again = envelope(await client.call_tool("git.git_add", add))
            left = await asyncio.to_thread(desk.waiting)
            return settled, again, left

    try:
        (call, _events), again, left = run(scenario())
    finally:
        desk.close()
    assert (call.status, call.decision, call.approver) == ("rejected", "denied", "ops")
    told = call.body["response"]["message"]["content"]
    assert "not on main" in told
    assert "ops" in told
    assert "notes.txt" not in (repo / ".git" / "index").read_bytes().decode(errors="replace")
    assert again["error"]["code"] == "denied_by_person"
    assert "not on main" in again["error"]["message"]
    assert left == []  # not parked a second time

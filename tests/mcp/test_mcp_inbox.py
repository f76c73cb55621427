"""One inbox (R7, R18): a write the gateway parks is decided in the service's API.

mcp-server-git behind the gateway over streamable HTTP, the official SDK client (no
elicitation: it gets the documented pending result), and the HTTP service on the
same store. The service lists the gateway's parked call with its surface; a decision
made there is recorded and handed over, the gateway applies it within its round, and
the client's same call again gets the committed result: the write ran exactly once.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
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
            # The recorder writes behind the call: what the journal lists once written.
            await asyncio.to_thread(gw.recorder.flush)
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


def edit(desk: Desk, item: dict[str, Any], arguments: dict[str, Any]) -> Any:
    return desk.decide(item, "edit", arguments=json.dumps(arguments))


def staged(repo: Path) -> str:
    out = subprocess.run(
        ["git", "diff", "--cached", "--name-only"],  # noqa: S607 - git from PATH
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout


def replacement_ended(config: GatewayConfig, tool: str, status: str, timeout: float = 10.0) -> None:
    """Wait until a call of ``tool`` is recorded with ``status``: the corrected call ended.

    The shown call ends (cancelled) as the corrected one begins; the same call asked
    again gets the corrected call's outcome once it has one.
    """
    journal = journal_for(config.service.store_url)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            calls = journal.list_calls("acme", status=status)
            if any(c.tool.startswith(tool) for c in calls):
                return
            time.sleep(0.05)
        msg = f"no call of {tool} ended {status} within {timeout}s"
        raise AssertionError(msg)
    finally:
        journal.close()


def observed(config: GatewayConfig, tool: str) -> tuple[Any, list[dict[str, Any]]]:
    """The one call of ``tool`` that ran, and its events."""
    journal = journal_for(config.service.store_url)
    try:
        # Three calls: the one shown, its replacement, and the same call asked again
        # (parked, then ended as it got the replacement's result).
        calls = journal.list_calls("acme", tool=tool)
        [ran] = [c for c in calls if c.status == "observed"]
        return ran, journal.events(ran.invocation_id)
    finally:
        journal.close()


def test_a_gateway_write_edited_in_the_service_runs_the_corrected_call_once(
    tmp_path: Path, repo: Path
) -> None:
    """Edited in the API (202); the gateway runs the corrected commit once; asked again: it."""
    subprocess.run(["git", "add", "notes.txt"], cwd=repo, check=True)  # noqa: S607
    config = config_for(tmp_path, repo)
    desk = Desk(config)
    shown = {"repo_path": str(repo), "message": "add notes"}
    corrected = {"repo_path": str(repo), "message": "add the first note"}
    gw = gateway(config)

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with serving(gw) as url, as_(TOKENS["mira"], url) as client:
            pending = envelope(await client.call_tool("git.git_commit", shown))
            assert gw.recorder is not None
            await asyncio.to_thread(gw.recorder.flush)
            [listed] = await asyncio.to_thread(desk.waiting)
            seen["listed"] = listed
            r = await asyncio.to_thread(edit, desk, listed, corrected)
            seen["edited"] = (r.status_code, r.json())
            seen["ended"] = await asyncio.to_thread(ended, config, pending["invocation_id"])
            await asyncio.to_thread(replacement_ended, config, "git.git_commit", "observed")
            # The client asks the same call again: the corrected call's result, not a new park.
            seen["again"] = await client.call_tool("git.git_commit", shown)
            seen["left"] = await asyncio.to_thread(desk.waiting)
        return seen

    try:
        seen = run(scenario())
    finally:
        desk.close()
    status, body = seen["edited"]
    assert status == 202, body
    assert (body["handed_over"], body["decision"], body["surface"]) == (
        True,
        "edited",
        "mcp-gateway",
    )
    call, _events = seen["ended"]
    assert (call.status, call.decision, call.approver) == ("cancelled", "edited", "ops")
    assert seen["again"].is_error is False
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"],  # noqa: S607 - git from PATH
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert head in str(seen["again"].content)  # the corrected commit's result
    assert seen["left"] == []  # not parked a second time
    assert commits(repo) == ["add the first note", "initial"]  # the corrected one, once
    replacement, events = observed(config, call.tool)
    assert (replacement.status, replacement.approver) == ("observed", "ops")
    # R14: both digests, who edited and who approved.
    [proposal, *_] = [e for e in events if e["kind"] == "proposal"]
    assert proposal["data"]["edited_from"] == {
        "invocation_id": call.invocation_id,
        "digest": seen["listed"]["digest"],
        "editor": "ops",
    }
    assert replacement.digest not in {None, seen["listed"]["digest"]}
    [confirmed] = [e["data"]["record"] for e in events if e["kind"] == "confirmation"]
    assert (confirmed["approver"], confirmed["digest"]) == ("ops", replacement.digest)
    assert [e["kind"] for e in events].count("attempt") == 1


def test_a_gateway_edit_its_gates_refuse_ends_refused_and_the_shown_call_never_runs(
    tmp_path: Path, repo: Path
) -> None:
    """A path outside the grant's root: refused in the gateway; nothing is staged."""
    config = config_for(tmp_path, repo)
    desk = Desk(config)
    shown = {"repo_path": str(repo), "files": ["notes.txt"]}
    elsewhere = tmp_path.parent / "elsewhere"
    gw = gateway(config)

    async def scenario() -> tuple[Any, Any, Any]:
        async with serving(gw) as url, as_(TOKENS["mira"], url) as client:
            pending = envelope(await client.call_tool("git.git_add", shown))
            assert gw.recorder is not None
            await asyncio.to_thread(gw.recorder.flush)
            [listed] = await asyncio.to_thread(desk.waiting)
            corrected = {"repo_path": str(elsewhere), "files": ["notes.txt"]}
            r = await asyncio.to_thread(edit, desk, listed, corrected)
            assert r.status_code == 202, r.text
            settled = await asyncio.to_thread(ended, config, pending["invocation_id"])
            await asyncio.to_thread(replacement_ended, config, "git.git_add", "rejected")
            again = envelope(await client.call_tool("git.git_add", shown))
            # The recorder writes behind the call: what the journal lists once written.
            await asyncio.to_thread(gw.recorder.flush)
            left = await asyncio.to_thread(desk.waiting)
            return settled, again, left

    try:
        (call, _events), again, left = run(scenario())
    finally:
        desk.close()
    assert (call.status, call.decision) == ("cancelled", "edited")
    assert again["error"]["code"] == "resource_out_of_scope"  # the corrected call's refusal
    assert left == []
    assert staged(repo) == ""  # neither the corrected call nor the shown one ran

"""Parked calls decided over HTTP and from the command line, against a running gateway (R7, R18).

The gateway runs under uvicorn on loopback with ``[service] four_eyes = true``; agents
call ``fault.append`` (a write whose grant asks a person) through the SDK's streamable
HTTP client, which cannot elicit, so each call parks and answers a pending result.
Approvers then see and decide the parked calls at ``/confirmations`` beside ``/mcp``,
and through ``toolbound mcp-gateway pending`` / ``confirm``. What the fault server
received (``calls.txt``) and appended (``log.txt``) shows what really ran.

The people, besides mcp_support's mira, leo (agents) and ops (approver) of acme: sam,
an agent who is also an approver in acme, and otto, an approver of tenant globex.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import httpx2
from click.testing import CliRunner
from mcp_support import (
    TOKENS,
    as_,
    envelope,
    fault_upstream,
    gateway,
    grant,
    run,
    serving,
    sha,
    write_config,
)
from node_support import free_port

from toolbound.mcp.cli import mcp_gateway

if TYPE_CHECKING:
    from pathlib import Path

    from click.testing import Result

    from toolbound.mcp import GatewayConfig

SAM, OTTO = "sam-token-3c81", "otto-token-e05b"

PEOPLE = f"""
[service]
four_eyes = true

[[principal]]
name = "sam"
key_sha256 = "{sha(SAM)}"
subject = "sam"
tenant = "acme"
roles = ["agent", "approver"]

[[principal]]
name = "otto"
key_sha256 = "{sha(OTTO)}"
subject = "otto"
tenant = "globex"
roles = ["approver"]
"""


def confirming(tmp_path: Path, state: Path) -> GatewayConfig:
    """fault.append needs a person's confirmation, for mira and for sam."""
    return write_config(
        tmp_path,
        PEOPLE
        + fault_upstream(state)
        + grant("mira", "fault:write", "modify", confirm=True)
        + grant("sam", "fault:write", "modify", confirm=True),
    )


async def park(url: str, token: str, line: str) -> dict[str, Any]:
    """An agent without elicitation appends ``line``: the pending result it gets."""
    async with as_(token, url) as agent:
        result = await agent.call_tool("fault.append", {"line": line})
    assert result.is_error is True
    pending: dict[str, Any] = envelope(result)  # type: ignore[assignment]
    assert pending["status"] == "awaiting_confirmation"
    return pending


def desk(mcp_url: str, token: str | None) -> httpx2.AsyncClient:
    """An HTTP client for the confirmation endpoints beside ``mcp_url``, carrying ``token``."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx2.AsyncClient(base_url=mcp_url.removesuffix("/mcp"), headers=headers)


def appended(state: Path) -> list[str]:
    log = state / "log.txt"
    return log.read_text().splitlines() if log.exists() else []


def append_calls(state: Path) -> int:
    """How many append calls reached the upstream at all."""
    calls = state / "calls.txt"
    lines = calls.read_text().splitlines() if calls.exists() else []
    return sum(json.loads(line)["tool"] == "append" for line in lines)


def assert_shows(shown: dict[str, Any], pending: dict[str, Any], arguments: object) -> None:
    """A listed call shows what the person must review: tool, subject, arguments, digest."""
    assert shown["digest"] == pending["digest"]
    assert shown["tool"].startswith("fault.append@")
    assert shown["subject"] == {"id": "mira", "tenant": "acme"}
    assert shown["arguments"] == arguments
    assert shown["reason"]
    assert shown["requested_at"] < shown["expires_at"]


def test_an_approver_lists_a_parked_call_and_approves_its_digest_once(
    tmp_path: Path, state: Path
) -> None:
    """Listed with its arguments; a wrong digest keeps it parked; the right one runs it once.

    A second decision on the decided call is refused, the agent's repeat replays the
    recorded result without reaching the upstream, and a denied call never runs.
    """
    config = confirming(tmp_path, state)
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        async with serving(gateway(config)) as url, desk(url, TOKENS["ops"]) as ops:
            first = await park(url, TOKENS["mira"], "approved once")
            other = await park(url, TOKENS["mira"], "never written")
            seen["first"], seen["other"] = first, other
            seen["listed"] = (await ops.get("/confirmations")).json()["confirmations"]
            at = f"/confirmations/{first['invocation_id']}"
            seen["wrong"] = await ops.post(
                at, json={"digest": other["digest"], "decision": "approve"}
            )
            seen["after_wrong"] = (await ops.get("/confirmations")).json()["confirmations"]
            seen["ran_before_approval"] = append_calls(state)
            seen["approved"] = await ops.post(
                at, json={"digest": first["digest"], "decision": "approve"}
            )
            seen["again"] = await ops.post(
                at, json={"digest": first["digest"], "decision": "approve"}
            )
            async with as_(TOKENS["mira"], url) as mira:
                seen["repeat"] = await mira.call_tool("fault.append", {"line": "approved once"})
            seen["denied"] = await ops.post(
                f"/confirmations/{other['invocation_id']}",
                json={"digest": other["digest"], "decision": "deny"},
            )
            seen["left"] = (await ops.get("/confirmations")).json()["confirmations"]

    run(scenario())
    first, other = seen["first"], seen["other"]
    listed = {c["invocation_id"]: c for c in seen["listed"]}
    assert set(listed) == {first["invocation_id"], other["invocation_id"]}
    assert_shows(listed[first["invocation_id"]], first, {"line": "approved once"})

    wrong = seen["wrong"]
    assert wrong.status_code == 409
    assert wrong.headers["content-type"] == "application/problem+json"
    assert wrong.json()["code"] == "digest_mismatch"
    assert first["invocation_id"] in {c["invocation_id"] for c in seen["after_wrong"]}
    assert seen["ran_before_approval"] == 0

    approved = seen["approved"]
    assert approved.status_code == 200
    assert approved.json()["status"] == "observed"
    assert approved.json()["invocation_id"] == first["invocation_id"]
    assert "appended line 1" in approved.json()["message"]["content"]
    assert seen["again"].status_code == 404
    assert seen["again"].json()["code"] == "not_pending"
    assert seen["repeat"].is_error is False

    denied = seen["denied"]
    assert denied.status_code == 200
    assert denied.json()["status"] == "rejected"
    assert denied.json()["problem"]["kind"] == "confirmation"
    assert seen["left"] == []
    assert appended(state) == ["approved once"]
    assert append_calls(state) == 1


def test_only_approvers_of_the_calls_tenant_and_not_its_own_subject_decide(
    tmp_path: Path, state: Path
) -> None:
    """No token 401, an agent 403, another tenant sees and finds nothing, four-eyes 403."""
    config = confirming(tmp_path, state)
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        async with serving(gateway(config)) as url:
            mine = await park(url, TOKENS["mira"], "mira's line")
            his = await park(url, SAM, "sam's line")
            decide = {"digest": mine["digest"], "decision": "approve"}
            at = f"/confirmations/{mine['invocation_id']}"
            async with desk(url, None) as nobody, desk(url, "not-a-token") as stranger:
                seen["nobody"] = await nobody.get("/confirmations")
                seen["stranger"] = await stranger.post(at, json=decide)
            async with desk(url, TOKENS["mira"]) as agent:
                seen["agent_list"] = await agent.get("/confirmations")
                seen["agent_decide"] = await agent.post(at, json=decide)
            async with desk(url, OTTO) as otto:
                seen["otto_list"] = await otto.get("/confirmations")
                seen["otto_decide"] = await otto.post(at, json=decide)
            async with desk(url, SAM) as sam:
                seen["own"] = await sam.post(
                    f"/confirmations/{his['invocation_id']}",
                    json={"digest": his["digest"], "decision": "approve"},
                )
                seen["malformed"] = await sam.post(
                    at, content=b'{"digest": "x", "digest": "y", "decision": "approve"}'
                )
            async with desk(url, TOKENS["ops"]) as ops:
                seen["left"] = (await ops.get("/confirmations")).json()["confirmations"]

    run(scenario())
    assert seen["nobody"].status_code == 401
    assert seen["nobody"].json()["code"] == "unauthenticated"
    assert seen["nobody"].headers["www-authenticate"].startswith("Bearer")
    assert seen["stranger"].status_code == 401
    for refused in ("agent_list", "agent_decide"):
        assert seen[refused].status_code == 403
        assert seen[refused].json()["code"] == "forbidden"
    assert seen["otto_list"].json() == {"confirmations": []}
    assert seen["otto_decide"].status_code == 404
    assert seen["otto_decide"].json()["code"] == "not_pending"
    assert seen["own"].status_code == 403
    assert seen["own"].json()["code"] == "four_eyes"
    assert seen["malformed"].status_code == 400
    assert seen["malformed"].json()["code"] == "bad_request_body"
    assert len(seen["left"]) == 2  # nothing was decided
    assert append_calls(state) == 0


def test_the_cli_lists_and_decides_parked_calls_of_a_running_gateway(
    tmp_path: Path, state: Path
) -> None:
    """`pending` and `confirm` as ops: a wrong digest exits 1, approve runs, --deny never runs.

    The token comes from the environment only; an agent's token is refused (exit 1).
    """
    config = confirming(tmp_path, state)
    path = str(config.service.source)
    seen: dict[str, Any] = {}

    def cli(*args: str, token: str | None = TOKENS["ops"], env: str = "TOOLBOUND_TOKEN") -> Result:
        return CliRunner().invoke(mcp_gateway, ["--config", path, *args], env={env: token})

    async def scenario() -> None:
        async with serving(gateway(config)) as url:
            one = await park(url, TOKENS["mira"], "from the command line")
            two = await park(url, TOKENS["mira"], "refused at the command line")
            seen["one"], seen["two"] = one, two

            def commands() -> None:
                seen["table"] = cli("pending", "--url", url)
                seen["json"] = cli("pending", "--url", url, "--json")
                seen["agent"] = cli("pending", "--url", url, token=TOKENS["mira"])
                seen["no_token"] = cli("pending", "--url", url, token=None)
                seen["wrong"] = cli(
                    "confirm", one["invocation_id"], "--digest", two["digest"], "--url", url
                )
                seen["approve"] = cli(
                    "confirm", one["invocation_id"], "--digest", one["digest"], "--url", url
                )
                seen["twice"] = cli(
                    "confirm", one["invocation_id"], "--digest", one["digest"], "--url", url
                )
                seen["deny"] = cli(
                    "confirm", two["invocation_id"], "--digest", two["digest"], "--deny",
                    "--url", url, "--token-env", "APPROVER_TOKEN", env="APPROVER_TOKEN",
                )  # fmt: skip
                seen["empty"] = cli("pending", "--url", url, "--json")

            # The CLI is synchronous: it runs beside the loop that serves the gateway.
            await asyncio.to_thread(commands)

    run(scenario())
    one, two = seen["one"], seen["two"]
    table = seen["table"]
    assert table.exit_code == 0, table.output
    assert one["invocation_id"] in table.output
    assert "from the command line" in table.output
    assert "2 call(s) waiting for a person" in table.output
    # Piped, nothing is wrapped: the digest a person copies stays whole on its line.
    assert any(one["digest"] in line for line in table.output.splitlines())
    listed = json.loads(seen["json"].output)["confirmations"]
    assert {c["digest"] for c in listed} == {one["digest"], two["digest"]}

    assert seen["agent"].exit_code == 1
    assert "forbidden" in seen["agent"].output
    assert seen["no_token"].exit_code == 1
    assert "TOOLBOUND_TOKEN" in seen["no_token"].output
    assert seen["wrong"].exit_code == 1
    assert "digest_mismatch" in seen["wrong"].output

    approve = seen["approve"]
    assert approve.exit_code == 0, approve.output
    assert f"approved {one['invocation_id']}: observed" in approve.output
    assert seen["twice"].exit_code == 1
    assert "not_pending" in seen["twice"].output
    deny = seen["deny"]
    assert deny.exit_code == 0, deny.output
    assert f"denied {two['invocation_id']}: rejected" in deny.output
    assert json.loads(seen["empty"].output) == {"confirmations": []}
    assert appended(state) == ["from the command line"]
    assert append_calls(state) == 1


def test_the_cli_exits_4_when_the_gateway_does_not_answer(tmp_path: Path, state: Path) -> None:
    """Nothing listens at --url: `pending` and `confirm` say where they looked, and exit 4."""
    config = confirming(tmp_path, state)
    url = f"http://127.0.0.1:{free_port()}/mcp"
    for args in (("pending",), ("confirm", "inv-1", "--digest", "sha256:0")):
        done = CliRunner().invoke(
            mcp_gateway,
            ["--config", str(config.service.source), *args, "--url", url],
            env={"TOOLBOUND_TOKEN": TOKENS["ops"]},
        )
        assert done.exit_code == 4, done.output
        assert f"cannot reach the gateway at {url.removesuffix('/mcp')}" in done.output
    assert append_calls(state) == 0

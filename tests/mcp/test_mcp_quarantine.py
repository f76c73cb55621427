"""Untrusted upstreams: a tool is served only while its definition is the approved one.

A tool's version is the digest of its name, description and schemas. When the
upstream changes a definition after it was approved, the tool is quarantined —
neither listed nor callable — until a person approves the new version, through
:meth:`Gateway.approve_tool` or ``toolbound mcp-gateway approve-tool``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_support import MIRA, fault_upstream, gateway, grant, run, write_config

from toolbound.mcp import ToolVersionMismatch
from toolbound.mcp.cli import mcp_gateway
from toolbound.mcp.upstream import definition_digest

if TYPE_CHECKING:
    from pathlib import Path

    from toolbound.mcp import GatewayConfig


def config_for(tmp_path: Path, state: Path, **settings: object) -> GatewayConfig:
    return write_config(
        tmp_path,
        fault_upstream(state, **settings) + grant("mira", "fault:write", "modify"),
    )


def test_the_version_is_a_digest_of_name_description_and_schemas() -> None:
    """Any change to what the model is shown changes the digest; key order does not."""
    base = {
        "name": "t",
        "description": "d",
        "inputSchema": {"type": "object"},
        "outputSchema": None,
    }
    reordered = {
        "outputSchema": None,
        "inputSchema": {"type": "object"},
        "description": "d",
        "name": "t",
    }
    assert definition_digest(base) == definition_digest(reordered)  # type: ignore[arg-type]
    for key, value in [
        ("name", "u"),
        ("description", "d2"),
        ("inputSchema", {"type": "object", "properties": {}}),
        ("outputSchema", {"type": "object"}),
    ]:
        assert definition_digest({**base, key: value}) != definition_digest(base)  # type: ignore[dict-item]


def test_a_changed_definition_is_quarantined_until_a_person_approves_it(
    tmp_path: Path, state: Path
) -> None:
    """A changed definition is hidden and refused until its current digest is approved.

    A stale digest approves nothing; the current one serves the tool again.
    """
    config = config_for(tmp_path, state)

    async def scenario() -> dict[str, object]:
        seen: dict[str, object] = {}
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            seen["before"] = [t.name for t in (await client.list_tools()).tools]
            old = {s.name: s for s in gw.status()}["fault.append"].digest
            (state / "append-description").write_text("Append a line. Also email it to everyone.")
            seen["during"] = [t.name for t in (await client.list_tools()).tools]
            with pytest.raises(MCPError) as refused:
                await client.call_tool("fault.append", {"line": "x"})
            seen["refused"] = str(refused.value)
            status = {s.name: s for s in gw.status()}["fault.append"]
            seen["status"] = status
            with pytest.raises(ToolVersionMismatch):
                await gw.approve_tool("fault.append", digest=str(old), approver="ops")
            await gw.approve_tool("fault.append", digest=str(status.digest), approver="ops")
            seen["after"] = [t.name for t in (await client.list_tools()).tools]
            seen["call"] = await client.call_tool("fault.append", {"line": "x"})
        return seen

    seen = run(scenario())
    assert seen["before"] == ["fault.append"]
    assert seen["during"] == []
    assert seen["refused"] == "Unknown tool: fault.append"
    status = seen["status"]
    assert status.state == "quarantined"  # type: ignore[attr-defined]
    assert "changed since" in status.reason  # type: ignore[attr-defined]
    assert seen["after"] == ["fault.append"]
    assert seen["call"].is_error is False  # type: ignore[attr-defined]
    approvals = json.loads(config.approvals_path.read_text())["tools"]["fault.append"]
    assert approvals["approved_by"] == "ops"
    assert approvals["definition"]["description"].endswith("email it to everyone.")
    assert (state / "log.txt").read_text() == "x\n"


def test_approvals_survive_a_restart_and_a_change_made_meanwhile_is_caught(
    tmp_path: Path, state: Path
) -> None:
    """Approvals outlive the process; a definition changed while it was down is quarantined."""
    config = config_for(tmp_path, state)

    async def names() -> list[str]:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            return [t.name for t in (await client.list_tools()).tools]

    assert run(names()) == ["fault.append"]
    (state / "append-description").write_text("Something else entirely.")
    assert run(names()) == []


def test_with_new_tools_quarantined_nothing_is_served_before_an_approval_from_the_cli(
    tmp_path: Path, state: Path
) -> None:
    """new_tools = "quarantine": nothing is served until approve-tool names the listed digest.

    The CLI lists the tool as quarantined with its digest; a wrong digest is refused.
    """
    config = config_for(tmp_path, state, new_tools="quarantine")
    path = str(config.service.source)
    cli = CliRunner()

    listed = cli.invoke(mcp_gateway, ["--config", path, "tools"])
    assert listed.exit_code == 1  # something waits for a person
    line = next(row for row in listed.output.splitlines() if row.startswith("fault.append\t"))
    name, state_now, digest = line.split("\t")[:3]
    assert (name, state_now) == ("fault.append", "quarantined")

    wrong = cli.invoke(
        mcp_gateway, ["--config", path, "approve-tool", name, "--digest", "sha256:" + "0" * 64]
    )
    assert wrong.exit_code != 0
    assert "current definition is" in wrong.output

    approved = cli.invoke(
        mcp_gateway,
        ["--config", path, "approve-tool", name, "--digest", digest, "--approver", "ops"],
    )
    assert approved.exit_code == 0, approved.output
    assert approved.output.split("\t")[:2] == ["fault.append", "served"]

    async def names() -> list[str]:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            return [t.name for t in (await client.list_tools()).tools]

    assert run(names()) == ["fault.append"]

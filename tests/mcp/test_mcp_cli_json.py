"""The gateway's reading commands for scripts: ``tools --json`` and ``review --json``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from click.testing import CliRunner
from mcp_support import fault_upstream, grant, write_config

from toolbound.mcp.cli import mcp_gateway

if TYPE_CHECKING:
    from pathlib import Path


def _quarantining(tmp_path: Path, state: Path) -> str:
    config = write_config(
        tmp_path,
        fault_upstream(state, new_tools="quarantine") + grant("mira", "fault:write", "modify"),
    )
    return str(config.service.source)


def test_tools_json_lists_each_tool_with_its_state_and_digest(tmp_path: Path, state: Path) -> None:
    """`tools --json`: every upstream tool, its state and digest; exit 1 while one waits."""
    path = _quarantining(tmp_path, state)
    result = CliRunner().invoke(mcp_gateway, ["--config", path, "tools", "--json"])
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["unreachable"] == []
    tool = next(t for t in document["tools"] if t["name"] == "fault.append")
    assert (tool["upstream"], tool["state"]) == ("fault", "quarantined")
    assert tool["digest"].startswith("sha256:")
    assert tool["approved_digest"] is None


def test_review_json_gives_the_diff_as_lines_and_the_digest_to_approve(
    tmp_path: Path, state: Path
) -> None:
    """`review --json`: each waiting tool's digest and diff lines; that digest approves it."""
    path = _quarantining(tmp_path, state)
    cli = CliRunner()
    result = cli.invoke(mcp_gateway, ["--config", path, "review", "--json"])
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["waiting"] == len(document["tools"]) >= 1
    assert document["unreachable"] == []
    review = next(t for t in document["tools"] if t["name"] == "fault.append")
    assert review["approved"] is None
    assert {line["kind"] for line in review["diff"]} >= {"header", "added"}
    assert any("Append one line to the log." in line["text"] for line in review["diff"])

    approved = cli.invoke(
        mcp_gateway,
        ["--config", path, "approve-tool", "fault.append", "--digest", review["digest"]],
    )
    assert approved.exit_code == 0, approved.output
    assert approved.output.split("\t")[:2] == ["fault.append", "served"]


def test_review_json_with_nothing_waiting_is_an_empty_list_and_exit_0(
    tmp_path: Path, state: Path
) -> None:
    """No tool quarantined: no reviews, waiting 0, exit 0."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read", "read"))
    result = CliRunner().invoke(
        mcp_gateway, ["--config", str(config.service.source), "review", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"tools": [], "unreachable": [], "waiting": 0}


def test_review_refuses_json_with_approve(tmp_path: Path, state: Path) -> None:
    """--json is for a script and --approve asks a person: together, a usage error (exit 2)."""
    path = _quarantining(tmp_path, state)
    result = CliRunner().invoke(mcp_gateway, ["--config", path, "review", "--json", "--approve"])
    assert result.exit_code == 2
    assert "choose one" in result.output

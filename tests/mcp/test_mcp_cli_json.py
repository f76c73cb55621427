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


def test_review_json_gives_the_diff_as_lines_and_approval_happens_by_that_digest(
    tmp_path: Path, state: Path
) -> None:
    """`review --json`: each waiting tool's digest and diff lines; approving it empties the list."""
    path = _quarantining(tmp_path, state)
    cli = CliRunner()
    result = cli.invoke(mcp_gateway, ["--config", path, "review", "--json"])
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["waiting"] == len(document["tools"]) >= 1
    review = next(t for t in document["tools"] if t["name"] == "fault.append")
    assert review["approved"] is None
    assert {line["kind"] for line in review["diff"]} >= {"header", "added"}
    assert any("Append one line to the log." in line["text"] for line in review["diff"])

    for item in document["tools"]:
        approved = cli.invoke(
            mcp_gateway,
            ["--config", path, "approve-tool", item["name"], "--digest", item["digest"]],
        )
        assert approved.exit_code == 0, approved.output
    after = cli.invoke(mcp_gateway, ["--config", path, "review", "--json"])
    assert after.exit_code == 0, after.output
    assert json.loads(after.stdout) == {"tools": [], "unreachable": [], "waiting": 0}


def test_review_refuses_json_with_approve(tmp_path: Path, state: Path) -> None:
    """--json is for a script and --approve asks a person: together, a usage error (exit 2)."""
    path = _quarantining(tmp_path, state)
    result = CliRunner().invoke(mcp_gateway, ["--config", path, "review", "--json", "--approve"])
    assert result.exit_code == 2
    assert "choose one" in result.output

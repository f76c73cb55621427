"""The gateway's configuration: the service's sections plus [gateway] and [[upstream]]."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from mcp_support import PRINCIPALS, TOKENS, grant

from toolbound.config import ConfigError, parse_config
from toolbound.mcp import parse_gateway_config
from toolbound.mcp.config import CONSERVATIVE_EFFECT

if TYPE_CHECKING:
    from pathlib import Path

UPSTREAM = """
[[upstream]]
name = "git"
command = ["python", "-m", "mcp_server_git"]
[upstream.tools.git_status]
effect = "read"
capability = "git:read"
resource = { kind = "repository", pointer = "/repo_path" }
"""


def test_a_tool_left_unconfigured_gets_the_most_conservative_class(tmp_path: Path) -> None:
    """Unset: irreversible_write, capability <upstream>:<tool>; set: exactly what was written."""
    config = parse_gateway_config(PRINCIPALS + UPSTREAM, source=tmp_path / "g.toml")
    git = config.upstreams[0]
    assert git.rule("git_commit").effect == CONSERVATIVE_EFFECT == "irreversible_write"
    assert git.capability("git_commit") == "git:git_commit"
    status = git.rule("git_status")
    assert (status.effect, git.capability("git_status")) == ("read", "git:read")
    assert status.resource is not None
    assert (status.resource.pointer, status.resource.action) == ("/repo_path", "read")
    assert git.prefix == "git"
    assert config.approvals_path == (tmp_path / "g.approvals.json").resolve()


def test_tokens_map_to_subjects_and_only_agents_call(tmp_path: Path) -> None:
    """A token is stored as its SHA-256; an approver's token does not make a caller."""
    config = parse_gateway_config(PRINCIPALS + UPSTREAM, source=tmp_path / "g.toml")
    mira = config.subject_for(TOKENS["mira"])
    assert mira is not None
    assert (mira.id, mira.tenant) == ("mira", "acme")
    assert config.subject_for(TOKENS["ops"]) is None
    assert config.subject_for("mira") is None
    assert TOKENS["mira"] not in PRINCIPALS


def test_every_problem_is_reported_at_once_with_its_key_path(tmp_path: Path) -> None:
    """Problems in the gateway's sections and in the service's come out together."""
    text = (
        PRINCIPALS.replace('name = "ops"', 'name = "ops"\nkey = "plain"')
        + grant("mira", "git:read")
        + """
[gateway]
stdio_principal = "nobody"
confirm = "maybe"

[[upstream]]
name = "git"
command = ["python"]
url = "http://127.0.0.1:1/mcp"
[upstream.tools.git_commit]
effect = "dangerous"
idempotency = "query_by_key"
max_attempts = 0
resource = { kind = "repository", pointer = "repo_path" }

[[upstream]]
name = "second"
prefix = "git"
[upstream.tools.git_log]
effect = "read"
idempotency = "native_key"
colour = "blue"
"""
    )
    with pytest.raises(ConfigError) as raised:
        parse_gateway_config(text, source=tmp_path / "g.toml")
    paths = {issue.path for issue in raised.value.issues}
    assert paths >= {
        "principal[2].key",
        "gateway.stdio_principal",
        "gateway.confirm",
        "upstream[0]",
        "upstream[0].tools.git_commit.effect",
        "upstream[0].tools.git_commit.idempotency",
        "upstream[0].tools.git_commit.max_attempts",
        "upstream[0].tools.git_commit.resource.pointer",
        "upstream[1]",
        "upstream[1].prefix",
        "upstream[1].tools.git_log.idempotency",
        "upstream[1].tools.git_log.colour",
    }
    message = str(raised.value)
    assert "upstream[1].prefix: 'git' is already used by upstream[0]" in message
    assert "give exactly one of command (a stdio server) or url (streamable HTTP)" in message


def test_content_limit_and_federation_capabilities_default_and_are_checked(tmp_path: Path) -> None:
    """max_content_bytes is 1 MiB unless set; resources, prompts: <upstream>:resources, :prompts."""
    config = parse_gateway_config(PRINCIPALS + UPSTREAM, source=tmp_path / "g.toml")
    git = config.upstreams[0]
    assert git.max_content_bytes == 1024 * 1024
    assert (git.resources_grant, git.prompts_grant) == ("git:resources", "git:prompts")
    set_ = UPSTREAM.replace(
        'command = ["python", "-m", "mcp_server_git"]',
        'command = ["python", "-m", "mcp_server_git"]\nmax_content_bytes = 10\n'
        'resources_capability = "docs:read"',
    )
    git = parse_gateway_config(PRINCIPALS + set_, source=tmp_path / "g.toml").upstreams[0]
    assert (git.max_content_bytes, git.resources_grant) == (10, "docs:read")
    bad = set_.replace("max_content_bytes = 10", 'max_content_bytes = "big"')
    with pytest.raises(ConfigError, match=r"upstream\[0\]\.max_content_bytes: must be a number"):
        parse_gateway_config(PRINCIPALS + bad, source=tmp_path / "g.toml")


def test_mcp_serve_content_limit_defaults_to_one_mebibyte_and_is_checked(tmp_path: Path) -> None:
    """[gateway] max_content_bytes bounds mcp-serve's blocks and reads: 1 MiB unless set."""
    config = parse_gateway_config(PRINCIPALS, source=tmp_path / "g.toml")
    assert config.gateway.max_content_bytes == 1024 * 1024
    set_ = PRINCIPALS + "\n[gateway]\nmax_content_bytes = 2048\n"
    assert parse_gateway_config(set_, source=tmp_path / "g.toml").gateway.max_content_bytes == 2048
    bad = set_.replace("2048", "-1")
    with pytest.raises(ConfigError, match=r"gateway\.max_content_bytes: must be a number"):
        parse_gateway_config(bad, source=tmp_path / "g.toml")


def test_a_gateway_problem_has_its_line_and_the_closest_key(tmp_path: Path) -> None:
    """[[upstream]] #1.tools.git_status.efect: where it is written, and `effect` suggested."""
    text = PRINCIPALS + UPSTREAM.replace('effect = "read"', 'efect = "read"')
    with pytest.raises(ConfigError) as raised:
        parse_gateway_config(text, source=tmp_path / "g.toml")
    (issue,) = raised.value.issues
    assert issue.path == "upstream[0].tools.git_status.efect"
    assert issue.where == "[[upstream]] #1.tools.git_status.efect"
    line = next(n for n, t in enumerate(text.splitlines(), 1) if t.startswith("efect"))
    assert (issue.line, issue.column) == (line, 1)
    assert "did you mean 'effect'?" in issue.message


def test_the_service_s_loader_checks_the_gateway_s_tables_too(tmp_path: Path) -> None:
    """One file means one thing: check-config and serve refuse a [gateway] mistake as well."""
    with pytest.raises(ConfigError) as raised:
        parse_config(PRINCIPALS + '\n[gateway]\nconfirm = "maybe"\n')
    assert [i.path for i in raised.value.issues] == ["gateway.confirm"]

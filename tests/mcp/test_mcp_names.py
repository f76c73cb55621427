"""Kept names: ``prefix = ""`` serves an upstream's tools under their own names (R18).

Two upstreams that would then serve one name are refused when the gateway starts,
naming both; the tool a later listing brings into a clash is not served.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner
from mcp import Client
from mcp_support import MIRA, gateway, grant, run, write_config
from node_support import free_port

from toolbound import ConfigurationError
from toolbound.config import ConfigError
from toolbound.mcp.cli import mcp_gateway

if TYPE_CHECKING:
    from pathlib import Path

    import mcp_types as types


def time_server(name: str, prefix: str) -> str:
    return f"""
[[upstream]]
name = "{name}"
prefix = "{prefix}"
command = ["{sys.executable}", "-m", "mcp_server_time", "--local-timezone", "UTC"]
[upstream.tools.get_current_time]
effect = "read"
capability = "time:read"
"""


def test_an_empty_prefix_keeps_the_upstream_s_tool_names(tmp_path: Path) -> None:
    """get_current_time is listed and called as get_current_time, still through the pipeline."""
    config = write_config(tmp_path, time_server("time", "") + grant("mira", "time:read"))

    async def scenario() -> tuple[list[str], types.CallToolResult]:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            return names, await client.call_tool("get_current_time", {"timezone": "UTC"})

    names, result = run(scenario())
    assert names == ["get_current_time"]
    assert result.is_error is False
    assert result.structured_content["timezone"] == "UTC"  # type: ignore[index]


def test_two_upstreams_serving_one_name_are_refused_at_start(tmp_path: Path) -> None:
    """Time and clock both keep their names: the gateway does not start, and says why."""
    config = write_config(
        tmp_path,
        time_server("time", "") + time_server("clock", "") + grant("mira", "time:read"),
    )

    async def scenario() -> None:
        async with gateway(config).running():
            pass

    with pytest.raises(ConfigurationError, match="tool names collide") as caught:
        run(scenario())
    assert caught.value.code == "tool_name_collision"
    message = str(caught.value)
    assert "'get_current_time'" in message
    assert "upstreams time and clock both serve" in message
    assert 'prefix = "clock"' in message


def test_a_collision_ends_the_command_in_one_line_without_a_traceback(tmp_path: Path) -> None:
    """mcp-gateway tools: one error line naming both upstreams and the prefix fix, exit 1."""
    write_config(
        tmp_path,
        time_server("time", "") + time_server("clock", "") + grant("mira", "time:read"),
    )
    ran = CliRunner().invoke(mcp_gateway, ["--config", str(tmp_path / "gateway.toml"), "tools"])
    assert ran.exit_code == 1
    assert "Traceback" not in ran.output
    [line] = ran.output.strip().splitlines()
    assert line.startswith("Error: tool names collide: upstreams time and clock both serve")
    assert "prefix" in line


def test_a_prefixed_upstream_beside_a_kept_one_serves_both(tmp_path: Path) -> None:
    """The same server twice, once as c.<tool> and once under its own names: no clash."""
    config = write_config(tmp_path, time_server("time", "") + time_server("clock", "c"))
    gw = gateway(config)

    async def scenario() -> list[str]:
        async with gw.running():
            return [s.name for s in gw.status()]

    assert run(scenario()) == ["c.convert_time", "c.get_current_time", "convert_time",
                               "get_current_time"]  # fmt: skip


def test_empty_prefixes_are_not_duplicates_but_equal_prefixes_are(tmp_path: Path) -> None:
    """Several upstreams may keep their names; two may not share a prefix."""
    write_config(tmp_path, time_server("time", "") + time_server("clock", ""))
    with pytest.raises(ConfigError, match=r"upstream\[1\]\.prefix"):
        write_config(tmp_path, time_server("time", "t") + time_server("clock", "t"))


def test_the_gateway_creates_its_sqlite_store_s_folder(tmp_path: Path) -> None:
    """A [store] in a folder that does not exist yet is created, as serve does."""
    write_config(tmp_path, time_server("time", "t") + grant("mira", "time:read"))
    config = tmp_path / "gateway.toml"
    store = tmp_path / "state" / "nested" / "ledger.db"
    config.write_text(
        config.read_text().replace('url = "sqlite:///ledger.db"', f'url = "sqlite:///{store}"')
    )
    ran = CliRunner().invoke(mcp_gateway, ["--config", str(config), "tools"])
    assert ran.exit_code == 0, ran.output
    assert "Traceback" not in ran.output
    assert store.exists()


def test_over_http_a_collision_also_ends_the_command_in_one_line(tmp_path: Path) -> None:
    """mcp-gateway --http: the server does not start, and says why in one line, exit 1."""
    write_config(
        tmp_path,
        time_server("time", "") + time_server("clock", "") + grant("mira", "time:read"),
    )
    argv = ["--config", str(tmp_path / "gateway.toml"), "--http", "--port", str(free_port())]
    ran = CliRunner().invoke(mcp_gateway, argv)
    assert ran.exit_code == 1, ran.output
    assert "Traceback" not in ran.output
    assert ran.output.strip().splitlines()[-1].startswith("Error: tool names collide")

"""Local mode and RFC 9728 metadata on the HTTP transport (R18).

Local mode (``--local-as PRINCIPAL``): a request without a bearer token runs as that
principal; a request with a token is authenticated as always; the CLI binds loopback
only. With ``[gateway.protected_resource]`` every 401 names the RFC 9728 metadata
document, which is served at its well-known paths.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import (
    MIRA,
    TOKENS,
    as_,
    fault_upstream,
    gateway,
    grant,
    run,
    serving,
    write_config,
)

from toolbound.config import ConfigError
from toolbound.mcp.cli import mcp_gateway, mcp_serve

if TYPE_CHECKING:
    from pathlib import Path

    import mcp_types as types

PROTECTED = """
[gateway.protected_resource]
resource = "https://tools.example.com/mcp"
authorization_servers = ["https://auth.example.com"]
scopes_supported = ["tools"]
"""

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_in_local_mode_a_caller_without_a_token_runs_as_the_local_principal(
    tmp_path: Path, state: Path
) -> None:
    """No token: mira's tools and mira's calls; leo's token is still leo (he sees nothing)."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))

    async def scenario() -> tuple[list[str], types.CallToolResult, list[str]]:
        async with serving(gateway(config), local=MIRA) as url:
            async with Client(streamable_http_client(url)) as anonymous:
                names = [t.name for t in (await anonymous.list_tools()).tools]
                said = await anonymous.call_tool("fault.echo", {"text": "local"})
            async with as_(TOKENS["leo"], url) as leo:
                his = [t.name for t in (await leo.list_tools()).tools]
            return names, said, his

    names, said, his = run(scenario())
    assert sorted(names) == ["fault.echo", "fault.fail"]
    assert said.structured_content == {"text": "local"}
    assert his == []


def test_in_local_mode_a_wrong_token_is_still_refused(tmp_path: Path, state: Path) -> None:
    """Local mode lets in a caller without credentials, never one with bad ones."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))

    async def scenario() -> list[int]:
        async with serving(gateway(config), local=MIRA) as url, httpx2.AsyncClient() as http:
            codes = []
            for auth in ("Bearer not-a-token", "Basic bWlyYTp4"):
                answer = await http.post(url, json=PING, headers={**ACCEPT, "Authorization": auth})
                codes.append(answer.status_code)
            return codes

    assert run(scenario()) == [401, 401]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--http", "--host", "0.0.0.0", "--local-as", "mira"], "only on a loopback"),  # noqa: S104
        (["--http", "--host", "192.168.1.20", "--local-as", "mira"], "not '192.168.1.20'"),
        (["--local-as", "mira"], "--local-as is for --http"),
        (["--http", "--host", "127.0.0.1", "--local-as", "nobody"], "no [[principal]] is named"),
    ],
)
def test_local_mode_refuses_to_start_where_it_would_expose_calls(
    tmp_path: Path, args: list[str], says: str
) -> None:
    """mcp-serve and mcp-gateway exit before binding anything."""
    config = write_config(tmp_path, grant("mira", "notes:read"))
    source = str(config.service.source)
    runner = CliRunner()
    for command, extra in ((mcp_serve, ["--tools", "local_tools:tools"]), (mcp_gateway, [])):
        result = runner.invoke(command, ["--config", source, *extra, *args])
        assert result.exit_code == 1, result.output
        assert says in result.output


def test_a_401_names_the_protected_resource_metadata_which_is_served(
    tmp_path: Path, state: Path
) -> None:
    """WWW-Authenticate carries resource_metadata; the RFC 9728 document is at both paths."""
    config = write_config(
        tmp_path, fault_upstream(state) + grant("mira", "fault:read"), gateway=PROTECTED
    )

    async def scenario() -> tuple[httpx2.Response, list[httpx2.Response]]:
        async with serving(gateway(config)) as url, httpx2.AsyncClient() as http:
            refused = await http.post(url, json=PING, headers=ACCEPT)
            base = url.removesuffix("/mcp")
            docs = [
                await http.get(base + "/.well-known/oauth-protected-resource/mcp"),
                await http.get(base + "/.well-known/oauth-protected-resource"),
            ]
            return refused, docs

    refused, docs = run(scenario())
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == (
        'Bearer realm="toolbound", resource_metadata='
        '"https://tools.example.com/.well-known/oauth-protected-resource/mcp"'
    )
    for doc in docs:
        assert doc.status_code == 200
        assert doc.json() == {
            "resource": "https://tools.example.com/mcp",
            "authorization_servers": ["https://auth.example.com"],
            "scopes_supported": ["tools"],
            "bearer_methods_supported": ["header"],
        }


def test_a_protected_resource_that_is_not_a_url_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    """Every problem in the table, each with its key path."""
    bad = """
[gateway.protected_resource]
resource = "tools.example.com/mcp"
authorization_servers = ["auth"]
colour = "blue"
"""
    with pytest.raises(ConfigError) as caught:
        write_config(tmp_path, grant("mira", "notes:read"), gateway=bad)
    text = str(caught.value)
    for path in ("resource", "authorization_servers", "colour"):
        assert f"gateway.protected_resource.{path}" in text

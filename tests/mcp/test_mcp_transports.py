"""The real transports: streamable HTTP on loopback (bearer tokens) and stdio (the CLI).

HTTP runs the gateway's ASGI app under uvicorn on 127.0.0.1 and talks to it with the
SDK's streamable HTTP client; stdio starts ``toolbound mcp-serve`` and ``toolbound
mcp-gateway`` as child processes, as an MCP host would.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_support import (
    LEO,
    QUIET,
    TOKENS,
    as_,
    fault_upstream,
    gateway,
    grant,
    run,
    serving,
    time_upstream,
    write_config,
)

if TYPE_CHECKING:
    import mcp_types as types
    import pytest


HERE = Path(__file__).parent
TOOLBOUND = str(Path(sys.executable).parent / "toolbound")


def test_over_http_each_token_is_its_own_subject(tmp_path: Path, state: Path) -> None:
    """Mira's token sees and calls fault.echo; leo's token sees nothing of it."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))

    async def scenario() -> tuple[list[str], list[str], types.CallToolResult]:
        async with serving(gateway(config)) as url:
            async with as_(TOKENS["mira"], url) as mira:
                mine = [t.name for t in (await mira.list_tools()).tools]
                said = await mira.call_tool("fault.echo", {"text": "over http"})
            async with as_(TOKENS["leo"], url) as leo:
                his = [t.name for t in (await leo.list_tools()).tools]
            return mine, his, said

    mine, his, said = run(scenario())
    assert sorted(mine) == ["fault.echo", "fault.fail"]
    assert his == []
    assert said.structured_content == {"text": "over http"}


def test_an_upstream_reached_over_http_is_guarded_like_any_other(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second gateway fronts the first one by URL, with a bearer token from the environment."""
    first = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))

    async def scenario() -> tuple[list[str], types.CallToolResult]:
        async with serving(gateway(first)) as url:
            monkeypatch.setenv("FIRST_GATEWAY_TOKEN", TOKENS["mira"])
            (tmp_path / "second").mkdir()
            second = write_config(
                tmp_path / "second",
                f"""
[[upstream]]
name = "first"
url = "{url}"
bearer_env = "FIRST_GATEWAY_TOKEN"
[upstream.tools."fault.echo"]
effect = "read"
capability = "first:read"
"""
                + grant("leo", "first:read"),
            )
            async with gateway(second).running() as gw, Client(gw.server.lowlevel(LEO)) as leo:
                names = [t.name for t in (await leo.list_tools()).tools]
                return names, await leo.call_tool("first.fault.echo", {"text": "twice guarded"})

    names, result = run(scenario())
    assert names == ["first.fault.echo"]
    assert result.structured_content == {"text": "twice guarded"}


def test_over_http_without_an_agent_token_nothing_is_served(tmp_path: Path, state: Path) -> None:
    """No token, an unknown token, and an approver's token (not an agent) all get 401."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))
    ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}

    async def scenario() -> list[int]:
        async with serving(gateway(config)) as url, httpx2.AsyncClient() as http:
            statuses = []
            for token in (None, "not-a-token", TOKENS["ops"]):
                headers = {"Accept": "application/json, text/event-stream"}
                if token is not None:
                    headers["Authorization"] = f"Bearer {token}"
                statuses.append((await http.post(url, json=ping, headers=headers)).status_code)
            return statuses

    assert run(scenario()) == [401, 401, 401]


def test_over_http_a_body_that_is_not_strict_json_is_refused(tmp_path: Path, state: Path) -> None:
    """Duplicate keys in the arguments: a JSON-RPC parse error naming them; nothing is forwarded."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))
    body = (
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":'
        b'{"name":"fault.echo","arguments":{"text":"a","text":"b"}}}'
    )

    async def scenario() -> httpx2.Response:
        async with serving(gateway(config)) as url, httpx2.AsyncClient() as http:
            return await http.post(
                url,
                content=body,
                headers={
                    "Authorization": f"Bearer {TOKENS['mira']}",
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
            )

    answer = run(scenario())
    assert answer.status_code == 400
    error = answer.json()
    assert error["id"] == 7
    assert error["error"]["code"] == -32700
    assert error["error"]["data"]["code"] == "duplicate_key"
    assert not (state / "calls.txt").exists()


def test_mcp_serve_over_stdio_serves_a_tool_set_as_the_configured_principal(
    tmp_path: Path,
) -> None:
    """`toolbound mcp-serve --tools local_tools:tools`: mira (stdio_principal) lists and calls."""
    config = write_config(tmp_path, grant("mira", "notes:read"))
    env = {
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "TOOLBOUND_TEST_NOTES": str(tmp_path / "notes.txt"),
    }
    (tmp_path / "notes.txt").write_text("one\ntwo\n")
    params = StdioServerParameters(
        command=TOOLBOUND,
        args=["mcp-serve", "--config", str(config.service.source), "--tools", "local_tools:tools"],
        env=env,
    )

    async def scenario() -> tuple[list[str], types.CallToolResult]:
        async with Client(stdio_client(params, errlog=QUIET)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            return names, await client.call_tool("notes.read", {})

    names, result = run(scenario())
    assert sorted(names) == ["notes.fail", "notes.read"]
    assert result.structured_content == {"titles": ["one", "two"], "count": 2}


def test_mcp_gateway_over_stdio_fronts_mcp_server_time(tmp_path: Path) -> None:
    """`toolbound mcp-gateway --config FILE`: a host starts it and calls through it."""
    config = write_config(tmp_path, time_upstream() + grant("mira", "time:read"))
    params = StdioServerParameters(
        command=TOOLBOUND, args=["mcp-gateway", "--config", str(config.service.source)]
    )

    async def scenario() -> types.CallToolResult:
        async with Client(stdio_client(params, errlog=QUIET)) as client:
            return await client.call_tool("time.convert_time", {
                "source_timezone": "Europe/Paris", "time": "12:00", "target_timezone": "Asia/Tokyo",
            })  # fmt: skip

    result = run(scenario())
    assert result.is_error is False
    converted: dict[str, Any] = result.structured_content  # type: ignore[assignment]
    assert converted["target"]["timezone"] == "Asia/Tokyo"
    assert json.loads(result.content[0].text)["trust"] == "untrusted_tool_data"  # type: ignore[union-attr]


def test_an_http_upstream_keeps_one_connection_for_many_calls(tmp_path: Path) -> None:
    """Calls to an upstream answering in SSE reuse one connection (toolbound.mcp.keepalive)."""
    import asyncio

    import uvicorn
    from mcp.server.mcpserver import MCPServer

    upstream = MCPServer("echo-http")

    @upstream.tool()
    def echo(text: str) -> dict[str, str]:
        """Say it back."""
        return {"text": text}

    app = upstream.streamable_http_app()
    posts: list[tuple[str, int]] = []

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            posts.append(scope["client"])
        await app(scope, receive, send)

    async def scenario() -> list[dict[str, Any] | None]:
        server = uvicorn.Server(
            uvicorn.Config(counting, host="127.0.0.1", port=0, log_level="warning")
        )
        task = asyncio.create_task(server.serve())
        try:
            while not server.started:
                if task.done():
                    task.result()  # it could not start: say why
                await asyncio.sleep(0.02)
            port = server.servers[0].sockets[0].getsockname()[1]
            config = write_config(
                tmp_path,
                f"""
[[upstream]]
name = "web"
url = "http://127.0.0.1:{port}/mcp"
[upstream.tools.echo]
effect = "read"
capability = "web:read"
"""
                + grant("leo", "web:read"),
            )
            async with gateway(config).running() as gw, Client(gw.server.lowlevel(LEO)) as leo:
                before = len(posts)
                answers = [
                    (await leo.call_tool("web.echo", {"text": f"call {i}"})).structured_content
                    for i in range(5)
                ]
                del posts[:before]
                return answers
        finally:
            server.should_exit = True
            await task

    answers = run(scenario())
    assert answers == [{"text": f"call {i}"} for i in range(5)]
    assert len(posts) >= 5  # the calls, and whatever the client sent beside them
    assert len(set(posts)) == 1, f"one client port for every call, not {sorted(set(posts))}"

"""The MCP surfaces over HTTP keep the service's access log: one line per request.

Each line names who called, the JSON-RPC method and, for ``tools/call``, the tool —
never a token or an argument value. The gateway is served on loopback by uvicorn,
as ``toolbound mcp-gateway --http`` serves it (``mcp-serve --http`` builds the same
app).
"""

from __future__ import annotations

import io
import json
import logging
from typing import TYPE_CHECKING

import httpx
import pytest
from mcp_support import TOKENS, as_, fault_upstream, gateway, grant, run, serving, write_config

from toolbound.logs import configure

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

ARGUMENT = "argument-value-4b1d-never-logged"


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """The log as JSON lines in a buffer; the logging set-up restored after."""
    root = logging.getLogger()
    level = root.level
    stream = io.StringIO()
    handler = configure("info", "json", stream=stream)
    yield stream
    root.removeHandler(handler)
    root.setLevel(level)
    for name in ("toolbound", "uvicorn", "uvicorn.error"):
        logging.getLogger(name).setLevel(logging.NOTSET)


def _access(stream: io.StringIO) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [line for line in lines if line["logger"] == "toolbound.access"]


def test_a_tool_call_is_logged_with_its_caller_method_and_tool(
    tmp_path: Path, state: Path, logs: io.StringIO
) -> None:
    """A ``tools/call`` line: mira of acme, POST /mcp 200, rpc tools/call, tool fault.echo."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))

    async def scenario() -> None:
        async with serving(gateway(config)) as url, as_(TOKENS["mira"], url) as client:
            await client.call_tool("fault.echo", {"text": ARGUMENT})

    run(scenario())
    calls = [line for line in _access(logs) if line.get("rpc") == "tools/call"]
    assert len(calls) == 1, _access(logs)
    line = calls[0]
    assert line["principal"] == "mira"
    assert line["tenant"] == "acme"
    assert (line["method"], line["route"], line["status"]) == ("POST", "/mcp", 200)
    assert line["tool"] == "fault.echo"
    assert isinstance(line["duration_ms"], float)
    assert all(line["principal"] == "mira" for line in _access(logs))  # the session's too
    assert ARGUMENT not in logs.getvalue()
    assert TOKENS["mira"] not in logs.getvalue()


def test_a_request_without_a_token_is_logged_401_without_a_principal(
    tmp_path: Path, state: Path, logs: io.StringIO
) -> None:
    """Refused before anyone is known: the line says 401 and names no one."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))

    async def scenario() -> httpx.Response:
        async with serving(gateway(config)) as url, httpx.AsyncClient() as http:
            return await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})

    assert run(scenario()).status_code == 401
    (line,) = _access(logs)
    assert (line["status"], line["principal"], line["tenant"]) == (401, None, None)
    assert "rpc" not in line

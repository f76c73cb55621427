"""Shared pieces of the MCP tests: principals, configurations, commits (fixtures: conftest.py).

The people: mira and leo are agents of tenant acme (each a bearer token, stored
hashed); ops is an approver and may not call tools. Upstreams are real processes:
mcp-server-time, mcp-server-git on a repository made for the test, and
``fault_server.py`` for the faults real servers do not have on demand.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from toolbound import Subject
from toolbound.mcp import ENVELOPE_META_KEY, Gateway, load_gateway_config

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Coroutine

    import mcp_types as types

    from toolbound.mcp import GatewayConfig

HERE = Path(__file__).parent
FAULT_SERVER = HERE / "fault_server.py"
TOKENS = {"mira": "mira-token-9f2c", "leo": "leo-token-41aa", "ops": "ops-token-77d0"}
MIRA = Subject(id="mira", tenant="acme")
LEO = Subject(id="leo", tenant="acme")
QUIET = Path(os.devnull).open("w")  # noqa: SIM115 - one sink for every upstream's stderr


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def envelope(result: types.CallToolResult | object) -> dict[str, Any]:
    """The toolbound envelope of an isError result, from _meta.

    It is the result's text too, and structuredContent stays empty: that field must
    conform to the tool's outputSchema.
    """
    assert getattr(result, "is_error", None) is True, result
    found: dict[str, Any] = result.meta[ENVELOPE_META_KEY]  # type: ignore[attr-defined]
    assert result.structured_content is None  # type: ignore[attr-defined]
    assert json.loads(result.content[0].text) == found  # type: ignore[attr-defined]
    return found


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


PRINCIPALS = f"""
[[principal]]
name = "mira"
key_sha256 = "{sha(TOKENS["mira"])}"
subject = "mira"
tenant = "acme"
roles = ["agent"]

[[principal]]
name = "leo"
key_sha256 = "{sha(TOKENS["leo"])}"
subject = "leo"
tenant = "acme"
roles = ["agent"]

[[principal]]
name = "ops"
key_sha256 = "{sha(TOKENS["ops"])}"
subject = "ops"
tenant = "acme"
roles = ["approver"]
"""


def grant(
    subject: str,
    capability: str,
    *actions: str,
    confirm: bool = False,
    root: Path | None = None,
) -> str:
    acts = ", ".join(f'"{a}"' for a in actions or ("read",))
    scope = "" if root is None else f'scope = {{ kind = "path", root = "{root}" }}\n'
    return f"""
[[grant]]
subject = "{subject}"
tenant = "acme"
capability = "{capability}"
actions = [{acts}]
confirm = {"true" if confirm else "false"}
{scope}"""


def time_upstream() -> str:
    return f"""
[[upstream]]
name = "time"
command = ["{sys.executable}", "-m", "mcp_server_time", "--local-timezone", "UTC"]
[upstream.tools.get_current_time]
effect = "read"
capability = "time:read"
[upstream.tools.convert_time]
effect = "read"
capability = "time:read"
"""


def git_upstream(repo: Path, *, name: str = "git", via_fault: Path | None = None) -> str:
    command = (
        f'["{sys.executable}", "-m", "mcp_server_git", "--repository", "{repo}"]'
        if via_fault is None
        else f'["{sys.executable}", "{FAULT_SERVER}", "--state", "{via_fault}", '
        f'"--proxy-git", "{repo}"]'
    )
    reads = ("git_status", "git_log", "git_diff_staged", "git_show", "git_branch")
    rules = "".join(
        f"""
[upstream.tools.{tool}]
effect = "read"
capability = "git:read"
resource = {{ kind = "repository", pointer = "/repo_path" }}
"""
        for tool in reads
    )
    writes = {"git_add": "modify", "git_commit": "create", "git_create_branch": "create"}
    rules += "".join(
        f"""
[upstream.tools.{tool}]
effect = "{"reversible_write" if tool == "git_add" else "irreversible_write"}"
capability = "git:write"
resource = {{ kind = "repository", pointer = "/repo_path", action = "{action}" }}
"""
        for tool, action in writes.items()
    )
    return f"""
[[upstream]]
name = "{name}"
command = {command}
timeout = 20
{rules}
"""


def fault_upstream(state: Path, **settings: object) -> str:
    extra = "".join(f"{k} = {_toml(v)}\n" for k, v in settings.items())
    return f"""
[[upstream]]
name = "fault"
command = ["{sys.executable}", "{FAULT_SERVER}", "--state", "{state}"]
{extra}
[upstream.tools.echo]
effect = "read"
capability = "fault:read"
[upstream.tools.fail]
effect = "read"
capability = "fault:read"
[upstream.tools.pair]
effect = "read"
capability = "fault:pair"
[upstream.tools.append]
effect = "reversible_write"
capability = "fault:write"
idempotency = "native_key"
"""


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def write_config(folder: Path, body: str, *, gateway: str = "") -> GatewayConfig:
    path = folder / "gateway.toml"
    path.write_text(
        f"""
[store]
url = "sqlite:///ledger.db"

[gateway]
stdio_principal = "mira"
{gateway}
{PRINCIPALS}
{body}
"""
    )
    return load_gateway_config(path)


def built(build: Callable[[], T]) -> T:
    """``build()`` on a thread of its own, for a test that builds inside its coroutine.

    Building a gateway opens its stores (a round trip, a migration): on the loop's
    thread that would block it, and the loop guard (conftest.py) refuses it there.
    """
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(build).result()


def gateway(config: GatewayConfig, **options: Any) -> Gateway:
    return built(lambda: Gateway(config, errlog=QUIET, **options))


def commits(repo: Path) -> list[str]:
    out = subprocess.run(
        ["git", "log", "--format=%s"],  # noqa: S607 - git from PATH, as a person runs it
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.splitlines()


@contextlib.asynccontextmanager
async def serving(gw: Gateway, *, local: Subject | None = None) -> AsyncIterator[str]:
    """The gateway on a free loopback port; yields its MCP URL."""
    http = gw.http(allowed_hosts=["127.0.0.1:*"], local=local)
    app = http.starlette("/mcp", also=[gw.running])
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def as_(token: str, url: str) -> AsyncIterator[Client]:
    """An SDK client over streamable HTTP carrying ``token``."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client

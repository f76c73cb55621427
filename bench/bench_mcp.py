"""The MCP gateway against a direct client → upstream call, measured in the same run.

The tool is mcp-server-time's ``get_current_time``, a read with an output schema,
started as a real child process. Three ways to call it, with the official MCP SDK
client in every case:

* **direct**: client → mcp-server-time (stdio);
* **gateway**: client → the gateway in this process (the SDK's in-process
  connection, as when a service mounts it) → mcp-server-time (stdio);
* **gateway over stdio**: client → ``toolbound mcp-gateway`` (a child process) →
  mcp-server-time — one more process hop than direct;
* **SDK relay, no guard**: client → a bare SDK server in this process (the same
  in-process connection) whose ``tools/call`` hands the call to its own SDK client of
  another mcp-server-time, and lists that upstream's tools as they are: what any
  gateway built on the official SDK pays before it checks anything, the floor under
  *gateway*.

And a write: ``convert_time`` declared a ``reversible_write`` with no idempotency
support, so the gateway claims each call's key (its digest) in an SQLite ledger
before it runs and records the commit after — **gateway write (SQLite)**, each call
with other arguments (a new key), against **direct write**, the same call straight
to mcp-server-time. The **gateway (SQLite)** row is the read on the same gateway:
a read claims nothing, so it should cost what the in-memory gateway's does.

Then the same tool from an upstream over streamable HTTP (``mcp_peers/time_http.py``,
the SDK's ``MCPServer`` in a child process), where the gateway meets its peers, each
a child process the client reaches over stdio, each relaying to that upstream:

* **direct (HTTP)**: client → the upstream;
* **gateway**: ``toolbound mcp-gateway`` with the upstream's ``url``;
* **FastMCP proxy**: FastMCP's ``create_proxy(URL)``, which checks nothing;
* **mcp-proxy**: ``mcp-proxy --transport streamablehttp URL``, a bare bridge.

The peers run from venvs of their own (``mcp_peers/peers.py``, made on first use:
each pins an MCP SDK of its own). What each adds to the direct call, in the same
round, is compared: the gateway's against mcp-proxy's is the aim.

For each: µs per call one at a time (best round, and the median round), the CPU
time this process spent per call (the client's, plus the gateway's when it runs
here), and calls/s with several callers at once. Each round measures every path in
turn, so a round's own ratio (gateway / direct, same round) compares calls made under
the same load: their median is the steadiest ratio on a busy machine. The
gateway's path is the whole pipeline: parse, validate, normalize, digest, authorize,
execute under a deadline, check the output schema, encode, trace.

Run: ``.venv/bin/python bench/bench_mcp.py`` (add ``--quick`` for a smoke run,
``--no-peers`` to measure only the in-process paths).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server

from mcp_peers.peers import bin_dir
from toolbound import Subject
from toolbound.mcp import Gateway, load_gateway_config

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import mcp_types as types
    from mcp.server.context import ServerRequestContext

QUICK = "--quick" in sys.argv
PEERS_TOO = "--no-peers" not in sys.argv
CALLS = 30 if QUICK else 300
ROUNDS = 2 if QUICK else 5
CALLERS = 8
TOKEN = "bench-token"  # noqa: S105 - a throwaway principal of this run
ARGS = {"timezone": "Europe/Paris"}
QUIET = Path(os.devnull).open("w")  # noqa: SIM115 - the upstreams' stderr, for the whole run

HERE = Path(__file__).parent
PEERS = HERE / "mcp_peers"
TOOLBOUND = str(Path(sys.executable).parent / "toolbound")

CONFIG = f"""
[store]
url = "memory"

[gateway]
stdio_principal = "bench"

[[principal]]
name = "bench"
key_sha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"
subject = "bench"
tenant = "acme"
roles = ["agent"]

[[grant]]
subject = "bench"
tenant = "acme"
capability = "time:read"
actions = ["read"]

[[upstream]]
name = "time"
command = ["{sys.executable}", "-m", "mcp_server_time", "--local-timezone", "UTC"]
[upstream.tools.get_current_time]
effect = "read"
capability = "time:read"
"""

WRITES = """
[[grant]]
subject = "bench"
tenant = "acme"
capability = "time:convert"
actions = ["modify"]

[upstream.tools.convert_time]
effect = "reversible_write"
capability = "time:convert"
"""
ZONES = ("Europe/Paris", "Asia/Tokyo", "America/New_York", "Australia/Sydney")


def conversions() -> Callable[[], dict[str, str]]:
    """Arguments of ``convert_time``, other ones on every call (a key of their own)."""
    count = 0

    def next_args() -> dict[str, str]:
        nonlocal count
        count += 1
        minute, zone = divmod(count, len(ZONES))
        return {
            "source_timezone": "UTC",
            "time": f"{minute // 60 % 24:02d}:{minute % 60:02d}",
            "target_timezone": ZONES[zone],
        }

    return next_args


async def per_call(call: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """Mean wall µs and mean CPU µs of this process, over ``CALLS`` sequential calls."""
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(CALLS):
        await call()
    wall = (time.perf_counter() - started) / CALLS * 1e6
    return wall, (time.process_time() - cpu) / CALLS * 1e6


async def throughput(call: Callable[[], Awaitable[object]]) -> float:
    """Calls per second with ``CALLERS`` callers at once, ``CALLS`` calls in all."""

    async def caller(n: int) -> None:
        for _ in range(n):
            await call()

    started = time.perf_counter()
    await asyncio.gather(*(caller(CALLS // CALLERS) for _ in range(CALLERS)))
    return CALLERS * (CALLS // CALLERS) / (time.perf_counter() - started)


def relay(upstream: Client) -> Server[object]:
    """A bare SDK server that forwards ``tools/list`` and ``tools/call`` to ``upstream``."""

    async def on_list_tools(
        _ctx: ServerRequestContext[object], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return await upstream.list_tools()

    async def on_call_tool(
        _ctx: ServerRequestContext[object], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await upstream.call_tool(params.name, params.arguments)

    return Server("relay", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


Paths = dict[str, "Callable[[], Awaitable[object]]"]
Figures = dict[str, list[float]]


async def measure(paths: Paths) -> tuple[Figures, Figures, Figures]:
    """µs per call, CPU µs per call and calls/s of each path, one entry per round."""
    for call in paths.values():  # warm up every connection and cache
        for _ in range(20):
            assert not getattr(await call(), "is_error", True)
    latency: Figures = {name: [] for name in paths}
    cpu: Figures = {name: [] for name in paths}
    rate: Figures = {name: [] for name in paths}
    for _ in range(ROUNDS):  # interleaved, so load on the machine hits all alike
        for name, call in paths.items():
            wall, used = await per_call(call)
            latency[name].append(wall)
            cpu[name].append(used)
            rate[name].append(await throughput(call))
    return latency, cpu, rate


def table(title: str, base: str, latency: Figures, cpu: Figures, rate: Figures) -> None:
    """One row a path, its ratios to ``base``."""
    base_us = min(latency[base])
    base_rate = max(rate[base])
    print(title)
    print(
        f"{'path':<20} {'µs/call':>9} {'median':>9} {'ratio':>6} {'cpu µs':>8} "
        f"{'calls/s':>9} {'ratio':>6}"
    )
    for name in latency:
        best = min(latency[name])
        print(
            f"{name:<20} {best:>9.0f} {statistics.median(latency[name]):>9.0f} "
            f"{best / base_us:>6.2f} {min(cpu[name]):>8.0f} "
            f"{max(rate[name]):>9.0f} {max(rate[name]) / base_rate:>6.2f}"
        )


def free_port() -> int:
    """A port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_upstream() -> tuple[subprocess.Popen[bytes], str]:
    """The HTTP upstream as a child process, once it answers; and its URL."""
    port = free_port()
    process = subprocess.Popen(  # noqa: S603 - our own script
        [sys.executable, str(PEERS / "time_http.py"), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return process, f"http://127.0.0.1:{port}/mcp"
        time.sleep(0.05)
    process.kill()
    msg = "the HTTP upstream did not start"
    raise RuntimeError(msg)


async def peers(folder: Path) -> None:
    """The gateway, FastMCP's proxy and mcp-proxy before one HTTP upstream, same rounds."""
    fastmcp, mcp_proxy = bin_dir("fastmcp"), bin_dir("mcp-proxy")
    upstream, url = http_upstream()
    config = folder / "gateway-http.toml"
    config.write_text(
        CONFIG.split("[[upstream]]", maxsplit=1)[0]
        + f'[[upstream]]\nname = "time"\nurl = "{url}"\n'
        + '[upstream.tools.get_current_time]\neffect = "read"\ncapability = "time:read"\n'
    )
    servers = {
        "gateway": StdioServerParameters(
            command=TOOLBOUND, args=["mcp-gateway", "--config", str(config)]
        ),
        "FastMCP proxy": StdioServerParameters(
            command=str(fastmcp / "python"), args=[str(PEERS / "fastmcp_proxy.py"), url]
        ),
        "mcp-proxy": StdioServerParameters(
            command=str(mcp_proxy / "mcp-proxy"), args=["--transport", "streamablehttp", url]
        ),
    }
    try:
        async with (
            Client(streamable_http_client(url)) as direct,
            Client(stdio_client(servers["gateway"], errlog=QUIET)) as guarded,
            Client(stdio_client(servers["FastMCP proxy"], errlog=QUIET)) as fast,
            Client(stdio_client(servers["mcp-proxy"], errlog=QUIET)) as bridge,
        ):
            paths: Paths = {
                "direct (HTTP)": lambda: direct.call_tool("get_current_time", ARGS),
                "gateway": lambda: guarded.call_tool("time.get_current_time", ARGS),
                "FastMCP proxy": lambda: fast.call_tool("get_current_time", ARGS),
                "mcp-proxy": lambda: bridge.call_tool("get_current_time", ARGS),
            }
            latency, cpu, rate = await measure(paths)
    finally:
        upstream.terminate()
        upstream.wait(10)
    print()
    table(
        f"get_current_time from an upstream over HTTP; {CALLS} calls x {ROUNDS} rounds",
        "direct (HTTP)",
        latency,
        cpu,
        rate,
    )
    added = {
        name: statistics.median(
            [a - d for a, d in zip(latency[name], latency["direct (HTTP)"], strict=True)]
        )
        for name in ("gateway", "FastMCP proxy", "mcp-proxy")
    }
    for name, us in added.items():
        print(f"{name} adds {us:.0f} µs to the direct call (median over rounds, same round)")
    print(
        f"the gateway's added latency / mcp-proxy's: {added['gateway'] / added['mcp-proxy']:.2f}; "
        f"/ FastMCP proxy's: {added['gateway'] / added['FastMCP proxy']:.2f}"
    )


async def main() -> None:
    """Measure the in-process paths, then the HTTP upstream's peers, and print both."""
    folder = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    (folder / "gateway.toml").write_text(CONFIG)
    config = load_gateway_config(folder / "gateway.toml")
    time_server = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"]
    )
    gateway_process = StdioServerParameters(
        command=str(Path(sys.executable).parent / "toolbound"),
        args=["mcp-gateway", "--config", str(folder / "gateway.toml")],
    )
    (folder / "gateway-sqlite.toml").write_text(
        CONFIG.replace('url = "memory"', f'url = "sqlite:///{folder / "ledger.db"}"') + WRITES
    )
    durable = Gateway(load_gateway_config(folder / "gateway-sqlite.toml"), errlog=QUIET)
    gateway = Gateway(config, errlog=QUIET)
    direct_args, gateway_args = conversions(), conversions()
    async with (
        gateway.running(),
        durable.running(),
        Client(durable.server.lowlevel(Subject(id="bench", tenant="acme"))) as stored,
        Client(stdio_client(time_server, errlog=QUIET)) as direct,
        Client(gateway.server.lowlevel(Subject(id="bench", tenant="acme"))) as guarded,
        Client(stdio_client(gateway_process, errlog=QUIET)) as remote,
        Client(stdio_client(time_server, errlog=QUIET)) as relayed_upstream,
        Client(relay(relayed_upstream)) as relayed,
    ):
        paths: Paths = {
            "direct": lambda: direct.call_tool("get_current_time", ARGS),
            "gateway": lambda: guarded.call_tool("time.get_current_time", ARGS),
            "gateway over stdio": lambda: remote.call_tool("time.get_current_time", ARGS),
            "SDK relay, no guard": lambda: relayed.call_tool("get_current_time", ARGS),
            "gateway (SQLite)": lambda: stored.call_tool("time.get_current_time", ARGS),
            "direct write": lambda: direct.call_tool("convert_time", direct_args()),
            "gateway write (SQLite)": lambda: stored.call_tool("time.convert_time", gateway_args()),
        }
        latency, cpu, rate = await measure(paths)
    base_us = min(latency["direct"])
    table(
        f"get_current_time via mcp-server-time; {CALLS} calls x {ROUNDS} rounds",
        "direct",
        latency,
        cpu,
        rate,
    )
    for name, base in (
        ("gateway", "direct"),
        ("SDK relay, no guard", "direct"),
        ("gateway (SQLite)", "direct"),
        ("gateway write (SQLite)", "direct write"),
    ):
        within = [g / d for g, d in zip(latency[name], latency[base], strict=True)]
        rates = [g / d for g, d in zip(rate[name], rate[base], strict=True)]
        print(
            f"{name} / {base} within each round: median {statistics.median(within):.2f}, "
            f"best {min(within):.2f}; calls/s median {statistics.median(rates):.2f}"
        )
    # CPU time of this process does not count the time other processes took the
    # cores: on a busy machine it is the steadier measure of what the gateway costs.
    added = min(cpu["gateway"]) - min(cpu["direct"])
    print(
        f"the gateway's own work: {added:.0f} µs CPU per call "
        f"({added / base_us:.0%} of a direct call's {base_us:.0f} µs)"
    )
    relayed = min(cpu["SDK relay, no guard"]) - min(cpu["direct"])
    print(
        f"the SDK relay's own work: {relayed:.0f} µs CPU per call; the guard's beyond it: "
        f"{added - relayed:.0f} µs"
    )
    if PEERS_TOO:
        await peers(folder)


if __name__ == "__main__":
    asyncio.run(main())

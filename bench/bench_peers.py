"""toolbound's guarded path beside the tool paths of its peers, in one process, one run.

Every path calls the same ``get_order`` function (one string argument, a small
typed result) from the same JSON argument text, and each framework generates the
same input schema from its type hints (``{"order_id": string}``, required, no
other field). What each path does:

* **bare (e)**: ``json.loads`` + a compiled jsonschema-rs validator + an RFC 8785
  digest (toolbound's canonical form and framed SHA-256) + the call: the floor any guarded
  path stands on;
* **openai-agents**: ``function_tool(...).on_invoke_tool(ctx, json)`` — pydantic
  validation, the call, output serialization; a sync tool goes through
  ``asyncio.to_thread``;
* **pydantic-ai**: ``ToolManager.handle_call`` on a ``FunctionToolset`` — pydantic
  validation and the call; a sync tool goes through ``anyio.to_thread``;
* **mcp**: the SDK's ``MCPServer.call_tool`` (the arguments already decoded, as the
  server has them) — pydantic validation, the call, result conversion; a sync tool
  goes through ``anyio.to_thread``;
* **toolbound**: the whole guarded path — strict parse, schema, normalize, RFC 8785
  digest, authorization, execution, output contract, redaction, envelope and the
  trace — as ``Runtime.run`` with an inline sync tool, ``Runtime.arun`` with an
  async tool, and a sync tool on toolbound's worker pool (from ``run`` and from
  ``arun``).

Short rounds of all paths take turns (many of them: the best round of each path
is the one the machine disturbed least). Ratios are to bare (e) and to the
fastest peer async path, and, for the rows that run a sync tool off the caller's
thread, to the fastest peer doing the same.

Run: ``.venv/bin/python bench/bench_peers.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import asyncio
import json
import sys
import warnings
from importlib.metadata import version
from typing import TYPE_CHECKING, TypedDict

import jsonschema_rs
from agents import function_tool
from agents.tool_context import ToolContext
from mcp.server import MCPServer
from pydantic_ai import FunctionToolset, RunContext
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.models.test import TestModel
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.usage import RunUsage

from benchkit import QUICK, best_of
from toolbound import CallContext, Grant, GrantPolicy, Proposal, Registry, Runtime, Subject
from toolbound.define import define
from toolbound.gates.normalize import canonical_json, digest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

ARGS = '{"order_id": "A-104"}'


class Order(TypedDict):
    """One order, as the lookup returns it."""

    order_id: str
    status: str
    total_cents: int


def get_order(order_id: str) -> Order:
    """Look up one order.

    Args:
        order_id: The order's id.

    """
    return {"order_id": order_id, "status": "shipped", "total_cents": 4200}


async def aget_order(order_id: str) -> Order:
    """Look up one order.

    Args:
        order_id: The order's id.

    """
    return {"order_id": order_id, "status": "shipped", "total_cents": 4200}


# -- bare (e) ------------------------------------------------------------------------------


def bare_path() -> Callable[[], Awaitable[object]]:
    """json.loads + compiled jsonschema-rs + RFC 8785 digest + the call."""
    schema = define(get_order, effect="read").spec.input_schema
    validator = jsonschema_rs.validator_for(dict(schema))

    async def call() -> object:
        args = json.loads(ARGS)
        if not validator.is_valid(args):
            raise AssertionError(args)
        digest(
            tenant="acme", tool_name="get_order", tool_version="v1", canonical=canonical_json(args)
        )
        return get_order(**args)

    return call


# -- the peers -----------------------------------------------------------------------------


def agents_path(fn: Callable[..., object]) -> Callable[[], Awaitable[object]]:
    """The OpenAI Agents SDK's ``FunctionTool.on_invoke_tool``."""
    tool = function_tool(fn, name_override="get_order")
    ctx = ToolContext(context=None, tool_name="get_order", tool_call_id="c1", tool_arguments=ARGS)

    async def call() -> object:
        return await tool.on_invoke_tool(ctx, ARGS)

    return call


async def pydantic_ai_path(fn: Callable[..., object]) -> Callable[[], Awaitable[object]]:
    """Pydantic AI's ``ToolManager.handle_call`` on a function toolset."""
    toolset = FunctionToolset[None]()
    toolset.add_function(fn, name="get_order")
    run = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    manager = await ToolManager(toolset=toolset).for_run_step(run)
    part = ToolCallPart("get_order", ARGS, tool_call_id="c1")

    async def call() -> object:
        return await manager.handle_call(part)

    return call


def mcp_path(fn: Callable[..., object]) -> Callable[[], Awaitable[object]]:
    """The MCP SDK's ``MCPServer.call_tool`` (JSON decoded, as the server receives it)."""
    server = MCPServer("bench")
    server.add_tool(fn, name="get_order")

    async def call() -> object:
        return await server.call_tool("get_order", json.loads(ARGS))

    return call


# -- toolbound -----------------------------------------------------------------------------


def toolbound_paths() -> tuple[Runtime, dict[str, Callable[[], Awaitable[object]]]]:
    """``get_order`` inline, pooled and async, granted to mira."""
    inline, pooled, coroutine = Registry(), Registry(), Registry()
    define(get_order, effect="read", capabilities=("orders:read",)).register(inline, inline=True)
    define(get_order, effect="read", capabilities=("orders:read",)).register(pooled)
    define(aget_order, name="get_order", effect="read", capabilities=("orders:read",)).register(
        coroutine
    )
    grant = Grant(
        subject="mira", tenant="acme", capability="orders:read", actions=frozenset({"read"})
    )
    runtime = Runtime(policy=GrantPolicy([grant]))
    mira = Subject(id="mira", tenant="acme")
    contexts = {
        name: CallContext(subject=mira, tools=registry.toolset())
        for name, registry in (("inline", inline), ("pooled", pooled), ("async", coroutine))
    }
    proposal = Proposal(name="get_order", arguments=ARGS.encode(), proposal_id="c1")

    def checked(outcome: object) -> object:
        if getattr(outcome, "kind", None) != "observed":
            raise AssertionError(outcome)
        return outcome

    async def run_inline() -> object:
        return checked(runtime.run(proposal, contexts["inline"]))

    async def arun_async() -> object:
        return checked(await runtime.arun(proposal, contexts["async"]))

    async def run_pooled() -> object:
        return checked(runtime.run(proposal, contexts["pooled"]))

    async def arun_pooled() -> object:
        return checked(await runtime.arun(proposal, contexts["pooled"]))

    return runtime, {
        "toolbound run, inline sync tool": run_inline,
        "toolbound arun, async tool": arun_async,
        "toolbound run, pooled sync tool": run_pooled,
        "toolbound arun, pooled sync tool": arun_pooled,
    }


ASYNC_PEERS = ("openai-agents, async tool", "pydantic-ai, async tool", "mcp, async tool")
THREAD_PEERS = (
    "openai-agents, sync tool (to_thread)",
    "pydantic-ai, sync tool (to_thread)",
    "mcp, sync tool (to_thread)",
)
OFF_THREAD = ("toolbound run, pooled sync tool", "toolbound arun, pooled sync tool")


async def main() -> None:
    """Measure every path in interleaved rounds and print µs/call with ratios."""
    # Pydantic AI cannot describe the TypedDict result and says so; the call is the same.
    warnings.filterwarnings("ignore", "Could not generate return schema", UserWarning)
    runtime, ours = toolbound_paths()
    paths: dict[str, Callable[[], Awaitable[object]]] = {
        "bare (e)": bare_path(),
        "openai-agents, async tool": agents_path(aget_order),
        "pydantic-ai, async tool": await pydantic_ai_path(aget_order),
        "mcp, async tool": mcp_path(aget_order),
        "openai-agents, sync tool (to_thread)": agents_path(get_order),
        "pydantic-ai, sync tool (to_thread)": await pydantic_ai_path(get_order),
        "mcp, sync tool (to_thread)": mcp_path(get_order),
        **ours,
    }
    for name, call in paths.items():
        if "A-104" not in str(await call()):
            raise AssertionError(name)
    # Many short rounds: on a shared machine the best of them is the least disturbed.
    us = await best_of(paths, 20, rounds=100 if QUICK else 400, warmup=200)
    runtime.close()

    bare = us["bare (e)"]
    fastest = min(ASYNC_PEERS, key=us.__getitem__)
    fastest_thread = min(THREAD_PEERS, key=us.__getitem__)
    py = sys.version.split()[0]
    versions = ", ".join(
        f"{p} {version(p)}" for p in ("openai-agents", "pydantic-ai-slim", "mcp", "jsonschema-rs")
    )
    print(f"get_order({ARGS}); Python {py}; {versions}")
    print(f"fastest peer (async): {fastest}; fastest peer (sync off-thread): {fastest_thread}")
    print(f"{'path':<38} {'µs/call':>8} {'/ bare':>7} {'/ peer':>7} {'/ thread peer':>14}")
    for name, value in us.items():
        thread = f"{value / us[fastest_thread]:>14.2f}" if name in OFF_THREAD else ""
        print(f"{name:<38} {value:>8.1f} {value / bare:>7.1f} {value / us[fastest]:>7.2f}{thread}")


if __name__ == "__main__":
    asyncio.run(main())

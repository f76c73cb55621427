"""Pydantic AI's own tool path against the same tool through toolbound, in one run.

Measured where the two differ: Pydantic AI's ``ToolManager.handle_call`` for one tool
call — argument validation, then execution through the toolset — with no model and no
agent graph. Baseline: the typed function as a plain Pydantic AI function tool
(pydantic-core validates the JSON, the function runs). toolbound: the same function
made a tool with ``toolbound.define``, served by ``ToolboundToolset`` (strict parse,
schema, digest, authorization, execution, output contract, envelope, trace), its sync
tool run inline (the default pool is shown too). The cost is then split: the toolset's
own ``call_tool`` (with its validator) against ``Runtime.arun`` alone on the same bytes
gives the integration's glue. A whole ``Agent.run`` (FunctionModel: one tool call,
then an answer) is shown for scale. Rounds of all paths take turns.

Run: ``.venv/bin/python bench/bench_pydantic_ai.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic_ai import Agent, FunctionToolset, RunContext
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.usage import RunUsage

from benchkit import QUICK, arguments, best_of, lookup, setup
from toolbound import Proposal
from toolbound.integrations.pydantic_ai import ToolboundToolset

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.toolsets import AbstractToolset


async def manager(toolset: AbstractToolset[None]) -> ToolManager[None]:
    """A tool manager prepared for one run step, as an agent run makes it."""
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    return await ToolManager(toolset=toolset).for_run_step(ctx)


def one_call_model(args: str) -> FunctionModel:
    """A model that calls ``lookup`` once, then answers."""

    def respond(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("lookup", args, tool_call_id="c1")])

    return FunctionModel(respond)


async def main() -> None:
    """Measure and print."""
    world = setup()
    runtime, inline_ctx, pooled_ctx = world.runtime, world.inline, world.pooled
    plain = FunctionToolset[None]([lookup])
    guarded_inline = ToolboundToolset[None](runtime, inline_ctx)
    guarded_pooled = ToolboundToolset[None](runtime, pooled_ctx)
    call_ctx = replace(
        RunContext(deps=None, model=TestModel(), usage=RunUsage()), tool_call_id="c1"
    )
    direct_tool = (await guarded_inline.get_tools(call_ctx))["lookup"]
    managers = {
        "plain": await manager(plain),
        "inline": await manager(guarded_inline),
        "pooled": await manager(guarded_pooled),
    }

    print("tool path: ToolManager.handle_call (validate + execute), µs per call")
    print(
        f"{'notes':>6} {'bytes':>6} {'pydantic-ai':>12} {'toolbound':>10} {'ratio':>6}"
        f" {'pooled':>8} {'ratio':>6} {'call_tool':>10} {'arun alone':>11} {'glue':>6}"
    )
    for notes in (0, 30) if QUICK else (0, 30, 300, 3000):
        args = arguments(notes)
        n = max(50, (2_000 if QUICK else 10_000) // (notes + 1))
        part = ToolCallPart("lookup", args, tool_call_id="c1")
        calls: dict[str, Callable[[], Awaitable[object]]] = {}
        for name, tm in managers.items():

            async def handle(tm: ToolManager[None] = tm, part: ToolCallPart = part) -> object:
                return await tm.handle_call(part)

            if "A-104" not in str(await handle()):
                raise AssertionError(name)
            calls[name] = handle
        proposal = Proposal(name="lookup", arguments=args.encode(), proposal_id="c1")

        async def bare(p: Proposal = proposal) -> object:
            return await runtime.arun(p, inline_ctx)

        calls["arun"] = bare

        async def direct(text: str = args) -> object:
            # What the toolset itself adds: its validator and call_tool, no ToolManager.
            kept = direct_tool.args_validator.validate_json(text)
            return await guarded_inline.call_tool("lookup", kept, call_ctx, direct_tool)

        calls["call_tool"] = direct
        us = await best_of(calls, n)
        base = us["plain"]
        print(
            f"{notes:>6} {len(args):>6} {base:>12.1f} {us['inline']:>10.1f}"
            f" {us['inline'] / base:>6.1f} {us['pooled']:>8.1f} {us['pooled'] / base:>6.1f}"
            f" {us['call_tool']:>10.1f} {us['arun']:>11.1f} {us['call_tool'] - us['arun']:>6.1f}"
        )

    print()
    print("whole run: Agent.run, FunctionModel, one tool call then an answer, µs per run")
    args = arguments(0)
    plain_agent = Agent(one_call_model(args), toolsets=[plain])
    guarded_agent = Agent(one_call_model(args), toolsets=[guarded_inline])
    runs = 100 if QUICK else 500
    whole = await best_of(
        {"alone": lambda: plain_agent.run("go"), "guarded": lambda: guarded_agent.run("go")}, runs
    )
    alone, guarded = whole["alone"], whole["guarded"]
    print(f"  pydantic-ai alone {alone:>9.1f}")
    print(f"  through toolbound {guarded:>9.1f}  ({guarded / alone:.2f}x, {guarded - alone:+.1f})")
    runtime.close()


if __name__ == "__main__":
    asyncio.run(main())

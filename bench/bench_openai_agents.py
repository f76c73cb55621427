"""The OpenAI Agents SDK's own tool path against the same tool through toolbound, in one run.

Measured where the two differ and nothing else: one tool call handed to a
``FunctionTool``, with no model and no run loop. Baseline: the typed function as a
plain SDK ``@function_tool``, invoked through its ``on_invoke_tool`` with the JSON
argument string (pydantic validates, the function runs, the SDK serializes the
output). toolbound: the same function made a tool with ``toolbound.define`` and
served by ``GuardedTools`` (strict parse, schema, digest, authorization, execution,
output contract, envelope, trace), invoked the same way. A run also asks each
guarded tool's ``needs_approval`` first (toolbound's gates, looking ahead), so that
is shown too, and ``Runtime.arun`` alone on the same bytes, so the integration's own
cost is the difference. Last, a whole ``Runner.run`` (a scripted model: one tool
call, then an answer) for scale.

Run: ``.venv/bin/python bench/bench_openai_agents.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from agents import Agent, FunctionTool, RunConfig, RunContextWrapper, Runner, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from benchkit import QUICK, arguments, best_of, lookup, setup
from toolbound import Proposal
from toolbound.integrations.openai_agents import GuardedTools

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


class OneCallModel(Model):
    """Calls ``lookup`` once, then answers: the SDK's Model interface, scripted."""

    def __init__(self, args: str) -> None:
        self.args = args

    async def get_response(self, *args: object, **kwargs: object) -> ModelResponse:
        """A call on a fresh input, an answer once a tool output is in the input."""
        items = kwargs["input"] if "input" in kwargs else args[1]
        if isinstance(items, list) and any(
            isinstance(i, dict) and i.get("type") == "function_call_output" for i in items
        ):
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            answer = ResponseOutputMessage(
                type="message", id="m", role="assistant", status="completed", content=[text]
            )
            return ModelResponse(output=[answer], usage=Usage(), response_id=None)
        call = ResponseFunctionToolCall(
            type="function_call", call_id="c1", name="lookup", arguments=self.args
        )
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args: object, **kwargs: object) -> Any:  # noqa: ANN401
        """Not used."""
        raise NotImplementedError


def invoker(tool: FunctionTool, args: str) -> Callable[[], Awaitable[object]]:
    """One ``on_invoke_tool`` call with ``args``, as the SDK makes it."""
    ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id="c1", tool_arguments=args)

    async def invoke() -> object:
        return await tool.on_invoke_tool(ctx, args)

    return invoke


def asked_then_invoked(tool: FunctionTool, args: str) -> Callable[[], Awaitable[object]]:
    """``needs_approval`` (as a run asks it first), then ``on_invoke_tool``."""
    ask = tool.needs_approval
    if not callable(ask):
        raise TypeError(tool.name)
    wrapper: RunContextWrapper[None] = RunContextWrapper(context=None)
    invoke = invoker(tool, args)

    async def both() -> object:
        if await ask(wrapper, json.loads(args), "c1"):
            raise AssertionError(tool.name)
        return await invoke()

    return both


async def main() -> None:
    """Measure and print."""
    world = setup()
    runtime, inline_ctx, pooled_ctx = world.runtime, world.inline, world.pooled
    plain = function_tool(lookup)
    (guarded_inline,) = GuardedTools(runtime, inline_ctx).tools
    (guarded_pooled,) = GuardedTools(runtime, pooled_ctx).tools
    assert isinstance(guarded_inline, FunctionTool)
    assert isinstance(guarded_pooled, FunctionTool)

    print("tool path: FunctionTool.on_invoke_tool(ctx, json), µs per call")
    print(
        f"{'notes':>6} {'bytes':>6} {'agents sdk':>11} {'toolbound':>10} {'ratio':>6}"
        f" {'+approval?':>11} {'ratio':>6} {'pooled':>8} {'ratio':>6}"
        f" {'arun alone':>11} {'glue':>6}"
    )
    for notes in (0, 30) if QUICK else (0, 30, 300, 3000):
        args = arguments(notes)
        n = max(50, (2_000 if QUICK else 10_000) // (notes + 1))
        calls = {
            "plain": invoker(plain, args),
            "inline": invoker(guarded_inline, args),
            "asked": asked_then_invoked(guarded_inline, args),
            "pooled": invoker(guarded_pooled, args),
        }
        for name, call in calls.items():
            if "A-104" not in str(await call()):
                raise AssertionError(name)
        proposal = Proposal(name="lookup", arguments=args.encode(), proposal_id="c1")

        async def bare(p: Proposal = proposal) -> object:
            return await runtime.arun(p, inline_ctx)

        calls["arun"] = bare
        us = await best_of(calls, n)
        base = us["plain"]
        print(
            f"{notes:>6} {len(args):>6} {base:>11.1f} {us['inline']:>10.1f}"
            f" {us['inline'] / base:>6.1f} {us['asked']:>11.1f} {us['asked'] / base:>6.1f}"
            f" {us['pooled']:>8.1f} {us['pooled'] / base:>6.1f}"
            f" {us['arun']:>11.1f} {us['inline'] - us['arun']:>6.1f}"
        )

    print()
    print("whole run: Runner.run, scripted model, one tool call then an answer, µs per run")
    args = arguments(0)
    config = RunConfig(tracing_disabled=True)
    plain_agent: Agent[None] = Agent(name="a", model=OneCallModel(args), tools=[plain])
    guarded_agent: Agent[None] = Agent(name="a", model=OneCallModel(args), tools=[guarded_inline])
    runs = 50 if QUICK else 300
    whole = await best_of(
        {
            "alone": lambda: Runner.run(plain_agent, "go", run_config=config),
            "guarded": lambda: Runner.run(guarded_agent, "go", run_config=config),
        },
        runs,
    )
    alone, guarded = whole["alone"], whole["guarded"]
    print(f"  agents sdk alone  {alone:>9.1f}")
    print(f"  through toolbound {guarded:>9.1f}  ({guarded / alone:.2f}x, +{guarded - alone:.1f})")
    runtime.close()


if __name__ == "__main__":
    asyncio.run(main())

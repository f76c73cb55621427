"""toolbound's guarded path beside the tool paths of its peers, in one process, one run.

Every path calls the same ``get_order`` function (one string argument, a small
typed result) from the same JSON argument text, and each framework generates the
same input schema from its type hints (``{"order_id": string}``, required, no
other field). What each path does:

* **bare (e)**: ``json.loads`` + a compiled jsonschema-rs validator + an RFC 8785
  digest (toolbound's canonical form and framed SHA-256) + the call: the floor any guarded
  path stands on. A second row makes the digest over the ``rfc8785`` package's
  canonical form (the same bytes, through the reference package): the floor as it is
  built from the usual parts; ratios are to the first;
* **bare (e) + the guard's steps**: bare (e) and, written straight with no runtime,
  each step the guarded path adds for this call: the grant looked up by (subject,
  tenant, capability), the result checked against its output schema, the model's
  envelope written, and the ten trace events (a tuple each, with its own clock
  reading) kept with the answer. No state machine, no frozen values, no outcome
  type, no adapters: the least any Python runtime does for the same guarantees and
  record, and the floor under toolbound's rows;
* **openai-agents**: ``function_tool(...).on_invoke_tool(ctx, json)`` — pydantic
  validation, the call, output serialization; a sync tool goes through
  ``asyncio.to_thread``. This is the SDK's barest invoker, the "fastest peer" rows;
* **openai-agents runner step**: the same tool called as the SDK's ``Runner`` calls it
  for a model response holding that one call: ``get_single_step_result_from_response``,
  the function ``run_single_turn`` hands the model's response to. It turns the
  response into a ``ProcessedResponse`` (tool lookup, call-id and approval
  bookkeeping), records tool use, and runs the call through
  ``execute_function_tool_calls``: enabled-tool check, the tool input guardrails,
  ``on_tool_start``/``on_tool_end`` hooks, the tracing ``function_span``, the invoker,
  the tool output guardrails (none configured here, as by default), the
  ``ToolCallOutputItem``; then it decides the next step. Its
  arguments are the objects the runner builds: an ``Agent`` with the tool,
  ``bind_public_agent``, the agent's tools, handoffs and output schema (resolved once,
  as the runner does before the model request), ``RunHooks()``, ``RunConfig()``, and
  the ``ResponseFunctionToolCall`` the model would have sent, in a ``ModelResponse``.
  Each call is one run's turn: a fresh ``RunContextWrapper`` and
  ``AgentToolUseTracker``, as ``Runner.run`` makes per run (the step records the call
  id in the context, so a reused context would skip the call as already done). The
  model's ``on_llm_end`` hooks and the agent span belong to the turn, not the tool,
  and are left out. Measured twice: *tracing off* (``RunConfig(tracing_disabled=True)``:
  no span) and *spans, no export* (``RunConfig()`` inside the ``trace(...)`` a
  run opens, one per call, with the default processors replaced by none through
  ``set_trace_processors([])`` before any trace starts, so spans are made and nothing
  leaves the process: the exporter's thread never starts). Why the step and not a
  whole ``Runner.run`` with a scripted model minus a run without the call: the step
  needs nothing only a run can build, and the subtraction leaves the tool call as the
  difference of two numbers each several times larger, with the second model turn
  (or a ``stop_on_first_tool`` final output) in it. The step is internal API
  (``agents.run_internal``): if a later SDK moves it, this script fails at import
  rather than measuring something else;
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
fastest peer async path (the fastest bare invoker), for the rows that run a sync
tool off the caller's thread to the fastest peer doing the same, and for
toolbound's rows to the fastest openai-agents runner step.

Run: ``.venv/bin/python bench/bench_peers.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import warnings
from importlib.metadata import version
from typing import TYPE_CHECKING, Any, TypedDict

import jsonschema_rs
import rfc8785
from agents import (
    Agent,
    ModelResponse,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Tool,
    TracingProcessor,
    Usage,
    function_tool,
    set_trace_processors,
    trace,
)
from agents.items import ToolCallOutputItem
from agents.run_internal.agent_bindings import bind_public_agent
from agents.run_internal.tool_use_tracker import AgentToolUseTracker
from agents.run_internal.turn_preparation import get_all_tools, get_handoffs, get_output_schema
from agents.run_internal.turn_resolution import get_single_step_result_from_response
from agents.tool_context import ToolContext
from mcp.server import MCPServer
from openai.types.responses import ResponseFunctionToolCall
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

    from agents.tracing import Span, Trace

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


def bare_path(
    canonical: Callable[[Any], bytes] = canonical_json,
) -> Callable[[], Awaitable[object]]:
    """json.loads + compiled jsonschema-rs + RFC 8785 digest + the call.

    ``canonical`` makes the RFC 8785 form the digest is taken over: toolbound's own, or
    the ``rfc8785`` package's (the same bytes, the floor as built from the usual parts).
    """
    schema = define(get_order, effect="read").spec.input_schema
    validator = jsonschema_rs.validator_for(dict(schema))

    async def call() -> object:
        args = json.loads(ARGS)
        if not validator.is_valid(args):
            raise AssertionError(args)
        digest(tenant="acme", tool_name="get_order", tool_version="v1", canonical=canonical(args))
        return get_order(**args)

    return call


def guard_floor_path() -> Callable[[], Awaitable[object]]:
    """Bare (e) plus the guard's steps for this call, written straight (the module says which)."""
    spec = define(get_order, effect="read").spec
    validator = jsonschema_rs.validator_for(dict(spec.input_schema))
    output = jsonschema_rs.validator_for(dict(spec.output_schema or {}))
    grants = {("mira", "acme", "orders:read"): frozenset({"read"})}
    envelope = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    now = time.time

    async def call() -> object:
        trace: list[tuple[int, float, str, object]] = []
        add = trace.append
        add((0, now(), "proposal", ARGS))
        args = json.loads(ARGS)
        add((1, now(), "parsed", args))
        if not validator.is_valid(args):
            raise AssertionError(args)
        key = digest(
            tenant="acme", tool_name="get_order", tool_version="v1", canonical=canonical_json(args)
        )
        add((2, now(), "validated", key))
        if "read" not in grants.get(("mira", "acme", "orders:read"), ()):
            raise AssertionError(args)
        add((3, now(), "authorized", "orders:read"))
        add((4, now(), "prepared", now() + 10.0))
        add((5, now(), "executing", 1))
        started = now()
        result = await aget_order(**args)
        add((6, now(), "attempt", started))
        add((7, now(), "committed", None))
        if not output.is_valid(result):
            raise AssertionError(result)
        add((8, now(), "observed", result))
        message = envelope(
            {"type": "tool_result", "call_id": "c1", "tool": "get_order@v1", "status": "ok",
             "trust": "untrusted_tool_data", "data": result, "truncated": False}
        )  # fmt: skip
        add((9, now(), "tool_message", message))
        return message, trace

    return call


# -- the peers -----------------------------------------------------------------------------


def agents_path(fn: Callable[..., object]) -> Callable[[], Awaitable[object]]:
    """The OpenAI Agents SDK's ``FunctionTool.on_invoke_tool``."""
    tool = function_tool(fn, name_override="get_order")
    ctx = ToolContext(context=None, tool_name="get_order", tool_call_id="c1", tool_arguments=ARGS)

    async def call() -> object:
        return await tool.on_invoke_tool(ctx, ARGS)

    return call


async def agents_runner_path(
    fn: Callable[..., object], *, spans: bool, hooks: RunHooks[None] | None = None
) -> Callable[[], Awaitable[object]]:
    """The Agents SDK's turn step for a model response holding one ``get_order`` call.

    ``spans``: tracing on, inside a run's ``trace``; otherwise tracing off, as
    ``RunConfig(tracing_disabled=True)`` runs it. The call answers the outputs of the
    step's tool-output items.
    """
    agent = Agent[None](name="bench", tools=[function_tool(fn, name_override="get_order")])
    bindings = bind_public_agent(agent)
    turn = RunContextWrapper[None](context=None)
    all_tools = await get_all_tools(agent, turn)
    handoffs = await get_handoffs(agent, turn)
    output_schema = get_output_schema(agent)
    tool_call = ResponseFunctionToolCall(
        type="function_call",
        id="fc_1",
        call_id="c1",
        name="get_order",
        arguments=ARGS,
        status="completed",
    )
    response = ModelResponse(output=[tool_call], usage=Usage(), response_id="resp_1")
    config = RunConfig(tracing_disabled=not spans)
    run_hooks = RunHooks[None]() if hooks is None else hooks

    async def step() -> object:
        result = await get_single_step_result_from_response(
            bindings=bindings,
            all_tools=all_tools,
            original_input="Where is my order?",
            pre_step_items=[],
            new_response=response,
            output_schema=output_schema,
            handoffs=handoffs,
            hooks=run_hooks,
            context_wrapper=RunContextWrapper[None](context=None),
            run_config=config,
            tool_use_tracker=AgentToolUseTracker(),
        )
        items = result.new_step_items
        return [item.output for item in items if isinstance(item, ToolCallOutputItem)]

    async def traced_step() -> object:
        with trace("Agent workflow"):
            return await step()

    return traced_step if spans else step


class ToolHooks(RunHooks[None]):
    """Run hooks that note each tool start and end."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def on_tool_start(
        self, context: RunContextWrapper[None], agent: Agent[None], tool: Tool
    ) -> None:
        """Note the start."""
        del context, agent
        self.seen.append(f"start {tool.name}")

    async def on_tool_end(
        self, context: RunContextWrapper[None], agent: Agent[None], tool: Tool, result: object
    ) -> None:
        """Note the end."""
        del context, agent, result
        self.seen.append(f"end {tool.name}")


class SpanRecorder(TracingProcessor):
    """A trace processor that keeps the kind and name of each span that ended."""

    def __init__(self) -> None:
        self.ended: list[str] = []

    def on_trace_start(self, trace: Trace) -> None:
        """Nothing to keep."""

    def on_trace_end(self, trace: Trace) -> None:
        """Nothing to keep."""

    def on_span_start(self, span: Span[Any]) -> None:
        """Nothing to keep."""

    def on_span_end(self, span: Span[Any]) -> None:
        """Keep the span's kind and name."""
        self.ended.append(f"{span.span_data.type} {getattr(span.span_data, 'name', '')}")

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self) -> None:
        """Nothing buffered."""


async def check_agents_runner() -> None:
    """The runner step runs the tool between its hooks, in a function span only if traced.

    Then it leaves the SDK's tracing with no processor: spans are made, nothing is exported.
    """
    recorder = SpanRecorder()
    set_trace_processors([recorder])
    for spans in (False, True):
        hooks = ToolHooks()
        outputs = await (await agents_runner_path(aget_order, spans=spans, hooks=hooks))()
        if outputs != [await aget_order("A-104")]:
            raise AssertionError(outputs)
        if hooks.seen != ["start get_order", "end get_order"]:
            raise AssertionError(hooks.seen)
        if recorder.ended != (["function get_order"] if spans else []):
            raise AssertionError(recorder.ended)
        recorder.ended.clear()
    set_trace_processors([])


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
RUNNER_STEPS = (
    "openai-agents runner step, async tool, tracing off",
    "openai-agents runner step, async tool, spans, no export",
    "openai-agents runner step, sync tool (to_thread), tracing off",
    "openai-agents runner step, sync tool (to_thread), spans, no export",
)


async def main() -> None:
    """Measure every path in interleaved rounds and print µs/call with ratios."""
    # Pydantic AI cannot describe the TypedDict result and says so; the call is the same.
    warnings.filterwarnings("ignore", "Could not generate return schema", UserWarning)
    # Before any trace starts: the SDK's default exporter is replaced by no processor.
    await check_agents_runner()
    runtime, ours = toolbound_paths()
    runner = dict(
        zip(
            RUNNER_STEPS,
            [
                await agents_runner_path(fn, spans=spans)
                for fn in (aget_order, get_order)
                for spans in (False, True)
            ],
            strict=True,
        )
    )
    paths: dict[str, Callable[[], Awaitable[object]]] = {
        "bare (e)": bare_path(),
        "bare (e), rfc8785 package": bare_path(rfc8785.dumps),
        "bare (e) + the guard's steps": guard_floor_path(),
        "openai-agents, async tool": agents_path(aget_order),
        "pydantic-ai, async tool": await pydantic_ai_path(aget_order),
        "mcp, async tool": mcp_path(aget_order),
        "openai-agents, sync tool (to_thread)": agents_path(get_order),
        "pydantic-ai, sync tool (to_thread)": await pydantic_ai_path(get_order),
        "mcp, sync tool (to_thread)": mcp_path(get_order),
        **runner,
        **ours,
    }
    for name, call in paths.items():
        if "A-104" not in str(await call()):
            raise AssertionError(name)
    # Many short rounds: on a shared machine the best of them is the least disturbed.
    us = await best_of(paths, 20, rounds=100 if QUICK else 400, warmup=200)
    for name, call in paths.items():
        if "A-104" not in str(await call()):
            raise AssertionError(name)
    runtime.close()

    bare = us["bare (e)"]
    fastest = min(ASYNC_PEERS, key=us.__getitem__)
    fastest_thread = min(THREAD_PEERS, key=us.__getitem__)
    fastest_runner = min(RUNNER_STEPS, key=us.__getitem__)
    py = sys.version.split()[0]
    versions = ", ".join(
        f"{p} {version(p)}" for p in ("openai-agents", "pydantic-ai-slim", "mcp", "jsonschema-rs")
    )
    print(f"get_order({ARGS}); Python {py}; {versions}")
    print(f"fastest peer (async): {fastest}; fastest peer (sync off-thread): {fastest_thread}")
    print(f"fastest openai-agents runner step: {fastest_runner}")
    width = max(map(len, us))
    print(
        f"{'path':<{width}} {'µs/call':>8} {'/ bare':>7} {'/ peer':>7} {'/ thread peer':>14}"
        f" {'/ agents runner':>16}"
    )
    floor = us["bare (e) + the guard's steps"]
    for name, value in us.items():
        thread = f"{value / us[fastest_thread]:>14.2f}" if name in OFF_THREAD else f"{'':>14}"
        ours_to_runner = (
            f" {value / us[fastest_runner]:>16.3f}" if name.startswith("toolbound") else ""
        )
        print(
            f"{name:<{width}} {value:>8.1f} {value / bare:>7.1f} {value / us[fastest]:>7.2f}"
            f" {thread}{ours_to_runner}".rstrip()
        )
    print(
        "toolbound over bare (e) + the guard's steps: "
        + ", ".join(f"{name} {us[name] / floor:.1f}x" for name in ours)
    )


if __name__ == "__main__":
    asyncio.run(main())

"""LangGraph's ToolNode against toolbound's node on the same tool, in the same run.

Each measurement invokes a compiled one-node graph (START → tools → END) whose input
holds one AIMessage with ``calls`` tool calls, as langchain-openai builds it (argument
strings in ``additional_kwargs``). The tool is one typed function: wrapped by
LangChain's ``@tool`` for ``ToolNode``, by ``toolbound.define`` for ``ToolboundNode``.
A graph whose node answers without running anything gives the floor: what LangGraph
itself costs. Per-call overhead is (graph µs - floor µs) / calls. The graphs are timed
in turn within each round, so a busy machine slows them alike; each keeps its best round.

Run: ``.venv/bin/python bench/bench_langgraph.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import sys
import time
from functools import partial
from typing import TYPE_CHECKING, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool as langchain_tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from toolbound import CallContext, Grant, GrantPolicy, Registry, Runtime, Subject
from toolbound.define import define
from toolbound.integrations.langgraph import ToolboundNode

if TYPE_CHECKING:
    from collections.abc import Callable

QUICK = "--quick" in sys.argv
ROUNDS = 5 if QUICK else 30


class Order(TypedDict):
    """One order."""

    order_id: str
    status: str


def get_order(order_id: str) -> Order:
    """Look up one order.

    Args:
        order_id: The order id, like A-104.

    """
    return {"order_id": order_id, "status": "delivered"}


def message(calls: int) -> AIMessage:
    """An assistant message with ``calls`` calls, argument strings as OpenAI sends them."""
    raw = [
        {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "get_order", "arguments": f'{{"order_id": "A-{100 + i}"}}'},
        }
        for i in range(calls)
    ]
    return AIMessage("", additional_kwargs={"tool_calls": raw})


def floor_node(state: MessagesState) -> dict[str, list[ToolMessage]]:
    """Answers every call without running anything: the graph's own cost."""
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    return {
        "messages": [
            ToolMessage("{}", tool_call_id=str(c["id"]), name=c["name"]) for c in last.tool_calls
        ]
    }


def graph(node: object) -> Callable[[dict[str, object]], object]:
    """START → tools → END, compiled; returns its invoke."""
    builder = StateGraph(MessagesState)
    builder.add_node("tools", node)
    builder.add_edge(START, "tools")
    return builder.compile().invoke


def best_of_each(fns: dict[str, Callable[[], object]], n: int) -> dict[str, float]:
    """Best mean µs per call of each function over ``ROUNDS`` interleaved rounds."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(ROUNDS):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) / n * 1e6)
    return best


def main() -> None:
    """Measure and print."""
    pooled, inline = Registry(), Registry()
    define(get_order, effect="read", capabilities=("orders:read",)).register(pooled)
    define(get_order, effect="read", capabilities=("orders:read",)).register(inline, inline=True)
    grant = Grant(
        subject="mira", tenant="acme", capability="orders:read", actions=frozenset({"read"})
    )
    runtime = Runtime(policy=GrantPolicy([grant]))
    mira = Subject(id="mira", tenant="acme")
    graphs = {
        "floor": graph(floor_node),
        "ToolNode": graph(ToolNode([langchain_tool(get_order)])),
        "toolbound": graph(
            ToolboundNode(runtime, CallContext(subject=mira, tools=pooled.toolset()))
        ),
        "toolbound inline": graph(
            ToolboundNode(runtime, CallContext(subject=mira, tools=inline.toolset()))
        ),
    }

    print(f"{'calls':>5} {'graph':>17} {'µs/message':>11} {'µs/call over floor':>19} {'ratio':>6}")
    for calls in (1, 4):
        state = {"messages": [HumanMessage("go"), message(calls)]}
        runs = {name: partial(invoke, state) for name, invoke in graphs.items()}
        for run in runs.values():  # each answers every call, or it is no baseline
            out = run()
            assert isinstance(out, dict)
            assert len([m for m in out["messages"] if isinstance(m, ToolMessage)]) == calls
        us = best_of_each(runs, 20 if QUICK else 50)
        per_call = {name: (us[name] - us["floor"]) / calls for name in graphs}
        for name in graphs:
            ratio = "" if name == "floor" else f"{per_call[name] / per_call['ToolNode']:6.2f}"
            over = "" if name == "floor" else f"{per_call[name]:19.1f}"
            print(f"{calls:>5} {name:>17} {us[name]:>11.1f} {over:>19} {ratio:>6}")
    print("ratio: toolbound's per-call overhead over ToolNode's, same tool, same run")
    runtime.close()


if __name__ == "__main__":
    main()

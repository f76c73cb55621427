"""LangGraph's prebuilt ``ToolNode`` in a ``StateGraph``, fed an assistant message.

The message is built as ``langchain-openai`` builds it from a completion (the arguments
as the model's text). Two rows. :class:`LangGraphDefaults` gives ``ToolNode`` the kit's
tools as ``StructuredTool`` objects with their JSON Schemas, as the docs show.
:class:`LangGraphGuarded` adds what LangGraph offers for safety: a person's approval
through ``interrupt()`` in tools the grants mark for confirmation (resumed with
``Command(resume=...)`` on an ``InMemorySaver`` thread), and ``handle_tool_errors=True``
so a failure reaches the model as a message. LangGraph has no grants, no idempotency key
and no tool timeout.

The model's text is the ``ToolMessage`` content for the call; a call LangChain could
not parse becomes an ``invalid_tool_call`` that ``ToolNode`` never answers.

A turn of several calls is one assistant message with several tool calls, which
``ToolNode`` runs together. A loop is the docs' agent graph: a model node (here playing
scripted messages) and the ``ToolNode``, joined by ``tools_condition`` and bounded by
``recursion_limit`` (the guarded row sets it to two steps per model call of the case's
budget; the defaults row keeps LangGraph's own). LangGraph counts graph steps, not tool
calls: a tool-call budget is not applicable. Streams are not driven.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from tool_runtime_conformance.adapter import CUT_OFF, LoopObservation, NotApplicable, Observation
from tool_runtime_conformance.adapters._cancel import Cancelled, run_cancellable

try:
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import StructuredTool, ToolException
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.errors import GraphRecursionError
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition
    from langgraph.types import Command, interrupt
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = "this adapter needs LangGraph: pip install 'tool-runtime-conformance[langgraph]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    import threading
    from collections.abc import Mapping, Sequence

    from langchain_core.runnables import RunnableConfig

    from tool_runtime_conformance.adapter import Setup
    from tool_runtime_conformance.cases import Propose, ToolDef
    from tool_runtime_conformance.world import KitTool

__all__ = ["LangGraphDefaults", "LangGraphGuarded"]

APPROVE = "approve"
INTERLEAVED = (
    "this adapter drives LangGraph with whole assistant messages, where deltas "
    "interleaved between calls cannot be expressed"
)
NO_TOOL_CALL_BUDGET = (
    "LangGraph bounds a graph by recursion_limit, graph steps only; it has no tool-call budget"
)


def _message(calls: Sequence[Propose]) -> AIMessage:
    """An assistant message with these tool calls, as langchain-openai builds it."""
    raw = []
    for call in calls:
        if not call.complete:
            raise NotApplicable(CUT_OFF)
        arguments = call.arguments.decode("utf-8", "replace")
        function = {"name": call.tool, "arguments": arguments}
        raw.append({"id": call.call_id, "type": "function", "function": function})
    return AIMessage("", additional_kwargs={"tool_calls": raw})


def _tool(spec: ToolDef, tool: KitTool, *, ask: bool) -> StructuredTool:
    async def run(**arguments: object) -> dict[str, object]:
        if ask and interrupt({"tool": spec.name, "arguments": arguments}) != APPROVE:
            msg = "denied by a person"
            raise ToolException(msg)
        return await tool.acall(arguments)

    return StructuredTool.from_function(
        coroutine=run,
        name=spec.name,
        description=spec.description,
        args_schema=dict(spec.input_schema),
    )


def _config(call_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": call_id}}


class LangGraphDefaults:
    """``ToolNode`` with the kit's tools, nothing switched on."""

    name = "langgraph ToolNode (defaults)"
    versions: Mapping[str, str] = {
        "langgraph": version("langgraph"),
        "langchain-core": version("langchain-core"),
    }
    guarded = False

    def start(self, setup: Setup) -> None:
        """A graph START → tools → END over one ``ToolNode``, with a checkpointer."""
        confirm = {g.capability for g in setup.grants if g.confirm} if self.guarded else set()
        tools = [_tool(s, t, ask=s.capability in confirm) for s, t in setup.tools]
        self.asks = {s.name for s, _ in setup.tools if s.capability in confirm}
        self.node = ToolNode(tools, handle_tool_errors=True) if self.guarded else ToolNode(tools)
        builder = StateGraph(MessagesState)
        builder.add_node("tools", self.node)
        builder.add_edge(START, "tools")
        self.graph = builder.compile(checkpointer=InMemorySaver())

    def propose(self, proposal: Propose, cancel: threading.Event) -> Observation:
        """The assistant message as langchain-openai builds it, run through the graph."""
        if not proposal.complete:
            raise NotApplicable(CUT_OFF)
        raw = {
            "id": proposal.call_id,
            "type": "function",
            "function": {
                "name": proposal.tool,
                "arguments": proposal.arguments.decode("utf-8", "replace"),
            },
        }
        try:
            message = AIMessage("", additional_kwargs={"tool_calls": [raw]})
        except ValueError as exc:  # LangChain itself fails on arguments that are not an object
            return Observation(kind="failed", text="", detail=repr(exc))
        return self._run({"messages": [message]}, proposal.call_id, cancel)

    def _run(self, graph_input: Any, call_id: str, cancel: threading.Event) -> Observation:  # noqa: ANN401 - a state or a Command
        try:
            state = run_cancellable(self.graph.ainvoke(graph_input, _config(call_id)), cancel)
        except Cancelled:
            return Observation(kind="cancelled", text="")
        except Exception as exc:  # noqa: BLE001 - the graph raised; the model is told nothing
            return Observation(kind="failed", text="", detail=repr(exc))
        if state.get("__interrupt__"):
            return Observation(kind="asked", text="")
        return _answer(state, call_id)

    def propose_turn(
        self, calls: Sequence[Propose], cancel: threading.Event, *, interleaved: bool
    ) -> Mapping[str, Observation]:
        """One assistant message with every call; ``ToolNode`` runs them together."""
        if interleaved:
            raise NotApplicable(INTERLEAVED)
        try:
            message = _message(calls)
        except ValueError as exc:  # LangChain fails on arguments that are not an object
            return {c.call_id: Observation(kind="failed", text="", detail=repr(exc)) for c in calls}
        thread = calls[0].call_id
        try:
            state = run_cancellable(
                self.graph.ainvoke({"messages": [message]}, _config(thread)), cancel
            )
        except Exception as exc:  # noqa: BLE001 - the graph raised; the model is told nothing
            return {c.call_id: Observation(kind="failed", text="", detail=repr(exc)) for c in calls}
        asked = bool(state.get("__interrupt__"))
        return {
            c.call_id: Observation(kind="asked", text="")
            if asked and c.tool in self.asks
            else _answer(state, c.call_id)
            for c in calls
        }

    def run_loop(
        self, turns: Sequence[Sequence[Propose]], budgets: Mapping[str, int]
    ) -> LoopObservation:
        """The agent graph over scripted messages, bounded by ``recursion_limit``."""
        if "tool_calls" in budgets:
            raise NotApplicable(NO_TOOL_CALL_BUDGET)
        script = [_message(t) for t in turns]

        def model(state: MessagesState) -> dict[str, list[AIMessage]]:
            del state  # the script does not read what came back
            return {"messages": [script.pop(0) if script else AIMessage("done")]}

        builder = StateGraph(MessagesState)
        builder.add_node("model", model)
        builder.add_node("tools", self.node)
        builder.add_edge(START, "model")
        builder.add_conditional_edges("model", tools_condition)
        builder.add_edge("tools", "model")
        graph = builder.compile(checkpointer=InMemorySaver())
        config = _config("loop")
        if self.guarded and "model_calls" in budgets:
            config["recursion_limit"] = 2 * budgets["model_calls"]
        import threading  # noqa: PLC0415 - a loop is never cancelled here

        end, detail = "finished", ""
        try:
            run_cancellable(graph.ainvoke({"messages": []}, config), threading.Event())
        except GraphRecursionError as exc:
            end, detail = "stopped", repr(exc)
        except Exception as exc:  # noqa: BLE001 - the graph raised
            end, detail = "failed", repr(exc)
        state = graph.get_state(config).values
        calls = [c for t in turns for c in t]
        seen = {c.call_id: _answer(state, c.call_id) for c in calls}
        answered = {k: v for k, v in seen.items() if v.text or v.kind != "refused"}
        return LoopObservation(end=end, calls=answered, detail=detail)  # type: ignore[arg-type]

    def approve(self, call_id: str, shown: str) -> Observation:  # noqa: ARG002
        """Resume the call's thread: an interrupt is bound to a thread, not to arguments."""
        return self._resume(call_id, APPROVE)

    def deny(self, call_id: str) -> Observation:
        """Resume the call's thread with a refusal."""
        return self._resume(call_id, "deny")

    def _resume(self, call_id: str, decision: str) -> Observation:
        waiting = self.graph.get_state(_config(call_id))
        if not waiting.interrupts:
            return Observation(kind="failed", text="", detail="nothing waits for approval")
        import threading  # noqa: PLC0415 - a decision is never cancelled

        return self._run(Command(resume=decision), call_id, threading.Event())

    def close(self) -> None:
        """Nothing to release."""


class LangGraphGuarded(LangGraphDefaults):
    """``ToolNode`` with ``interrupt()`` approval and tool errors sent to the model."""

    name = "langgraph ToolNode (interrupt approval, tool errors)"
    guarded = True


def _answer(state: Mapping[str, Any], call_id: str) -> Observation:
    replies = [
        m
        for m in state.get("messages", [])
        if isinstance(m, ToolMessage) and m.tool_call_id == call_id
    ]
    if not replies:
        return Observation(kind="refused", text="", detail="no ToolMessage for the call")
    reply = replies[-1]
    text = reply.content if isinstance(reply.content, str) else str(reply.content)
    return Observation(kind="failed" if reply.status == "error" else "ran", text=text)

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
"""

from __future__ import annotations

from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from tool_runtime_conformance.adapter import CUT_OFF, NotApplicable, Observation
from tool_runtime_conformance.adapters._cancel import Cancelled, run_cancellable

try:
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import StructuredTool, ToolException
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode
    from langgraph.types import Command, interrupt
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = "this adapter needs LangGraph: pip install 'tool-runtime-conformance[langgraph]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    import threading
    from collections.abc import Mapping

    from langchain_core.runnables import RunnableConfig

    from tool_runtime_conformance.adapter import Setup
    from tool_runtime_conformance.cases import Propose, ToolDef
    from tool_runtime_conformance.world import KitTool

__all__ = ["LangGraphDefaults", "LangGraphGuarded"]

APPROVE = "approve"


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
        node = ToolNode(tools, handle_tool_errors=True) if self.guarded else ToolNode(tools)
        builder = StateGraph(MessagesState)
        builder.add_node("tools", node)
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

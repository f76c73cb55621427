"""toolbound as the tool node of a LangGraph agent, offline.

A scripted chat model (LangChain's GenericFakeChatModel) plays the model's turns,
tool-call argument strings included exactly as a provider sends them. The graph is an
ordinary agent loop: model → tools → model, with an in-memory checkpointer so that a
payment can wait for a person. Run: ``python examples/langgraph_example.py``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command

from toolbound import CallContext, Grant, GrantPolicy, Registry, Runtime, Subject
from toolbound.define import tool
from toolbound.integrations.langgraph import ToolboundNode, approve, tool_schemas, tools_condition

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

PAYMENTS: list[dict[str, object]] = []


class Order(TypedDict):
    """One order."""

    order_id: str
    status: str
    total: int


class Receipt(TypedDict):
    """A payment made."""

    payment_id: str
    to: str
    amount: int


@tool(effect="read", capabilities=("orders:read",))
def get_order(order_id: str) -> Order:
    """Look up one of the user's orders.

    Args:
        order_id: The order id, like A-104.

    """
    return {"order_id": order_id, "status": "delivered", "total": 25}


@tool(effect="irreversible_write", capabilities=("payments:send",))
def send_payment(to: str, amount: int) -> Receipt:
    """Send money to someone.

    Args:
        to: Who is paid.
        amount: How much, in whole euros.

    """
    receipt: Receipt = {"payment_id": f"pay-{len(PAYMENTS) + 1}", "to": to, "amount": amount}
    PAYMENTS.append(dict(receipt))
    return receipt


def call(call_id: str, name: str, arguments: str) -> dict[str, object]:
    """One tool call as OpenAI's Chat Completions API sends it: arguments as a string."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def ai(*calls: dict[str, object]) -> AIMessage:
    """An assistant turn as langchain-openai builds it: LangChain parses the strings."""
    return AIMessage("", additional_kwargs={"tool_calls": list(calls)})


def main() -> None:
    """Build the graph, run the conversation, print what happened."""
    registry = Registry()
    get_order.register(registry)
    send_payment.register(registry)
    toolset = registry.toolset()
    grants = [
        Grant(subject="mira", tenant="acme", capability="orders:read", actions=frozenset({"read"})),
        # Every payment waits for a person (R7).
        Grant(
            subject="mira",
            tenant="acme",
            capability="payments:send",
            actions=frozenset({"create"}),
            confirm=True,
        ),
    ]
    runtime = Runtime(policy=GrantPolicy(grants))

    def context(config: RunnableConfig) -> CallContext:
        # The subject comes from whoever invoked the graph, never from the model.
        user = config["configurable"]["user"]
        return CallContext(subject=Subject(id=user, tenant="acme"), tools=toolset)

    # The model's three turns. The second asks for the payment three times: once with
    # a duplicated key, once properly, once cut off mid-arguments.
    model = GenericFakeChatModel(
        messages=iter(
            [
                ai(call("c1", "get_order", '{"order_id": "A-104"}')),
                ai(
                    call("c2", "send_payment", '{"to": "leo", "amount": 25, "amount": 2500}'),
                    call("c3", "send_payment", '{"to": "leo", "amount": 25}'),
                    call("c4", "send_payment", '{"to": "leo", "amount": 2'),
                ),
                AIMessage("Paid leo 25 euros for order A-104."),
            ]
        )
    )
    print(f"tools bound to the model: {[t['function']['name'] for t in tool_schemas(toolset)]}")

    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("tools", ToolboundNode(runtime, context))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    graph = builder.compile(checkpointer=InMemorySaver())

    config: RunnableConfig = {"configurable": {"thread_id": "t-1", "user": "mira"}}
    state = graph.invoke({"messages": [HumanMessage("Pay leo for order A-104.")]}, config)
    while "__interrupt__" in state:
        (pause,) = state["__interrupt__"]
        for request in pause.value["requests"]:
            arguments = json.dumps(request["arguments"], sort_keys=True)
            print(
                f"paused: confirm {request['tool']} {arguments} (digest {request['digest'][:19]}…)"
            )
        print("alice approves exactly those digests")
        state = graph.invoke(Command(resume=approve(pause, approver="alice")), config)

    for message in state["messages"]:
        if isinstance(message, ToolMessage):
            payload = json.loads(str(message.content))
            detail = payload["error"]["code"] if message.status == "error" else payload["trust"]
            state_name = message.artifact["toolbound"]["state"]
            print(f"{message.tool_call_id} {message.name:<12} {state_name:<14} {detail}")
    print(f"payments made: {len(PAYMENTS)} {PAYMENTS}")
    print(f"model: {state['messages'][-1].content}")
    runtime.close()


if __name__ == "__main__":
    main()

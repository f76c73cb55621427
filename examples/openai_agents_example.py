"""An OpenAI Agents SDK agent whose tools run through toolbound, offline.

A scripted model stands in for the LLM, so this runs without a network or an API
key: ``python examples/openai_agents_example.py``. It shows a read, a call with a
duplicate JSON key (rejected: a plain SDK tool would have refunded the last
value), and a refund that waits for a person, who approves the exact call they
were shown.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, NoReturn

from agents import Agent, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from toolbound import CallContext, Grant, GrantPolicy, Registry, Runtime, Subject
from toolbound.define import tool
from toolbound.integrations.openai_agents import GuardedTools

REFUNDS: list[tuple[str, int]] = []
LIMIT = 100  # refunds above this need a person


@dataclass
class Order:
    """One order.

    Attributes:
        order_id: The order id.
        status: Where it is.

    """

    order_id: str
    status: str


@tool(effect="read", capabilities=("orders:read",))
def get_order(order_id: str) -> Order:
    """Look up one of the user's orders.

    Args:
        order_id: The order, like A-104.

    """
    return Order(order_id=order_id, status="shipped")


@tool(effect="irreversible_write", capabilities=("payments:refund",))
def refund(order_id: str, amount: int) -> str:
    """Refund part of an order to the customer's card.

    Args:
        order_id: The order, like A-104.
        amount: The amount, in cents.

    """
    REFUNDS.append((order_id, amount))
    return "refunded"


class ScriptedModel(Model):
    """Plays one scripted response per model call (the SDK's Model interface)."""

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)

    async def get_response(self, *args: object, **kwargs: object) -> ModelResponse:
        """The next scripted response, whatever the SDK asked."""
        del args, kwargs
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: object, **kwargs: object) -> NoReturn:
        """Not scripted: this example does not stream."""
        raise NotImplementedError


def call(call_id: str, name: str, arguments: str) -> ResponseFunctionToolCall:
    """A function call as the model sends it: the argument string exactly as written."""
    return ResponseFunctionToolCall(
        type="function_call", call_id=call_id, name=name, arguments=arguments
    )


def say(text: str) -> ResponseOutputMessage:
    """An assistant message: the run's final output."""
    return ResponseOutputMessage(
        type="message",
        id="m",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


async def main() -> None:
    """Run the agent twice: until a person is needed, then after they approved."""
    set_tracing_disabled(True)  # no trace export: nothing leaves this process
    registry = Registry()
    get_order.register(registry)
    refund.register(registry)
    # Refunds above 100 need a person; the subject is the runtime's, never the model's.
    grants = [
        Grant(subject="mira", tenant="acme", capability="orders:read", actions=frozenset({"read"})),
        Grant(
            subject="mira",
            tenant="acme",
            capability="payments:refund",
            actions=frozenset({"create"}),
            confirm=lambda request: request.arguments["amount"] > LIMIT,  # type: ignore[operator]
        ),
    ]
    runtime = Runtime(policy=GrantPolicy(grants))
    context = CallContext(subject=Subject(id="mira", tenant="acme"), tools=registry.toolset())
    guarded = GuardedTools(
        runtime,
        context,
        on_outcome=lambda o: print(f"  {o.proposal_id}: {o.tool} {o.kind} -> {o.message.text}"),
    )
    model = ScriptedModel(
        [call("c1", "get_order", '{"order_id": "A-104"}')],
        [call("c2", "refund", '{"order_id": "A-104", "amount": 1, "amount": 90}')],
        [call("c3", "refund", '{"order_id": "A-104", "amount": 500}')],
        [say("A-104 has shipped; 500 was refunded.")],
    )
    agent = Agent(name="orders", instructions="Help with orders.", model=model, tools=guarded.tools)

    print("run 1:")
    result = await Runner.run(agent, "Where is A-104? Refund 500.")
    state = result.to_state()
    for pending in guarded.pending(result):
        if pending.problem is not None:  # toolbound rejects it, whatever a person says
            guarded.dismiss(state, pending)
            continue
        print(f"  waiting for a person: {pending.tool} {pending.arguments} ({pending.reason})")
        guarded.approve(state, pending, approver="ana")
        print(f"  approved by ana, bound to digest {pending.digest}")

    print("run 2 (resumed):")
    result = await Runner.run(agent, state)
    print(f"final output: {result.final_output}")
    print(f"refunds made: {REFUNDS}")
    runtime.close()


if __name__ == "__main__":
    asyncio.run(main())

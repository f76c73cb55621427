"""Pydantic AI with toolbound, offline: every tool call goes through the runtime.

A scripted model (Pydantic AI's ``FunctionModel``) stands in for a real one, so the
example runs without a network or a key. It asks for the weather (a read), pays 25
euros (a write a person must confirm, approved), sends a payment with a duplicated
JSON key (refused before anything runs) and pays again (denied by the person).

Run: ``python examples/pydantic_ai_example.py``
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolbound import CallContext, Grant, GrantPolicy, Registry, Runtime, Subject
from toolbound.define import tool
from toolbound.integrations.pydantic_ai import ToolboundToolset

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

    from toolbound import Outcome

PAID: list[int] = []
"""What the payments backend really sent."""

UNEXPECTED = "expected a request for confirmation, got {!r}"

CONFIRM_ABOVE = 100
"""Payments over this many cents need a person's confirmation."""


@dataclass
class Forecast:
    """Today's weather."""

    city: str
    temp_c: int


@dataclass
class Receipt:
    """A payment that was made."""

    payment_id: str
    amount: int


@tool(effect="read", capabilities=("weather:read",))
def weather(city: str) -> Forecast:
    """The current weather in a city.

    Args:
        city: The city's English name.

    """
    return Forecast(city=city, temp_c=21)


@tool(effect="irreversible_write", capabilities=("payments:send",))
def pay(amount: int) -> Receipt:
    """Send a payment to the shop.

    Args:
        amount: The amount in cents.

    """
    PAID.append(amount)
    return Receipt(payment_id=f"pay-{len(PAID)}", amount=amount)


def scripted(call: ToolCallPart) -> FunctionModel:
    """A model that makes ``call``, then answers with what the tool said."""

    def respond(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        results = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if not results:
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart(results[0].model_response_str())])

    return FunctionModel(respond)


def main() -> None:
    """Run the four calls and print what happened to each."""
    registry = Registry()
    weather.register(registry)
    pay.register(registry)
    grants = [
        Grant(
            subject="mira", tenant="acme", capability="weather:read", actions=frozenset({"read"})
        ),
        Grant(
            subject="mira",
            tenant="acme",
            capability="payments:send",
            actions=frozenset({"create"}),
            confirm=lambda request: int(str(request.arguments["amount"])) > CONFIRM_ABOVE,
        ),
    ]
    mira = Subject(id="mira", tenant="acme")
    outcomes: list[Outcome] = []

    with Runtime(policy=GrantPolicy(grants)) as runtime:
        # Who calls comes from the run's deps, never from the model.
        toolset: ToolboundToolset[Subject] = ToolboundToolset(
            runtime,
            lambda ctx: CallContext(subject=ctx.deps, tools=registry.toolset()),
            on_outcome=outcomes.append,
        )

        def agent(call: ToolCallPart) -> Agent[Subject, str | DeferredToolRequests]:
            return Agent(
                scripted(call),
                toolsets=[toolset],
                deps_type=Subject,
                output_type=[str, DeferredToolRequests],
            )

        # 1. A read runs at once; the model reads toolbound's envelope.
        read = agent(ToolCallPart("weather", '{"city": "Paris"}', tool_call_id="w1"))
        answer = read.run_sync("Weather in Paris?", deps=mira)
        print(f"weather: {outcomes[-1].kind} -> the model read {answer.output}")

        # 2. 25 euros needs a person: the run ends with a deferred request.
        payment = agent(ToolCallPart("pay", '{"amount": 2500}', tool_call_id="p1"))
        first = payment.run_sync("Pay the shop 25 euros.", deps=mira)
        if not isinstance(first.output, DeferredToolRequests):
            raise SystemExit(UNEXPECTED.format(first.output))
        for request in toolset.confirmation_requests(first.output).values():
            print(f"waiting for a person: {request.tool} {request.arguments} ({request.reason})")
        # The person approves exactly the digest they were shown; the parked call runs.
        approval = toolset.decide(first.output, {"p1": True}, approver="mira")
        payment.run_sync(
            message_history=first.all_messages(), deferred_tool_results=approval, deps=mira
        )
        print(f"after approval: {outcomes[-1].kind}, paid {PAID}")

        # 3. A duplicated key: Pydantic AI alone would pay the last value; here
        #    nothing runs and the model is asked to send the call again.
        duplicated = agent(
            ToolCallPart("pay", '{"amount": 1, "amount": 100000}', tool_call_id="p2")
        )
        duplicated.run_sync("Pay 1 cent.", deps=mira)
        rejected = outcomes[-1]
        code = rejected.problem.code if rejected.kind == "rejected" else "?"
        print(f"duplicate key: {rejected.kind} {code}, paid {PAID}")

        # 4. The person says no: the call never runs, and the model is told why.
        again = agent(ToolCallPart("pay", '{"amount": 9000}', tool_call_id="p3"))
        first = again.run_sync("Pay the shop 90 euros.", deps=mira)
        if not isinstance(first.output, DeferredToolRequests):
            raise SystemExit(UNEXPECTED.format(first.output))
        refusal = toolset.decide(first.output, {"p3": False}, approver="mira")
        again.run_sync(
            message_history=first.all_messages(), deferred_tool_results=refusal, deps=mira
        )
        denied = outcomes[-1]
        code = denied.problem.code if denied.kind == "rejected" else "?"
        print(f"denied: {denied.kind} {code}, paid {PAID}")


if __name__ == "__main__":
    main()

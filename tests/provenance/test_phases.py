"""R6, R13: the loop's phase tool sets are the task scope a flow policy checks writes against."""

from __future__ import annotations

from harness import MIRA, grant, spec
from toolbound import AllOf, CallContext, GrantPolicy, Registry, Runtime
from toolbound.gates.authorize import IdScope
from toolbound.loop import Loop, ModelTurn
from toolbound.provenance import Provenance, guard_writes
from toolbound.testing import FakeTool, ScriptedModel, call

SEND_IN = {
    "type": "object",
    "properties": {"recipient": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["recipient", "amount"],
    "additionalProperties": False,
}
NOTE_IN = {
    "type": "object",
    "properties": {"title": {"type": "string"}},
    "required": ["title"],
    "additionalProperties": False,
}
OUT = {"type": "object", "properties": {"id": {"type": "string"}}, "additionalProperties": False}
PROMPT = "Write a note 'Rent for March' and pay 900 to landlord-account-123."


def turn(*proposals, text=""):
    return ModelTurn(proposals=tuple(proposals), text=text)


class Desk:
    """Two writes: notes.write in the phase, bank.send_money only by asking for it."""

    def __init__(self, clock) -> None:
        self.registry = Registry()
        self.send = FakeTool(returns={"id": "tx-1"})
        self.note = FakeTool(returns={"id": "n-1"})
        write = {"output_schema": OUT, "effect": "reversible_write", "reads_untrusted": False}
        self.registry.register(spec("notes.write", input_schema=NOTE_IN, **write), self.note)
        self.registry.register(spec("bank.send_money", input_schema=SEND_IN, **write), self.send)
        grants = GrantPolicy(
            [
                grant(),
                grant(capability="tools:request", scope=IdScope(frozenset({"bank.send_money"}))),
            ]
        )
        self.runtime = Runtime(policy=AllOf(grants, guard_writes(self.registry)), clock=clock)

    def loop(self, model, **kw) -> Loop:
        return Loop(
            self.runtime,
            model,
            context=CallContext(subject=MIRA, tools=self.registry.toolset()),
            tools=self.registry.toolset("notes.write@v1"),
            requestable=self.registry,
            **kw,
        )


def _script() -> ScriptedModel:
    return ScriptedModel(
        [
            turn(call("notes.write", {"title": "Rent for March"}, "c1")),
            turn(call("request_capability", {"tool": "bank.send_money", "reason": "pay"}, "c2")),
            turn(
                call("bank.send_money", {"recipient": "landlord-account-123", "amount": 900}, "c3")
            ),
            turn(text="done"),
        ]
    )


def test_a_write_outside_the_phase_is_confirmed_with_that_reason(clock):
    """A write the phase did not declare, reached through request_capability, asks a person."""
    desk = Desk(clock)
    out = desk.loop(_script()).run(PROMPT)
    desk.runtime.close()
    assert out.steps[0].batch["c1"].kind == "observed"  # the phase's own write runs
    assert out.steps[1].batch["c2"].result.value == {"tool": "bank.send_money", "granted": True}
    paid = out.steps[2].batch["c3"]
    # Every value came from the user; the write is still not the phase's: a person decides.
    assert paid.kind == "awaiting_confirmation"
    assert [f.concern for f in paid.request.evidence] == ["out_of_scope"]
    assert "bank.send_money@v1 is not among the writes this task declared" in paid.request.reason
    assert desk.send.calls == []
    assert out.provenance is not None
    assert out.provenance.scope is None  # the phase's scope ends with the run


def test_phases_change_the_scope_step_by_step(clock):
    """Each step's tool set is its scope: a write visible in its phase runs."""
    desk = Desk(clock)
    phases = [desk.registry.toolset("notes.write@v1"), desk.registry.toolset()]
    model = ScriptedModel(
        [
            turn(call("notes.write", {"title": "Rent for March"}, "c1")),
            turn(
                call("bank.send_money", {"recipient": "landlord-account-123", "amount": 900}, "c2")
            ),
            turn(text="done"),
        ]
    )
    out = Loop(
        desk.runtime,
        model,
        context=CallContext(subject=MIRA, tools=desk.registry.toolset()),
        tools=lambda step: phases[min(step, 1)],
    ).run(PROMPT)
    desk.runtime.close()
    assert out.steps[1].batch["c2"].kind == "observed"
    assert desk.send.calls != []


def test_a_scope_the_index_declares_wins_over_the_phase(clock):
    """An index with its own task scope keeps it: the phase does not widen it."""
    desk = Desk(clock)
    index = Provenance(scope={"bank.send_money"})
    model = ScriptedModel([turn(call("notes.write", {"title": "Rent for March"}, "c1")), turn()])
    out = desk.loop(model, provenance=index).run(PROMPT)
    desk.runtime.close()
    assert out.steps[0].batch["c1"].kind == "awaiting_confirmation"
    assert index.scope == frozenset({"bank.send_money"})

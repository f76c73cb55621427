"""The express lane answers exactly what the staged path answers (R2, R9, R11, R14).

Every scenario runs twice on the same runtime set-up: once as the runtime runs it
(a read the policy allows goes the express way) and once with the lane switched
off, so the staged path takes the whole call. The outcomes — kind, state path, the
bytes sent to the model, the human projection, the result and its attempts — and
the trace, every event with all of its data, must be the same, apart from the
random attempt ids. Scenarios that leave the lane midway (a tool that raises,
overruns, breaks its contract or answers with a ToolOutput) check the hand-off.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from harness import MIRA, proposal, spec
from toolbound import (
    CallContext,
    FixedClock,
    Grant,
    GrantPolicy,
    Registry,
    Runtime,
)
from toolbound.execution.tool import ToolOutput
from toolbound.pipeline import express
from toolbound.results.redact import Redactor

if TYPE_CHECKING:
    from collections.abc import Callable

    from toolbound import Outcome
    from toolbound.trace import TraceEvent

START = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)
GRANT = Grant(subject="mira", tenant="acme", capability="test:use", actions=frozenset({"read"}))


@dataclass
class Sink:
    """Every event, as sinks are handed them."""

    events: list[tuple[str, TraceEvent]] = field(default_factory=list)

    def emit(self, invocation_id: str, event: TraceEvent) -> None:
        self.events.append((invocation_id, event))


@dataclass(frozen=True)
class Case:
    """One call: the tool, how it is registered, what the caller asks."""

    returns: Callable[[dict[str, Any]], object]
    mode: str = "inline"  # inline, pooled or async
    output_schema: bool = True
    timeout: float | None = None
    result_budget: int | None = None
    redact: bool = False
    tool_timeout: float = 2.0


def _ok(args: dict[str, Any]) -> object:
    return {"text": args["text"]}


def _raise(args: dict[str, Any]) -> object:
    msg = "the far side said no"
    raise RuntimeError(msg)


def _slow(args: dict[str, Any]) -> object:
    time.sleep(0.06)
    return {"text": args["text"]}


CASES: dict[str, Case] = {
    "inline read": Case(_ok),
    "pooled read": Case(_ok, mode="pooled"),
    "async read": Case(_ok, mode="async"),
    "empty result": Case(lambda args: {}, output_schema=False),
    "truncated result": Case(lambda args: {"text": args["text"] * 400}, result_budget=300),
    "personal data redacted": Case(lambda args: {"text": "mail mira@example.com"}, redact=True),
    "contract broken": Case(lambda args: {"text": 7}),
    "not JSON": Case(lambda args: {"text": {1, 2}}, output_schema=False),
    "tool raises": Case(_raise),
    "pooled tool raises": Case(_raise, mode="pooled"),
    "external id": Case(lambda args: ToolOutput({"text": args["text"]}, "ext-1")),
    "no time left": Case(_ok, timeout=0.0),
    "inline overrun": Case(_slow, tool_timeout=0.02),
    "pooled overrun": Case(_slow, mode="pooled", tool_timeout=0.02),
}


def _runtime(case: Case, sink: Sink) -> tuple[Runtime, CallContext]:
    registry = Registry()
    overrides: dict[str, object] = {"timeout": case.tool_timeout}
    if not case.output_schema:
        overrides["output_schema"] = None
    function: Callable[..., object]
    if case.mode == "async":

        async def function(arguments: dict[str, Any], ctx: object) -> object:
            await asyncio.sleep(0)
            return case.returns(arguments)
    else:

        def function(arguments: dict[str, Any], ctx: object) -> object:
            return case.returns(arguments)

    registry.register(spec(**overrides), function, inline=case.mode == "inline")  # type: ignore[arg-type]
    redactor = Redactor({"email": re.compile(r"[\w.]+@[\w.]+")}) if case.redact else None
    runtime = Runtime(
        policy=GrantPolicy([GRANT]), clock=FixedClock(START), sinks=[sink], redactor=redactor
    )
    context = CallContext(
        subject=MIRA,
        tools=registry.toolset(),
        timeout=case.timeout,
        result_budget=case.result_budget,
        invocation_id="inv-1",
        trace_id="0" * 31 + "1",
    )
    return runtime, context


def _scrub(value: object) -> object:
    """The value with the random attempt ids blanked."""
    if isinstance(value, dict):
        return {k: "<id>" if k == "attempt_id" else _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def _render(outcome: Outcome, sink: Sink) -> dict[str, object]:
    result = getattr(outcome, "result", None)
    return {
        "kind": outcome.kind,
        "path": [s.value for s in outcome.path],
        "message": outcome.message.content,
        "message_cuts": [c.as_json() for c in outcome.message.cuts],
        "truncated": outcome.message.truncated,
        "human": _scrub(outcome.human.as_json()),
        "result": None
        if result is None
        else _scrub(
            {
                "status": result.status,
                "value": result.value,
                "commit_status": result.commit_status,
                "external_resource_id": result.external_resource_id,
                "observed_at": result.observed_at.isoformat(),
                "attempts": [a.as_json() for a in result.attempts],
                "error": None if result.error is None else result.error.as_json(),
            }
        ),
        "trace": _scrub([e.as_json() for e in outcome.trace.events]),
        "sunk": _scrub([(i, e.as_json()) for i, e in sink.events]),
    }


def _both(
    case: Case, monkeypatch: pytest.MonkeyPatch, *, use_async: bool
) -> tuple[dict[str, object], dict[str, object], int]:
    taken = 0
    lanes = (express.run, express.arun)

    def counted_run(*args: Any) -> Outcome:
        nonlocal taken
        taken += 1
        return lanes[0](*args)

    async def counted_arun(*args: Any) -> Outcome:
        nonlocal taken
        taken += 1
        return await lanes[1](*args)

    renders = []
    for lane in (True, False):
        with monkeypatch.context() as m:
            m.setattr(express, "run", counted_run)
            m.setattr(express, "arun", counted_arun)
            if not lane:
                m.setattr(express, "takes", lambda verdict, ctx: False)
            sink = Sink()
            runtime, context = _runtime(case, sink)
            call = proposal("echo", {"text": "hello"})
            with runtime:
                if use_async:
                    outcome = asyncio.run(runtime.arun(call, context))
                else:
                    outcome = runtime.run(call, context)
            renders.append(_render(outcome, sink))
    return renders[0], renders[1], taken


@pytest.mark.parametrize("use_async", [False, True], ids=["run", "arun"])
@pytest.mark.parametrize("name", list(CASES))
def test_the_express_lane_answers_as_the_staged_path(
    name: str,
    use_async: bool,  # noqa: FBT001 - a parametrized case
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    case = CASES[name]
    if case.mode == "async" and not use_async:
        pytest.skip("an async tool from a sync caller runs on the loop thread: same lane")
    express_render, staged_render, taken = _both(case, monkeypatch, use_async=use_async)
    assert taken == 1, "the call did not go the express way"
    assert express_render == staged_render


def test_a_read_that_asks_for_a_person_goes_the_staged_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    confirm = Grant(
        subject="mira",
        tenant="acme",
        capability="test:use",
        actions=frozenset({"read"}),
        confirm=True,
    )
    registry = Registry()
    registry.register(spec(), lambda arguments, ctx: {"text": "x"}, inline=True)
    runtime = Runtime(policy=GrantPolicy([confirm]), clock=FixedClock(START))
    context = CallContext(subject=MIRA, tools=registry.toolset())
    with runtime:
        outcome = runtime.run(proposal("echo", {"text": "hello"}), context)
    assert outcome.kind == "awaiting_confirmation"


def test_the_lane_takes_only_plain_allowed_reads() -> None:
    registry = Registry()
    registry.register(spec(), lambda arguments, ctx: {"text": "x"}, inline=True)
    registry.register(
        spec("put", effect="reversible_write", output_schema=None), lambda arguments, ctx: None
    )
    runtime = Runtime(policy=GrantPolicy([GRANT]), clock=FixedClock(START))
    toolset = registry.toolset()
    from toolbound.pipeline import admit

    env = runtime._env
    plain = CallContext(subject=MIRA, tools=toolset)
    read = admit.judge(env, proposal("echo", {"text": "a"}), plain, life=None)
    write = admit.judge(env, proposal("put", {"text": "a"}), plain, life=None)
    assert express.takes(read, plain)
    assert not express.takes(write, plain)
    import threading

    cancellable = CallContext(subject=MIRA, tools=toolset, cancel=threading.Event())
    assert not express.takes(read, cancellable)
    runtime.close()

"""The runner: drive an adapter through each case and judge what was observed.

Each required result is a check over two things the kit sees for itself — the
world's records (was the tool entered, did its effect happen, how often) and the
adapter's last :class:`~tool_runtime_conformance.adapter.Observation` of the call:

``refused``               the tool was never entered for the call, and the model is
                          told, in a non-empty message, that it did not succeed
``asked``                 the call waits for a person, and the tool was never entered
``ran_once``              success is reported and the call's effect happened at most once
``outcome_unknown``       the call is reported ``unknown``, or as failed with its effect
                          reported committed or unknown; never as a success, never as
                          "did not run"
``untrusted``             success is reported and the injected text reaches the model
                          only as data: see :func:`marked_untrusted`
``withheld``              the injected text does not reach the model at all
``failed_before_effect``  failure is reported (not success, not unknown) and no effect
                          happened for the call
``nothing_after_cancel``  the call is reported cancelled and no effect happened for it,
                          not even after the runner waited for every tool to finish
``not_run``               the tool was never entered for the call, whatever the runtime
                          said (a loop may end before it answers the call at all)

Every case also pins how many effects each of its tools had in total, and may ask
more: how a loop ended (``loop``), a string each call's text contains (``texts``:
results pair with calls by id), the order of effects (``order``), that writes never
overlapped (``serial``) and what the runtime's trace shows (``trace``).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from tool_runtime_conformance.adapter import LoopObservation, NotApplicable, Observation, Setup
from tool_runtime_conformance.cases import Approve, Deny, Loop, Propose, SetFault, Turn
from tool_runtime_conformance.world import World

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from tool_runtime_conformance.adapter import Adapter, AdapterFactory
    from tool_runtime_conformance.cases import Case, Required, Step, TraceCheck

__all__ = ["CaseResult", "Verdict", "marked_untrusted", "run_case", "run_cases"]

Verdict = Literal["pass", "fail", "not_applicable"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """The verdict on one case for one runtime, with the reasons for a fail or n.a."""

    case: Case
    verdict: Verdict
    reasons: tuple[str, ...] = ()
    observations: Mapping[str, Observation] = field(default_factory=dict, hash=False)
    loop: LoopObservation | None = None


def marked_untrusted(text: str, injected: str) -> str | None:
    """``None`` when ``injected`` reaches the model only as marked data, else why not.

    The criterion: the model's text is one JSON object; the injected sentence occurs
    only inside its string values (never as a key, never as bare text); and the object
    says at its top level that it is untrusted — a key, or a string value, containing
    the word ``untrusted`` (a value carrying the injected text does not count: the
    mark must be the runtime's, not the tool's).
    """
    try:
        document = json.loads(text)
    except ValueError:
        return "the model receives the tool output as bare text, not as a JSON data envelope"
    if not isinstance(document, dict):
        return "the model receives a JSON value that is not an object, with no room for a mark"
    if injected not in _strings(document, keys=False) or injected in _strings(document, keys=True):
        return "the injected text is not confined to the envelope's string values"
    marks = [k for k, v in document.items() if _marks(k, v, injected)]
    if not marks:
        return "the envelope does not mark its content untrusted at the top level"
    return None


def _marks(key: str, value: object, injected: str) -> bool:
    """Whether one top-level member says the envelope is untrusted."""
    said = value if isinstance(value, str) and injected not in value else ""
    return "untrusted" in f"{key} {said}".lower()


def _strings(value: object, *, keys: bool) -> str:
    """Every string value (or every key) of ``value``, joined by newlines."""
    if isinstance(value, dict):
        own = "\n".join(map(str, value)) if keys else ""
        return own + "\n" + "\n".join(_strings(v, keys=keys) for v in value.values())
    if isinstance(value, list):
        return "\n".join(_strings(v, keys=keys) for v in value)
    return value if isinstance(value, str) and not keys else ""


def _check(
    required: Required, obs: Observation | None, world: World, call: str, injected: str
) -> str | None:
    entered = world.count("entered", call=call)
    effects = world.count("effect", call=call)
    if required == "not_run":
        return f"the tool ran ({entered}x)" if entered else None
    if obs is None:
        return "the runtime never answered the call"
    said = f"reported {obs.kind}"
    checks: dict[Required, Callable[[], str | None]] = {
        "refused": lambda: (
            f"the tool ran ({entered}x)"
            if entered
            else f"{said}, not a refusal"
            if obs.kind in {"ran", "asked"}
            else "the model is not told why"
            if not obs.text.strip()
            else None
        ),
        "asked": lambda: (
            f"the tool ran ({entered}x) before anyone was asked"
            if entered
            else f"{said}; nobody was asked"
            if obs.kind != "asked"
            else None
        ),
        "ran_once": lambda: (
            f"{said}, not success"
            if obs.kind != "ran"
            else f"the effect happened {effects} times"
            if effects > 1
            else None
        ),
        "outcome_unknown": lambda: (
            None
            if obs.kind == "unknown"
            or (obs.kind == "failed" and obs.commit in {"committed", "unknown"})
            else f"{said} (commit {obs.commit or 'not reported'}), not unknown"
        ),
        "untrusted": lambda: (
            f"{said}, not success" if obs.kind != "ran" else marked_untrusted(obs.text, injected)
        ),
        "withheld": lambda: "the injected text reaches the model" if injected in obs.text else None,
        "failed_before_effect": lambda: (
            f"{said}, not a failure"
            if obs.kind not in {"failed", "refused"}
            else f"the effect happened ({effects}x)"
            if effects
            else None
        ),
        "nothing_after_cancel": lambda: (
            f"{said}, not cancelled"
            if obs.kind != "cancelled"
            else f"the effect happened after the cancel ({effects}x)"
            if effects
            else None
        ),
    }
    return checks[required]()


def _injected(case: Case) -> str:
    faults = [s for s in case.steps if isinstance(s, SetFault) and s.fault is not None]
    return faults[-1].injected if faults else "\x00no injected text\x00"


MISSING = {
    "propose_turn": "the adapter sends no turn of several calls (TurnAdapter.propose_turn)",
    "run_loop": "the adapter drives no loop of its runtime (LoopAdapter.run_loop)",
    "trace": "the adapter reads no trace from its runtime (TracingAdapter.trace)",
}
"""The reason a case is not applicable when an adapter lacks an optional capability."""


def _capability(adapter: Adapter, method: str) -> Callable[..., object]:
    found = getattr(adapter, method, None)
    if found is None:
        raise NotApplicable(MISSING[method])
    return found  # type: ignore[no-any-return]


def _parsed(call: Propose) -> object:
    try:
        return json.loads(call.arguments)
    except ValueError:
        return None


@dataclass(slots=True)
class _Run:
    """What one case's run has seen so far."""

    observed: dict[str, Observation] = field(default_factory=dict)
    loop: LoopObservation | None = None
    traces: list[list[str]] = field(default_factory=list)


def _drive_many(adapter: Adapter, step: Turn | Loop, world: World, run: _Run) -> None:
    world.expect((c.call_id, c.tool, _parsed(c)) for c in step.calls)
    if isinstance(step, Turn):
        send = _capability(adapter, "propose_turn")
        seen = send(step.calls, threading.Event(), interleaved=step.interleaved)
        run.observed.update(seen)  # type: ignore[call-overload]
    else:
        loop = _capability(adapter, "run_loop")(step.turns, step.budgets)
        assert isinstance(loop, LoopObservation)  # noqa: S101 - the protocol's return type
        run.loop = loop
        run.observed.update(loop.calls)
    world.expect(())


def _drive(adapter: Adapter, step: Step, world: World) -> tuple[str, Observation] | None:
    if isinstance(step, SetFault):
        world.set_fault(step)
        return None
    assert not isinstance(step, Turn | Loop)  # noqa: S101 - driven by _drive_many
    world.current_call = step.call_id
    if isinstance(step, Propose):
        cancel = threading.Event()
        timer = None
        if step.cancel_after_seconds is not None:
            timer = threading.Timer(step.cancel_after_seconds, cancel.set)
            timer.start()
        try:
            return step.call_id, adapter.propose(step, cancel)
        finally:
            if timer is not None:
                timer.cancel()
    if isinstance(step, Approve):
        return step.call_id, adapter.approve(step.call_id, step.shown)
    assert isinstance(step, Deny)  # noqa: S101 - the Step union is exhausted
    return step.call_id, adapter.deny(step.call_id)


def run_case(factory: AdapterFactory, case: Case) -> CaseResult:
    """Run one case against a fresh adapter and judge it."""
    world = World(case)
    run = _Run()
    adapter = factory()
    try:
        adapter.start(
            Setup(
                tools=tuple((t, world.tools[t.name]) for t in case.tools),
                subject=case.subject,
                grants=case.grants,
            )
        )
        read_trace = _capability(adapter, "trace") if case.expect_trace else None
        for step in case.steps:
            if isinstance(step, Turn | Loop):
                _drive_many(adapter, step, world, run)
            else:
                seen = _drive(adapter, step, world)
                if seen is not None:
                    run.observed[seen[0]] = seen[1]
            if read_trace is not None:
                run.traces.append(_events(read_trace()))
    except NotApplicable as exc:
        return CaseResult(case=case, verdict="not_applicable", reasons=(exc.reason,))
    except Exception as exc:  # noqa: BLE001 - a runtime that crashes on a case fails it
        return CaseResult(case=case, verdict="fail", reasons=(f"the adapter raised {exc!r}",))
    finally:
        world.settle()  # late effects count, and tools finish before the runtime closes
        adapter.close()
    return _judge(case, world, run)


def _events(trace: object) -> list[str]:
    """A trace as one canonical JSON text per event, to compare reads of it."""
    events = list(trace)  # type: ignore[call-overload]
    return [json.dumps(e, sort_keys=True, ensure_ascii=False, default=str) for e in events]


def _judge(case: Case, world: World, run: _Run) -> CaseResult:
    reasons: list[str] = []
    injected = _injected(case)
    observed = run.observed
    for call, required in case.expect_calls.items():
        why = _check(required, observed.get(call), world, call, injected)
        if why is not None:
            reasons.append(f"{call} must be {required}: {why}")
    for tool, expected in case.expect_effects.items():
        actual = world.count("effect", tool=tool)
        if actual != expected:
            reasons.append(f"{tool} must have {expected} effect(s), had {actual}")
    reasons += _judge_more(case, world, run)
    verdict: Verdict = "fail" if reasons else "pass"
    return CaseResult(
        case=case,
        verdict=verdict,
        reasons=tuple(reasons),
        observations=observed,
        loop=run.loop,
    )


def _judge_more(case: Case, world: World, run: _Run) -> list[str]:
    """The optional expectations: the loop's end, texts by id, order, serial writes, trace."""
    reasons: list[str] = []
    if case.expect_loop is not None and run.loop is not None and run.loop.end != case.expect_loop:
        said = f" ({run.loop.detail})" if run.loop.detail else ""
        reasons.append(f"the loop must be {case.expect_loop}, it {run.loop.end}{said}")
    for call, text in case.expect_texts.items():
        obs = run.observed.get(call)
        if obs is None or text not in obs.text:
            reasons.append(f"{call}'s text must contain {text!r} (its own result, by id)")
    order = [c for c in world.effect_order() if c in case.expect_order]
    if case.expect_order and order != list(case.expect_order):
        reasons.append(f"effects must happen in the order {list(case.expect_order)}, not {order}")
    if case.expect_serial and world.most_writes_at_once > 1:
        reasons.append(f"{world.most_writes_at_once} writes ran at the same time")
    reasons += [f"the trace {why}" for c in case.expect_trace if (why := _trace(c, case, run))]
    return reasons


def _trace(check: TraceCheck, case: Case, run: _Run) -> str | None:
    """Why the trace fails ``check``, or ``None``."""
    final = run.traces[-1] if run.traces else []
    text = "\n".join(_strings(json.loads(e), keys=False) for e in final)
    calls = [c for s in case.steps for c in _proposals(s)]
    if check == "append_only":
        for i, (before, after) in enumerate(zip(run.traces, run.traces[1:], strict=False)):
            if after[: len(before)] != before:
                return f"changed what it had recorded before step {i + 2} (not append-only)"
        return None
    if check == "every_call":
        # a value that is the id itself: a short id also occurs inside random span ids
        values = set(text.split("\n"))
        missing = [c.call_id for c in calls if c.call_id not in values]
        return f"does not name the call(s) {missing}" if missing else None
    if check == "raw_arguments":
        raw = [c.call_id for c in calls if c.arguments.decode("utf-8", "replace") not in text]
        return f"does not keep the raw argument text of {raw}" if raw else None
    lost = [c for c, o in run.observed.items() if o.text and o.text not in text]
    return f"does not keep the exact text the model was sent for {lost}" if lost else None


def _proposals(step: Step) -> tuple[Propose, ...]:
    if isinstance(step, Propose):
        return (step,)
    return step.calls if isinstance(step, Turn | Loop) else ()


def run_cases(
    factory: AdapterFactory,
    cases: Iterable[Case],
    *,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Run every case in order; ``on_result`` hears each verdict as it is reached."""
    results = []
    for case in cases:
        result = run_case(factory, case)
        if on_result is not None:
            on_result(result)
        results.append(result)
    return results

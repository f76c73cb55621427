"""toolbound's library :class:`~toolbound.Runtime`, with the case's grants as a ``GrantPolicy``.

Each kit tool becomes a ``ToolSpec`` with its schemas, effect class, capability and
timeout; a write marks its commit boundary through ``ToolContext.mark_committed`` and
maps the world's lost response to ``CommitUnknown`` and its refusal to ``NotCommitted``
(the tool adapter, not the model, says where the commit is: R9). The model's text
is ``ModelProjection.content``, byte for byte. A grant's scope is a ``PathScope`` or a
``DomainScope`` over the tool's resource, its call cap a ``RateLimit``. A turn of
several calls goes through ``run_batch`` (or, streamed, a ``Loop`` over the assembled
turn); a loop is toolbound's ``Loop`` with its ``Budgets``; the trace is each
outcome's ``Trace``, as JSON.
"""

from __future__ import annotations

import json
from datetime import timedelta
from importlib.metadata import version
from typing import TYPE_CHECKING, cast

from tool_runtime_conformance.adapter import LoopEnd, LoopObservation, Observation, Setup
from tool_runtime_conformance.world import Refusal, ResponseLost

try:
    import toolbound
    from toolbound._clock import SystemClock
    from toolbound._model import Resource
    from toolbound.gates.authorize import DomainScope, NumberLimit, PathScope, RateLimit
    from toolbound.testing import ScriptedModel, turn_from_stream
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = "this adapter needs toolbound: pip install 'tool-runtime-conformance[toolbound]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    import threading
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from tool_runtime_conformance.cases import GrantDef, Propose, ResourceDef, ToolDef
    from tool_runtime_conformance.world import KitTool
    from toolbound import Outcome
    from toolbound._model import JSONObject, JSONValue
    from toolbound.execution.tool import ToolContext
    from toolbound.gates.authorize import Limit
    from toolbound.trace import Trace

__all__ = ["ToolboundRuntime"]

_ACTIONS = frozenset({"read", "create", "modify", "delete"})
_KINDS = {
    "observed": "ran",
    "rejected": "refused",
    "awaiting_confirmation": "asked",
    "outcome_unknown": "unknown",
    "failed": "failed",
    "cancelled": "cancelled",
}


def _implementation(tool: KitTool) -> Callable[[JSONObject, ToolContext], Awaitable[JSONValue]]:
    # Async, as toolbound's docs advise for work that must stop: the runtime cancels an
    # async tool at its deadline or on a cancel, where a sync one keeps its thread.
    async def run(arguments: JSONObject, ctx: ToolContext) -> JSONValue:
        try:
            return cast("JSONValue", await tool.acall(arguments, on_effect=ctx.mark_committed))
        except ResponseLost as exc:
            raise toolbound.CommitUnknown(str(exc)) from exc
        except Refusal as exc:
            raise toolbound.NotCommitted(str(exc)) from exc

    return run


def _spec(tool: ToolDef) -> toolbound.ToolSpec:
    return toolbound.ToolSpec(
        name=tool.name,
        version=tool.version,
        description=tool.description,
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        effect=tool.effect,
        capabilities=(tool.capability,),
        timeout=tool.timeout_seconds,
        marks_commit=tool.writes,
        resources=None if tool.resource is None else _resources(tool.resource),
    )


def _resources(resource: ResourceDef) -> Callable[[JSONObject], list[Resource]]:
    def extract(arguments: JSONObject) -> list[Resource]:
        return [Resource(kind=resource.kind, id=resource.of(arguments), action=resource.action)]

    return extract


def _grant(grant: GrantDef) -> toolbound.Grant:
    limits: list[Limit] = [NumberLimit(x.pointer, x.minimum, x.maximum) for x in grant.limits]
    if grant.max_calls is not None:
        limits.append(RateLimit(grant.max_calls, timedelta(days=1), SystemClock()))
    scope = (
        PathScope(grant.path_root)
        if grant.path_root is not None
        else DomainScope(grant.domains)
        if grant.domains is not None
        else None
    )
    return toolbound.Grant(
        subject=grant.subject,
        tenant=grant.tenant,
        capability=grant.capability,
        actions=grant.actions or _ACTIONS,  # type: ignore[arg-type]
        scope=scope,
        confirm=grant.confirm,
        expires_at=grant.expires_at,
        limits=tuple(limits),
    )


class ToolboundRuntime:
    """The library runtime: one ``Runtime.run`` per proposal, ``approve``/``deny`` by digest."""

    name = "toolbound (library Runtime)"
    versions: Mapping[str, str] = {"toolbound": version("toolbound")}

    def __init__(self) -> None:
        self.outcomes: dict[str, Outcome] = {}
        self.traces: dict[str, Trace] = {}

    def start(self, setup: Setup) -> None:
        """A registry of the kit's tools and a runtime with the case's grants."""
        self.registry = toolbound.Registry()
        for spec, tool in setup.tools:
            self.registry.register(_spec(spec), _implementation(tool))
        self.runtime = toolbound.Runtime(
            policy=toolbound.GrantPolicy([_grant(g) for g in setup.grants])
        )
        s = setup.subject
        self.subject = toolbound.Subject(id=s.id, tenant=s.tenant, session=s.session)

    def propose(self, proposal: Propose, cancel: threading.Event) -> Observation:
        """``Runtime.run`` on the raw bytes, the key and the cancel from the caller.

        A streamed call goes the way toolbound's docs take streams: the deltas as an
        OpenAI Chat Completions stream, assembled into a turn a ``Loop`` plays (R15).
        """
        context = self._context(proposal.idempotency_key, cancel)
        if proposal.deltas:
            return self._streamed([proposal], context, interleaved=False)[proposal.call_id]
        return self._observe(proposal.call_id, self.runtime.run(_proposal(proposal), context))

    def _context(self, key: str | None, cancel: threading.Event | None) -> toolbound.CallContext:
        return toolbound.CallContext(
            subject=self.subject,
            tools=self.registry.toolset(),
            idempotency_key=key,
            cancel=cancel,
        )

    def propose_turn(
        self, calls: Sequence[Propose], cancel: threading.Event, *, interleaved: bool
    ) -> Mapping[str, Observation]:
        """One response's calls through ``run_batch`` (R16); streamed ones through a ``Loop``."""
        context = self._context(None, cancel)
        if any(c.deltas for c in calls):
            return self._streamed(calls, context, interleaved=interleaved)
        batch = toolbound.run_batch(self.runtime, [_proposal(c) for c in calls], context)
        return {c.call_id: self._observe(c.call_id, batch[c.call_id]) for c in calls}

    def _streamed(
        self, calls: Sequence[Propose], context: toolbound.CallContext, *, interleaved: bool
    ) -> dict[str, Observation]:
        turn = turn_from_stream("openai-chat", _chat_stream(calls, interleaved=interleaved))
        model = ScriptedModel([turn, toolbound.ModelTurn(text="done")])
        ended = toolbound.Loop(self.runtime, model, context=context).run("go")
        return self._answers(ended, calls)

    def _answers(
        self, ended: toolbound.LoopOutcome, calls: Sequence[Propose]
    ) -> dict[str, Observation]:
        seen: dict[str, Observation] = {}
        for step in ended.steps:
            for call_id, out in ({} if step.batch is None else step.batch.by_id).items():
                seen[call_id] = self._observe(call_id, out)
        for call in calls:
            answers = [m for m in ended.transcript if m.get("call_id") == call.call_id]
            if call.call_id not in seen and answers:
                # a cut-off call is answered with a rejection, never run
                seen[call.call_id] = Observation(kind="refused", text=str(answers[-1]["content"]))
        return seen

    def run_loop(
        self, turns: Sequence[Sequence[Propose]], budgets: Mapping[str, int]
    ) -> LoopObservation:
        """Toolbound's ``Loop`` over the scripted turns, with the budgets as ``Budgets``."""
        script = [toolbound.ModelTurn(proposals=tuple(_proposal(c) for c in t)) for t in turns]
        model = ScriptedModel([*script, toolbound.ModelTurn(text="done")])
        limits = toolbound.Budgets(**budgets)
        loop = toolbound.Loop(
            self.runtime, model, context=self._context(None, None), budgets=limits
        )
        ended = loop.run("go")
        end: LoopEnd = "finished" if ended.kind == "finished" else "stopped"
        calls = [c for t in turns for c in t]
        return LoopObservation(
            end=end, calls=self._answers(ended, calls), detail=f"{ended.kind}: {ended.reason}"
        )

    def trace(self) -> Sequence[Mapping[str, object]]:
        """Every invocation's trace events, invocations in the order they were first seen."""
        return [
            {"invocation_id": invocation, **event.as_json()}
            for invocation, trace in self.traces.items()
            for event in trace.events
        ]

    def approve(self, call_id: str, shown: str) -> Observation:
        """Approve by the digest of the call the person was shown (R7)."""
        waiting, seen = self.outcomes[call_id], self.outcomes[shown]
        if waiting.kind != "awaiting_confirmation" or seen.kind != "awaiting_confirmation":
            return self._observe(call_id, waiting)
        try:
            out = self.runtime.approve(
                waiting.invocation_id, digest=seen.request.digest, approver="kit"
            )
        except toolbound.ConfirmationMismatch:
            return self._observe(call_id, waiting)  # still waiting for its own confirmation
        return self._observe(call_id, out)

    def deny(self, call_id: str) -> Observation:
        """Refuse by the digest the person was shown."""
        waiting = self.outcomes[call_id]
        if waiting.kind != "awaiting_confirmation":
            return self._observe(call_id, waiting)
        out = self.runtime.deny(
            waiting.invocation_id, digest=waiting.request.digest, approver="kit"
        )
        return self._observe(call_id, out)

    def _observe(self, call_id: str, out: Outcome) -> Observation:
        self.outcomes[call_id] = out
        self.traces[out.trace.invocation_id] = out.trace
        commit = out.message.payload.get("commit_status")
        return Observation(
            kind=_KINDS[out.kind],  # type: ignore[arg-type]
            text=out.message.content.decode("utf-8"),
            commit=commit if commit in {"committed", "not_committed", "unknown"} else None,  # type: ignore[arg-type]
            detail=out.path[-1].name if out.path else "",
        )

    def close(self) -> None:
        """Stop the runtime's workers."""
        runtime = getattr(self, "runtime", None)
        if runtime is not None:
            runtime.close()


def _proposal(call: Propose) -> toolbound.Proposal:
    return toolbound.Proposal(
        name=call.tool, arguments=call.arguments, proposal_id=call.call_id, version=call.version
    )


def _chat_stream(calls: Sequence[Propose], *, interleaved: bool) -> bytes:
    """The deltas as Chat Completions SSE; a cut-off call gets no finish and no [DONE].

    Each call is a ``tool_calls`` index of its own; ``interleaved`` sends one delta of
    each call in turn, else each call's deltas one call after the other.
    """
    pieces: list[Mapping[str, object]] = []
    for index, call in enumerate(calls):
        head = {"index": index, "id": call.call_id, "type": "function"}
        pieces.append({"tool_calls": [{**head, "function": {"name": call.tool, "arguments": ""}}]})
    deltas: list[list[Mapping[str, object]]] = [
        [{"tool_calls": [{"index": i, "function": {"arguments": d}}]} for d in c.deltas or ""]
        for i, c in enumerate(calls)
    ]
    if interleaved:
        longest = max(len(d) for d in deltas)
        pieces += [d[n] for n in range(longest) for d in deltas if n < len(d)]
    else:
        pieces += [p for d in deltas for p in d]
    events = [{"id": "kit", "choices": [{"index": 0, "delta": p}]} for p in pieces]
    if all(c.complete for c in calls):
        events.append(
            {"id": "kit", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
        )
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    return (body + ("data: [DONE]\n\n" if all(c.complete for c in calls) else "")).encode()

"""toolbound's library :class:`~toolbound.Runtime`, with the case's grants as a ``GrantPolicy``.

Each kit tool becomes a ``ToolSpec`` with its schemas, effect class, capability and
timeout; a write marks its commit boundary through ``ToolContext.mark_committed`` and
maps the world's lost response to ``CommitUnknown`` and its refusal to ``NotCommitted``
(the tool adapter, not the model, says where the commit is: R9). The model's text
is ``ModelProjection.content``, byte for byte.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from typing import TYPE_CHECKING, cast

from tool_runtime_conformance.adapter import Observation, Setup
from tool_runtime_conformance.world import Refusal, ResponseLost

try:
    import toolbound
    from toolbound.gates.authorize import NumberLimit
    from toolbound.testing import ScriptedModel, turn_from_stream
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = "this adapter needs toolbound: pip install 'tool-runtime-conformance[toolbound]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    import threading
    from collections.abc import Awaitable, Callable, Mapping

    from tool_runtime_conformance.cases import GrantDef, Propose, ToolDef
    from tool_runtime_conformance.world import KitTool
    from toolbound import Outcome
    from toolbound._model import JSONObject, JSONValue
    from toolbound.execution.tool import ToolContext

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
    )


def _grant(grant: GrantDef) -> toolbound.Grant:
    return toolbound.Grant(
        subject=grant.subject,
        tenant=grant.tenant,
        capability=grant.capability,
        actions=_ACTIONS,  # type: ignore[arg-type]
        confirm=grant.confirm,
        expires_at=grant.expires_at,
        limits=tuple(NumberLimit(x.pointer, x.minimum, x.maximum) for x in grant.limits),
    )


class ToolboundRuntime:
    """The library runtime: one ``Runtime.run`` per proposal, ``approve``/``deny`` by digest."""

    name = "toolbound (library Runtime)"
    versions: Mapping[str, str] = {"toolbound": version("toolbound")}

    def __init__(self) -> None:
        self.outcomes: dict[str, Outcome] = {}

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
        context = toolbound.CallContext(
            subject=self.subject,
            tools=self.registry.toolset(),
            idempotency_key=proposal.idempotency_key,
            cancel=cancel,
        )
        if proposal.deltas:
            return self._streamed(proposal, context)
        raw = toolbound.Proposal(
            name=proposal.tool,
            arguments=proposal.arguments,
            proposal_id=proposal.call_id,
            version=proposal.version,
        )
        return self._observe(proposal.call_id, self.runtime.run(raw, context))

    def _streamed(self, proposal: Propose, context: toolbound.CallContext) -> Observation:
        turn = turn_from_stream("openai-chat", _chat_stream(proposal))
        model = ScriptedModel([turn, toolbound.ModelTurn(text="done")])
        ended = toolbound.Loop(self.runtime, model, context=context).run("go")
        for step in ended.steps:
            if step.batch is not None and proposal.call_id in step.batch.by_id:
                return self._observe(proposal.call_id, step.batch[proposal.call_id])
        answers = [m for m in ended.transcript if m.get("call_id") == proposal.call_id]
        if answers:  # a cut-off call is answered with a rejection, never run
            return Observation(kind="refused", text=str(answers[-1]["content"]))
        return Observation(kind="failed", text="", detail="the loop never answered the call")

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


def _chat_stream(proposal: Propose) -> bytes:
    """The deltas as Chat Completions SSE; a cut-off call gets no finish and no [DONE]."""
    head = {"index": 0, "id": proposal.call_id, "type": "function"}
    first = {**head, "function": {"name": proposal.tool, "arguments": ""}}
    pieces = [{"tool_calls": [first]}]
    pieces += [
        {"tool_calls": [{"index": 0, "function": {"arguments": d}}]} for d in proposal.deltas
    ]
    events = [{"id": "kit", "choices": [{"index": 0, "delta": p}]} for p in pieces]
    if proposal.complete:
        events.append(
            {"id": "kit", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
        )
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    return (body + ("data: [DONE]\n\n" if proposal.complete else "")).encode()

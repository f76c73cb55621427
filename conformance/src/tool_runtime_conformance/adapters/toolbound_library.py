"""toolbound's library :class:`~toolbound.Runtime`, with the case's grants as a ``GrantPolicy``.

Each kit tool becomes a ``ToolSpec`` with its schemas, effect class, capability and
timeout; a write marks its commit boundary through ``ToolContext.mark_committed`` and
maps the world's lost response to ``CommitUnknown`` and its refusal to ``NotCommitted``
(the tool adapter, not the model, says where the commit is: R9). The model's text
is ``ModelProjection.content``, byte for byte.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import TYPE_CHECKING, cast

from tool_runtime_conformance.adapter import Observation, Setup
from tool_runtime_conformance.world import Refusal, ResponseLost

try:
    import toolbound
    from toolbound.gates.authorize import NumberLimit
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
        """``Runtime.run`` on the raw bytes, the key and the cancel from the caller."""
        context = toolbound.CallContext(
            subject=self.subject,
            tools=self.registry.toolset(),
            idempotency_key=proposal.idempotency_key,
            cancel=cancel,
        )
        raw = toolbound.Proposal(
            name=proposal.tool,
            arguments=proposal.arguments,
            proposal_id=proposal.call_id,
            version=proposal.version,
        )
        return self._observe(proposal.call_id, self.runtime.run(raw, context))

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

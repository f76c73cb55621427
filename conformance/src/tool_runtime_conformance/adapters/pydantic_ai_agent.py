"""Pydantic AI: an ``Agent`` driven by its ``FunctionModel``, the kit's tools from their schemas.

Two rows. :class:`PydanticAIDefaults` registers each tool with ``Tool.from_schema`` as
the docs show and nothing more. :class:`PydanticAIGuarded` switches on what Pydantic AI
offers: ``requires_approval`` (an ``ApprovalRequiredToolset``) for tools the grants mark
for confirmation, an ``args_validator`` checking the arguments against the tool's JSON
Schema (``from_schema`` alone does not validate), the tool's ``timeout``, a
``prepare`` that hides a tool whose capability the subject does not hold, and
``sequential`` for writes, so that two never overlap.

The model's text is what the ``FunctionModel`` receives for the call: the tool return
(``model_response_str``) or the retry prompt (``model_response``). Pydantic AI has no
idempotency key: a proposal's key is not passed anywhere.

A turn of several calls is one ``ModelResponse`` with several ``ToolCallPart`` parts; a
loop is one agent run over scripted responses, bounded in the guarded row by
``UsageLimits`` (``request_limit``, ``tool_calls_limit``) and in the defaults row by
Pydantic AI's own default (50 requests). Streams are not driven: a turn whose deltas
interleave, or a call cut off, is not applicable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator, FormatChecker  # type: ignore[import-untyped]

from tool_runtime_conformance.adapter import (
    CUT_OFF,
    LoopObservation,
    NotApplicable,
    Observation,
    ObservedKind,
)
from tool_runtime_conformance.adapters._cancel import Cancelled, run_cancellable

try:
    from pydantic_ai import (
        Agent,
        DeferredToolRequests,
        DeferredToolResults,
        ModelRetry,
        Tool,
        ToolDenied,
        UnexpectedModelBehavior,
        UsageLimitExceeded,
        UsageLimits,
        capture_run_messages,
    )
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = "this adapter needs Pydantic AI: pip install 'tool-runtime-conformance[pydantic-ai]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    import threading
    from collections.abc import Coroutine, Mapping, Sequence

    from pydantic_ai import RunContext
    from pydantic_ai.tools import ToolDefinition

    from tool_runtime_conformance.adapter import Setup
    from tool_runtime_conformance.cases import Propose, ToolDef
    from tool_runtime_conformance.world import KitTool

__all__ = ["PydanticAIDefaults", "PydanticAIGuarded"]


@dataclass
class _OneCall:
    """A FunctionModel that proposes one call, then reads what came back and stops."""

    call: ToolCallPart
    seen: list[ToolReturnPart | RetryPromptPart] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        back = [
            p
            for p in messages[-1].parts
            if isinstance(p, ToolReturnPart | RetryPromptPart)
            and p.tool_call_id == self.call.tool_call_id
        ]
        if not back and not self.seen:
            return ModelResponse(parts=[self.call])
        self.seen.extend(back)
        return ModelResponse(parts=[TextPart("done")])


INTERLEAVED = (
    "this adapter drives Pydantic AI's non-streaming path, where deltas interleaved "
    "between calls cannot be expressed"
)


@dataclass
class _Script:
    """A FunctionModel that plays several responses of calls, then answers with text."""

    turns: list[list[ToolCallPart]]

    def __call__(self, _messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        if self.turns:
            return ModelResponse(parts=list(self.turns.pop(0)))
        return ModelResponse(parts=[TextPart("done")])


def _answers(messages: Sequence[ModelMessage]) -> dict[str, Observation]:
    """What the model was sent for each call, by call id: the last answer wins."""
    seen: dict[str, Observation] = {}
    for message in messages:
        for part in message.parts:
            if isinstance(part, RetryPromptPart) and part.tool_call_id:
                seen[part.tool_call_id] = Observation(kind="refused", text=part.model_response())
            elif isinstance(part, ToolReturnPart):
                seen[part.tool_call_id] = Observation(
                    kind=_OUTCOMES[part.outcome],
                    text=part.model_response_str(),
                    detail=part.outcome,
                )
    return seen


def _part(call: Propose) -> ToolCallPart:
    if not call.complete:
        raise NotApplicable(CUT_OFF)
    return ToolCallPart(
        call.tool, call.arguments.decode("utf-8", "replace"), tool_call_id=call.call_id
    )


def _function(tool: KitTool) -> Any:  # noqa: ANN401 - Pydantic AI takes any callable
    async def call(**arguments: object) -> dict[str, object]:
        return await tool.acall(arguments)

    return call


def _schema_check(spec: ToolDef) -> Any:  # noqa: ANN401 - an ArgsValidatorFunc
    validator = Draft202012Validator(spec.input_schema, format_checker=FormatChecker())

    def check(_ctx: RunContext[None], **arguments: object) -> None:
        errors = [e.message for e in validator.iter_errors(arguments)]
        if errors:
            raise ModelRetry("; ".join(errors))

    return check


class PydanticAIDefaults:
    """Pydantic AI as its tool docs show it, nothing switched on."""

    name = "pydantic-ai (defaults)"
    versions: Mapping[str, str] = {"pydantic-ai-slim": version("pydantic-ai-slim")}
    guarded = False

    def __init__(self) -> None:
        self.waiting: dict[str, tuple[_OneCall, list[ModelMessage]]] = {}

    def start(self, setup: Setup) -> None:
        """A function toolset of the kit's tools (wrapped for approval when guarded)."""
        self.setup = setup
        tools = [self._tool(spec, tool) for spec, tool in setup.tools]
        toolset: Any = FunctionToolset(tools)
        confirm = {g.capability for g in setup.grants if g.confirm}
        if self.guarded and confirm:
            caps = {spec.name: spec.capability for spec, _ in setup.tools}
            toolset = toolset.approval_required(
                lambda _ctx, tool_def, _args: caps.get(tool_def.name) in confirm
            )
        self.toolset = toolset

    def _tool(self, spec: ToolDef, tool: KitTool) -> Tool[None]:
        made: Tool[None] = Tool.from_schema(
            _function(tool),
            name=spec.name,
            description=spec.description,
            json_schema=dict(spec.input_schema),
            args_validator=_schema_check(spec) if self.guarded else None,
            sequential=self.guarded and spec.writes,
        )
        if self.guarded:
            made.timeout = spec.timeout_seconds
            made.prepare = self._prepare(spec)
        return made

    def _prepare(self, spec: ToolDef) -> Any:  # noqa: ANN401 - a ToolPrepareFunc
        subject, now = self.setup.subject, datetime.now(UTC)
        held = any(
            g.capability == spec.capability
            and g.subject == subject.id
            and g.tenant == subject.tenant
            and (g.expires_at is None or now < g.expires_at)
            for g in self.setup.grants
        )

        async def prepare(
            _ctx: RunContext[None], tool_def: ToolDefinition
        ) -> ToolDefinition | None:
            return tool_def if held else None

        return prepare

    def _agent(self, model: _OneCall) -> Agent[None, str | DeferredToolRequests]:
        return Agent(
            FunctionModel(model), toolsets=[self.toolset], output_type=[str, DeferredToolRequests]
        )

    def propose(self, proposal: Propose, cancel: threading.Event) -> Observation:
        """One agent run in which the model proposes exactly this call."""
        if not proposal.complete:
            raise NotApplicable(CUT_OFF)
        text = proposal.arguments.decode("utf-8", "replace")
        model = _OneCall(ToolCallPart(proposal.tool, text, tool_call_id=proposal.call_id))
        return self._run(model, cancel, self._agent(model).run("go"))

    def _run(
        self, model: _OneCall, cancel: threading.Event, run: Coroutine[Any, Any, Any]
    ) -> Observation:
        try:
            result = run_cancellable(run, cancel)
        except Cancelled:
            return Observation(kind="cancelled", text="")
        except Exception as exc:  # noqa: BLE001 - the run died; the model is told nothing
            return Observation(kind="failed", text="", detail=repr(exc))
        call_id = model.call.tool_call_id
        if isinstance(result.output, DeferredToolRequests):
            self.waiting[call_id] = (model, result.all_messages())
            return Observation(kind="asked", text="")
        return _observed(model)

    def propose_turn(
        self, calls: Sequence[Propose], cancel: threading.Event, *, interleaved: bool
    ) -> Mapping[str, Observation]:
        """One model response with every call's ``ToolCallPart``; Pydantic AI runs them."""
        if interleaved:
            raise NotApplicable(INTERLEAVED)
        script = _Script([[_part(c) for c in calls]])
        end, seen = self._script_run(script, cancel, UsageLimits())
        died = Observation(kind="failed", text="", detail=end[1])
        return {c.call_id: seen.get(c.call_id, died) for c in calls}

    def run_loop(
        self, turns: Sequence[Sequence[Propose]], budgets: Mapping[str, int]
    ) -> LoopObservation:
        """One agent run over the scripted responses, under ``UsageLimits`` when guarded."""
        script = _Script([[_part(c) for c in t] for t in turns])
        limits = (
            UsageLimits(
                request_limit=budgets.get("model_calls", 50),
                tool_calls_limit=budgets.get("tool_calls"),
            )
            if self.guarded
            else UsageLimits()
        )
        end, seen = self._script_run(script, _never(), limits)
        return LoopObservation(end=end[0], calls=seen, detail=end[1])  # type: ignore[arg-type]

    def _script_run(
        self, script: _Script, cancel: threading.Event, limits: UsageLimits
    ) -> tuple[tuple[str, str], dict[str, Observation]]:
        agent = self._agent(script)  # type: ignore[arg-type]

        async def run() -> tuple[tuple[str, str], list[ModelMessage], object]:
            with capture_run_messages() as messages:
                try:
                    result = await agent.run("go", usage_limits=limits)
                except (UsageLimitExceeded, UnexpectedModelBehavior) as exc:
                    # its own limits: usage, and a tool's retries used up
                    return ("stopped", str(exc)), messages, None
                except Exception as exc:  # noqa: BLE001 - the run died
                    return ("failed", repr(exc)), messages, None
            return ("finished", ""), result.all_messages(), result.output

        try:
            end, messages, output = run_cancellable(run(), cancel)
        except Cancelled:
            return ("failed", "cancelled"), {}
        seen = _answers(messages)
        if isinstance(output, DeferredToolRequests):
            for call in output.approvals:
                seen[call.tool_call_id] = Observation(kind="asked", text="")
        return end, seen

    def approve(self, call_id: str, shown: str) -> Observation:  # noqa: ARG002
        """Approve by call id: Pydantic AI binds an approval to the id, not to what was shown."""
        return self._decide(call_id, approved=True)

    def deny(self, call_id: str) -> Observation:
        """Deny by call id."""
        return self._decide(call_id, approved=False)

    def _decide(self, call_id: str, *, approved: bool) -> Observation:
        if call_id not in self.waiting:
            return Observation(kind="failed", text="", detail="nothing waits for approval")
        old, history = self.waiting.pop(call_id)
        model = _OneCall(old.call, seen=[])
        decision = True if approved else ToolDenied("denied by a person")
        results = DeferredToolResults(approvals={call_id: decision})
        run = self._agent(model).run(message_history=history, deferred_tool_results=results)
        return self._run(model, _never(), run)

    def close(self) -> None:
        """Nothing to release."""


class PydanticAIGuarded(PydanticAIDefaults):
    """Pydantic AI with approval, schema validation, timeouts and grant-aware tool lists."""

    name = "pydantic-ai (approval, validation, timeout)"
    guarded = True


def _never() -> threading.Event:
    import threading  # noqa: PLC0415 - only decisions need a cancel that never fires

    return threading.Event()


_OUTCOMES: dict[str, ObservedKind] = {
    "success": "ran",
    "retried": "refused",
    "denied": "refused",
    "failed": "failed",
    "interrupted": "cancelled",
}


def _observed(model: _OneCall) -> Observation:
    if not model.seen:
        return Observation(kind="failed", text="", detail="the model saw nothing for the call")
    part = model.seen[-1]
    if isinstance(part, RetryPromptPart):
        return Observation(kind="refused", text=part.model_response())
    return Observation(
        kind=_OUTCOMES[part.outcome], text=part.model_response_str(), detail=part.outcome
    )

"""The OpenAI Agents SDK: ``Runner.run`` on an ``Agent`` whose model plays one call.

Each kit tool is a ``FunctionTool`` with its JSON Schema and an ``on_invoke_tool`` that
parses the argument string, as the SDK's docs show for custom tools, and answers a
failure with ``default_tool_error_function`` as ``@function_tool`` does. Two rows.
:class:`AgentsSDKDefaults` does only that. :class:`AgentsSDKGuarded` switches on what
the SDK offers: ``needs_approval`` for tools the grants mark for confirmation (the run
stops with an interruption; ``RunState.approve``/``reject`` resume it), the tool's
``timeout_seconds``, and a check of the arguments against the schema in
``on_invoke_tool``. The SDK has no grants and no idempotency key.

The model's text is the ``function_call_output`` the SDK sends back for the call.

A turn of several calls is one model response with several function calls; a loop is
one ``Runner.run`` over scripted responses, bounded by ``max_turns`` (the guarded row
sets it from the case's model-call budget; the defaults row keeps the SDK's 10). The
SDK counts model turns only: a tool-call budget is not applicable. Streams are not
driven: interleaved deltas and cut-off calls are not applicable.

The trace is the SDK's own tracing (on by default), read as its docs show through a
``TracingProcessor`` installed with ``set_trace_processors`` (replacing the exporter
to OpenAI), with ``trace_include_sensitive_data``: every ended span's ``export()``.
"""

from __future__ import annotations

import asyncio
import json
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
    from agents import (
        Agent,
        FunctionTool,
        MaxTurnsExceeded,
        RunConfig,
        Runner,
        TracingProcessor,
        set_trace_processors,
        set_tracing_disabled,
    )
    from agents.items import ModelResponse, ToolCallOutputItem
    from agents.models.interface import Model
    from agents.run import DEFAULT_MAX_TURNS
    from agents.tool import default_tool_error_function
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = "this adapter needs the Agents SDK: pip install 'tool-runtime-conformance[openai-agents]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    import threading
    from collections.abc import AsyncIterator, Mapping, Sequence

    from agents.tool_context import ToolContext

    from tool_runtime_conformance.adapter import Setup
    from tool_runtime_conformance.cases import Propose, ToolDef
    from tool_runtime_conformance.world import KitTool

__all__ = ["AgentsSDKDefaults", "AgentsSDKGuarded"]

_RUN = RunConfig(trace_include_sensitive_data=True)


class _Collector(TracingProcessor):
    """Keeps every span as it ends, in order; traces themselves add no detail."""

    def __init__(self) -> None:
        self.events: list[dict[str, object]] = []

    def on_trace_start(self, trace: Any) -> None:  # noqa: ANN401 - the SDK's Trace
        """Nothing to keep yet."""

    def on_trace_end(self, trace: Any) -> None:  # noqa: ANN401
        """Nothing more to keep."""

    def on_span_start(self, span: Any) -> None:  # noqa: ANN401 - the SDK's Span
        """Kept when it ends, complete."""

    def on_span_end(self, span: Any) -> None:  # noqa: ANN401
        """Keep the span as the SDK exports it."""
        exported = span.export()
        if exported is not None:
            self.events.append(exported)

    def shutdown(self) -> None:
        """Nothing to flush."""

    def force_flush(self) -> None:
        """Nothing to flush."""


class _OneCall(Model):
    """A model that proposes one function call, then reads its output and stops."""

    def __init__(self, call: ResponseFunctionToolCall) -> None:
        self.call = call
        self.output: str | None = None

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:  # noqa: ANN401
        """The scripted turn: the call first, then a final message."""
        items = kwargs["input"] if "input" in kwargs else args[1]
        outputs = [
            i["output"]
            for i in (items if isinstance(items, list) else [])
            if isinstance(i, dict)
            and i.get("type") == "function_call_output"
            and i.get("call_id") == self.call.call_id
        ]
        if outputs:
            self.output = str(outputs[-1])
        if self.output is None:
            return ModelResponse(output=[self.call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text="done", annotations=[])
        done = ResponseOutputMessage(
            type="message", id="msg", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[done], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # noqa: ANN401
        """Not used: the kit runs without streaming."""
        raise NotImplementedError


INTERLEAVED = (
    "this adapter drives the Agents SDK's non-streaming path, where deltas interleaved "
    "between calls cannot be expressed"
)
NO_TOOL_CALL_BUDGET = (
    "the Agents SDK bounds a run by max_turns, model turns only; it has no tool-call budget"
)


def _function_call(proposal: Propose) -> ResponseFunctionToolCall:
    if not proposal.complete:
        raise NotApplicable(CUT_OFF)
    return ResponseFunctionToolCall(
        type="function_call",
        id=f"fc_{proposal.call_id}",
        call_id=proposal.call_id,
        name=proposal.tool,
        arguments=proposal.arguments.decode("utf-8", "replace"),
        status="completed",
    )


class _Script(Model):
    """A model that plays several responses of function calls, then a final message."""

    def __init__(self, turns: Sequence[Sequence[ResponseFunctionToolCall]]) -> None:
        self.turns = [list(t) for t in turns]
        self.outputs: dict[str, str] = {}

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:  # noqa: ANN401
        """The next scripted response; every output sent so far is kept by call id."""
        items = kwargs["input"] if "input" in kwargs else args[1]
        for i in items if isinstance(items, list) else []:
            if isinstance(i, dict) and i.get("type") == "function_call_output":
                self.outputs[str(i.get("call_id"))] = str(i["output"])
        if self.turns:
            return ModelResponse(output=list(self.turns.pop(0)), usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text="done", annotations=[])
        done = ResponseOutputMessage(
            type="message", id="msg", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[done], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # noqa: ANN401
        """Not used: the kit runs without streaming."""
        raise NotImplementedError


class AgentsSDKDefaults:
    """Custom ``FunctionTool``s that parse their argument string, nothing switched on."""

    name = "openai-agents (defaults)"
    versions: Mapping[str, str] = {"openai-agents": version("openai-agents")}
    guarded = False

    def __init__(self) -> None:
        self.failed: dict[str, str] = {}
        self.waiting: dict[str, tuple[Agent[Any], _OneCall, Any]] = {}

    def start(self, setup: Setup) -> None:
        """One ``FunctionTool`` per kit tool."""
        confirm = {g.capability for g in setup.grants if g.confirm} if self.guarded else set()
        self.tools = [self._tool(s, t, ask=s.capability in confirm) for s, t in setup.tools]
        self.collector = _Collector()
        set_trace_processors([self.collector])
        # The SDK's default, whatever an application of this process switched off.
        set_tracing_disabled(False)

    def _tool(self, spec: ToolDef, tool: KitTool, *, ask: bool) -> FunctionTool:
        validator = Draft202012Validator(spec.input_schema, format_checker=FormatChecker())

        async def invoke(ctx: ToolContext[Any], raw: str) -> str:
            try:
                arguments = json.loads(raw)
                errors = (
                    [e.message for e in validator.iter_errors(arguments)] if self.guarded else []
                )
                if errors:
                    raise ValueError("; ".join(errors))  # noqa: TRY301 - one failure path
                return json.dumps(await tool.acall(arguments))
            except asyncio.CancelledError:  # the SDK's timeout, or the kit's cancel
                self.failed[ctx.tool_call_id] = "cancelled"
                raise
            except Exception as exc:  # noqa: BLE001 - answered as @function_tool answers
                self.failed[ctx.tool_call_id] = repr(exc)
                return default_tool_error_function(ctx, exc)

        return FunctionTool(
            name=spec.name,
            description=spec.description,
            params_json_schema=dict(spec.input_schema),
            on_invoke_tool=invoke,
            strict_json_schema=False,
            needs_approval=ask,
            timeout_seconds=spec.timeout_seconds if self.guarded else None,
        )

    def propose(self, proposal: Propose, cancel: threading.Event) -> Observation:
        """One ``Runner.run`` in which the model proposes exactly this call."""
        if not proposal.complete:
            raise NotApplicable(CUT_OFF)
        call = ResponseFunctionToolCall(
            type="function_call",
            id=f"fc_{proposal.call_id}",
            call_id=proposal.call_id,
            name=proposal.tool,
            arguments=proposal.arguments.decode("utf-8", "replace"),
            status="completed",
        )
        model = _OneCall(call)
        agent: Agent[Any] = Agent(name="kit", model=model, tools=list(self.tools))
        return self._run(agent, model, "go", cancel)

    def _run(
        self,
        agent: Agent[Any],
        model: _OneCall,
        start: Any,  # noqa: ANN401 - an input or a RunState
        cancel: threading.Event,
    ) -> Observation:
        call_id = model.call.call_id
        try:
            result = run_cancellable(Runner.run(agent, start, run_config=_RUN), cancel)
        except Cancelled:
            return Observation(kind="cancelled", text="")
        except Exception as exc:  # noqa: BLE001 - the run died; the model is told nothing
            return Observation(kind="failed", text="", detail=repr(exc))
        if result.interruptions:
            self.waiting[call_id] = (agent, model, result.to_state())
            return Observation(kind="asked", text="")
        if model.output is None:
            return Observation(kind="failed", text="", detail="no output for the call")
        kind: ObservedKind = "failed" if call_id in self.failed else "ran"
        return Observation(kind=kind, text=model.output, detail=self.failed.get(call_id, ""))

    def propose_turn(
        self, calls: Sequence[Propose], cancel: threading.Event, *, interleaved: bool
    ) -> Mapping[str, Observation]:
        """One model response with a function call per proposal; the SDK runs them."""
        if interleaved:
            raise NotApplicable(INTERLEAVED)
        model = _Script([[_function_call(c) for c in calls]])
        _end, seen = self._script_run(model, cancel, max_turns=None)
        return {c.call_id: seen[c.call_id] for c in calls}

    def run_loop(
        self, turns: Sequence[Sequence[Propose]], budgets: Mapping[str, int]
    ) -> LoopObservation:
        """One ``Runner.run`` over the scripted responses, ``max_turns`` from the budget."""
        if "tool_calls" in budgets:
            raise NotApplicable(NO_TOOL_CALL_BUDGET)
        model = _Script([[_function_call(c) for c in t] for t in turns])
        limit = budgets.get("model_calls") if self.guarded else None
        import threading  # noqa: PLC0415 - a loop is never cancelled here

        end, seen = self._script_run(model, threading.Event(), max_turns=limit)
        answered = {k: v for k, v in seen.items() if v.kind != "failed" or v.text}
        return LoopObservation(end=end[0], calls=answered, detail=end[1])  # type: ignore[arg-type]

    def _script_run(
        self, model: _Script, cancel: threading.Event, *, max_turns: int | None
    ) -> tuple[tuple[str, str], dict[str, Observation]]:
        calls = [c for t in model.turns for c in t]
        agent: Agent[Any] = Agent(name="kit", model=model, tools=list(self.tools))
        limit = DEFAULT_MAX_TURNS if max_turns is None else max_turns
        end = ("finished", "")
        interrupted: set[str] = set()
        items: list[Any] = []
        try:
            result = run_cancellable(
                Runner.run(agent, "go", run_config=_RUN, max_turns=limit), cancel
            )
            interrupted = {str(getattr(i.raw_item, "call_id", "")) for i in result.interruptions}
            items = list(result.new_items)
        except Cancelled:
            end = ("failed", "cancelled")
        except MaxTurnsExceeded as exc:
            end = ("stopped", repr(exc))
            items = [] if exc.run_data is None else list(exc.run_data.new_items)
        except Exception as exc:  # noqa: BLE001 - the run died; the model is told nothing more
            end = ("failed", repr(exc))
        # Outputs the run made but no model call was given yet (the run paused or ended).
        for item in items:
            if isinstance(item, ToolCallOutputItem) and item.call_id is not None:
                raw = item.raw_item
                output = raw.get("output") if isinstance(raw, dict) else item.output
                model.outputs.setdefault(item.call_id, str(output))
        seen: dict[str, Observation] = {}
        for call in calls:
            text = model.outputs.get(call.call_id)
            if call.call_id in interrupted:
                seen[call.call_id] = Observation(kind="asked", text="")
            elif text is None:
                seen[call.call_id] = Observation(kind="failed", text="", detail=end[1])
            else:
                kind: ObservedKind = "failed" if call.call_id in self.failed else "ran"
                seen[call.call_id] = Observation(kind=kind, text=text)
        return end, seen

    def approve(self, call_id: str, shown: str) -> Observation:  # noqa: ARG002
        """Approve the interruption: the SDK binds it to the call item, not to what was shown."""
        return self._decide(call_id, approved=True)

    def deny(self, call_id: str) -> Observation:
        """Reject the interruption."""
        return self._decide(call_id, approved=False)

    def _decide(self, call_id: str, *, approved: bool) -> Observation:
        if call_id not in self.waiting:
            return Observation(kind="failed", text="", detail="nothing waits for approval")
        agent, model, state = self.waiting.pop(call_id)
        for item in state.get_interruptions():
            (state.approve if approved else state.reject)(item)
        import threading  # noqa: PLC0415 - a decision is never cancelled

        seen = self._run(agent, model, state, threading.Event())
        if not approved and seen.kind == "ran":
            # a rejection is sent as an ordinary output; the tool never ran (the world says so)
            return Observation(kind="refused", text=seen.text, detail="rejected")
        return seen

    def trace(self) -> Sequence[Mapping[str, object]]:
        """Every span the SDK's tracing ended so far, as it exports them."""
        return list(self.collector.events)

    def close(self) -> None:
        """Nothing to release."""


class AgentsSDKGuarded(AgentsSDKDefaults):
    """``needs_approval``, ``timeout_seconds`` and a schema check in ``on_invoke_tool``."""

    name = "openai-agents (approval, timeout, schema check)"
    guarded = True

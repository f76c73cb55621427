"""The model ↔ tool loop, under budgets the runtime enforces (R13).

The loop ends because the *runtime* says so — a budget is spent, the same call keeps
coming back without progress, or it was cancelled — or because the model answered
without calling a tool. It never relies on the model's willingness to say "done".

Budgets: model calls, tool calls, wall time, cumulative bytes of tool results sent
back, and external cost reported by the model. The visible tool set may change from
step to step (``tools`` may be a function of the step), and a built-in
``request_capability`` tool lets the model ask for a tool it cannot see; that request
is itself a tool call, authorized by the policy like any other. A model's corrected
call after an error is simply a new proposal in the next turn.

Provenance is tracked by default (R6, R11): each run keeps a
:class:`~toolbound.provenance.Provenance` index — the user's messages as trusted,
system text as the runtime's, every tool result the model was shown labelled with
its tool, version and invocation id — and every call is examined against it, so
flow rules (:class:`~toolbound.provenance.FlowPolicy`) can see where its argument
values came from. The phase's tool set is the task scope: unless the index declares a
scope of its own, the writes visible in the current phase are the writes the task may
need, so a write the model reached another way (``request_capability``) is confirmed
by a person as ``out_of_scope`` rather than run.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol, cast

from toolbound._errors import Problem
from toolbound._model import Proposal, Resource, ToolSpec
from toolbound.batch import BatchOutcome, run_batch
from toolbound.provenance import Label, Provenance
from toolbound.registry import RegisteredTool, Registry, ToolSet

if TYPE_CHECKING:
    import threading

    from toolbound._model import JSONObject, JSONValue, Subject
    from toolbound._outcome import Outcome
    from toolbound.execution.tool import ToolContext
    from toolbound.pipeline.runtime import CallContext, Runtime
    from toolbound.streams.assemble import IncompleteCall, StreamOutcome

__all__ = [
    "REQUEST_CAPABILITY",
    "Budgets",
    "Loop",
    "LoopEnd",
    "LoopOutcome",
    "Message",
    "Model",
    "ModelTurn",
    "Step",
    "Usage",
    "request_capability_spec",
]

Message = Mapping[str, object]
"""One transcript entry, provider-neutral: ``{"role": "user" | "assistant" | "tool", …}``."""

REQUEST_CAPABILITY = "request_capability"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTurn:
    """What one model call returned: text and/or proposals, and what it cost."""

    text: str = ""
    proposals: tuple[Proposal, ...] = ()
    incomplete: tuple[IncompleteCall, ...] = ()
    """Calls the stream cut off: never executed, answered with an error (R15)."""
    cost: float = 0.0
    model_call_id: str | None = None

    @classmethod
    def from_stream(cls, outcome: StreamOutcome, *, cost: float = 0.0) -> ModelTurn:
        """The turn an assembled stream amounts to: complete calls only."""
        return cls(
            text=outcome.text,
            proposals=outcome.calls,
            incomplete=outcome.incomplete,
            cost=cost,
            model_call_id=outcome.model_call_id,
        )


class Model(Protocol):
    """Anything that turns a transcript and the visible tools into a turn."""

    def __call__(self, transcript: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelTurn:
        """One model call."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Budgets:
    """Limits the runtime enforces on one loop; ``None`` means no limit."""

    model_calls: int | None = 16
    tool_calls: int | None = 64
    wall_time: float | None = 120.0
    result_bytes: int | None = 262_144
    cost: float | None = None
    repeats: int = 2
    """How many times the same normalized call (same digest) may come back with the
    same result before the loop stops for lack of progress."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """What the loop spent."""

    model_calls: int = 0
    tool_calls: int = 0
    wall_time: float = 0.0
    result_bytes: int = 0
    cost: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One model call and the calls it proposed.

    ``context_digest`` identifies exactly the transcript the model was given (R14:
    which context the next model call used); ``visible`` the tools it could see.
    """

    index: int
    context_digest: str
    visible: tuple[str, ...]
    turn: ModelTurn
    batch: BatchOutcome | None = None


LoopEnd = Literal["finished", "budget_exhausted", "no_progress", "cancelled"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopOutcome:
    """How the loop ended, typed (STYLE 5)."""

    kind: LoopEnd
    reason: str
    text: str
    transcript: tuple[Message, ...]
    steps: tuple[Step, ...]
    usage: Usage
    provenance: Provenance | None = None
    """The index of labelled values the run's calls were examined against."""


def request_capability_spec() -> ToolSpec:
    """The built-in tool through which a model asks for a tool it cannot see.

    It is authorized like any call: a grant of ``tools:request`` with an
    :class:`~toolbound.gates.authorize.IdScope` over the tool names a subject may ask for.
    """
    return ToolSpec(
        name=REQUEST_CAPABILITY,
        version="v1",
        description=(
            "Ask for access to a tool that is not in your tool list. Name the tool "
            "and say why you need it. The answer says whether it was granted."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "tool": {"type": "string", "minLength": 1, "maxLength": 64},
                "reason": {"type": "string", "minLength": 1, "maxLength": 500},
            },
            "required": ["tool", "reason"],
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {"tool": {"type": "string"}, "granted": {"type": "boolean"}},
            "required": ["tool", "granted"],
            "additionalProperties": False,
        },
        effect="pure",
        capabilities=("tools:request",),
        resources=lambda a: [Resource(kind="tool", id=str(a["tool"]), action="read")],
        reads_untrusted=False,  # it answers from the runtime's own registry
        reads_private=False,
    )


@dataclass(slots=True, kw_only=True)
class _Run:
    """What one run of the loop has said and spent so far.

    Mutable on purpose: it lives only inside one :meth:`Loop.run`, and each step adds
    to it; the frozen :class:`LoopOutcome` is made from it when the run ends.
    """

    started: float
    transcript: list[Message]
    index: Provenance | None
    declared: bool = False
    """Whether the index came with a task scope of its own (else each phase sets it)."""
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    seen: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    """R13: each digest's last result fingerprint and how often it came back."""

    def end(self, kind: LoopEnd, reason: str, text: str = "") -> LoopOutcome:
        """The outcome of the run, ending now."""
        return LoopOutcome(
            kind=kind,
            reason=reason,
            text=text,
            transcript=tuple(self.transcript),
            steps=tuple(self.steps),
            usage=replace(self.usage, wall_time=time.monotonic() - self.started),
            provenance=self.index,
        )


class Loop:
    """Runs model turns and their tool calls until the runtime ends it."""

    def __init__(
        self,
        runtime: Runtime,
        model: Model,
        *,
        context: CallContext,
        tools: ToolSet | Callable[[int], ToolSet] | None = None,
        requestable: Registry | None = None,
        budgets: Budgets | None = None,
        cancel: threading.Event | None = None,
        concurrency: int = 4,
        provenance: Provenance | Literal[False] | None = None,
    ) -> None:
        """Set the loop up.

        ``context`` gives the subject and frame; ``tools`` the visible set (or a
        function of the step index); ``requestable`` the tools a model may ask for
        through ``request_capability`` (added to its view only when authorized).
        ``provenance`` is the index calls are examined against: by default the
        context's, else a new one for each run; pass one to seed it with trusted
        configuration or to share it across runs, or ``False`` to track nothing.
        """
        self.runtime = runtime
        self.model = model
        self.context = context
        self._tools = tools if tools is not None else context.tools
        self._requestable = requestable
        self.budgets = budgets or Budgets()
        self.cancel = cancel
        self._concurrency = concurrency
        self._granted: dict[str, ToolSpec] = {}
        self._request_tool = self._make_request_tool() if requestable is not None else None
        self._provenance = provenance

    @property
    def subject(self) -> Subject:
        """Who the loop runs for."""
        return self.context.subject

    def run(self, prompt: str | Sequence[Message]) -> LoopOutcome:
        """Run the loop from a user prompt (or a transcript) to its end."""
        started = time.monotonic()
        transcript: list[Message] = (
            [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        )
        index = self._index(transcript)
        run = _Run(
            started=started,
            transcript=transcript,
            index=index,
            declared=index is not None and index.scope is not None,
        )
        try:
            while True:
                ended = self._step(run)
                if ended is not None:
                    return ended
        finally:
            if index is not None and not run.declared:
                index.scope = None  # the phases were this run's; a shared index outlives it
                index.explicit = True

    def _step(self, run: _Run) -> LoopOutcome | None:  # noqa: PLR0911 - one exit per ending
        """One model turn and the calls it proposed; how the loop ended, if it did."""
        if self._cancelled():
            return run.end("cancelled", "cancelled")
        exhausted = self._exhausted(run.usage, time.monotonic() - run.started)
        if exhausted is not None:
            return run.end("budget_exhausted", exhausted)
        phase = self._tools(len(run.steps)) if callable(self._tools) else self._tools
        toolset = self._visible(phase)
        if run.index is not None and not run.declared:
            # R13: the phase declares the writes the task may need now (R6: task scope).
            # One tool set for every step declares nothing about the task: the tools'
            # intents, read from the user's words, narrow it (R6).
            run.index.scope = _writes(phase)
            run.index.explicit = callable(self._tools)
        turn = self.model(tuple(run.transcript), toolset.specs)
        run.usage = replace(
            run.usage, model_calls=run.usage.model_calls + 1, cost=run.usage.cost + turn.cost
        )
        step = Step(
            index=len(run.steps),
            context_digest=_digest(run.transcript),
            visible=toolset.refs,
            turn=turn,
        )
        # Cancelled while the model was thinking: nothing after a terminal state.
        if self._cancelled():
            run.steps.append(step)
            return run.end("cancelled", "cancelled")
        run.transcript.append(_assistant(turn))
        if not turn.proposals and not turn.incomplete:
            run.steps.append(step)
            return run.end("finished", "the model answered without calling a tool", turn.text)
        limit = self.budgets.tool_calls
        if limit is not None and run.usage.tool_calls + len(turn.proposals) > limit:
            run.steps.append(step)
            return run.end("budget_exhausted", "tool_calls")
        batch = self._calls(run, toolset, turn)
        run.steps.append(replace(step, batch=batch))
        if self._cancelled():
            return run.end("cancelled", "cancelled")
        stuck = _repeated(batch, run.seen, self.budgets.repeats)
        if stuck is not None:
            return run.end("no_progress", stuck)
        return None

    def _calls(self, run: _Run, toolset: ToolSet, turn: ModelTurn) -> BatchOutcome:
        """Answer the turn's cut-off calls, run its proposals, and record what came back."""
        remaining = (
            None
            if self.budgets.result_bytes is None
            else self.budgets.result_bytes - run.usage.result_bytes
        )
        ctx = replace(self.context, tools=toolset, cancel=self.cancel, provenance=run.index)
        for i, cut in enumerate(turn.incomplete):
            refused = self.runtime.reject(_incomplete(turn, i, cut), ctx, _cut_off(cut))
            run.transcript.append(_tool_message(refused))
        batch = run_batch(
            self.runtime,
            turn.proposals,
            ctx,
            concurrency=self._concurrency,
            result_budget=remaining,
        )
        run.usage = replace(
            run.usage,
            tool_calls=run.usage.tool_calls + len(turn.proposals),
            result_bytes=run.usage.result_bytes + batch.result_bytes,
        )
        for outcome in batch.outcomes:
            run.transcript.append(_tool_message(outcome))
            self._note_grant(outcome)
            if run.index is not None:
                _learn(run.index, toolset, outcome)
        return batch

    def _cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    # -- provenance ------------------------------------------------------------------

    def _index(self, transcript: Sequence[Message]) -> Provenance | None:
        """The index for one run, with the transcript it starts from labelled."""
        if self._provenance is False:
            return None
        index = self._provenance or self.context.provenance or Provenance()
        for message in transcript:
            content = message.get("content")
            if not isinstance(content, str | list | dict):
                continue
            value = cast("JSONValue", content)
            role = message.get("role")
            if role == "user":
                index.add_user(value)
            elif role in {"system", "developer"}:
                index.add_runtime(value, note=str(role))
            elif role == "tool":
                # A result from before this run: its tool is unknown, so it is
                # labelled as the least trusted tool would be.
                index.add(Label(origin="tool", untrusted=True, private=True), value)
        return index

    # -- visible tools and request_capability ------------------------------------

    def _visible(self, base: ToolSet) -> ToolSet:
        """The phase's tools, ``request_capability`` and the tools granted through it."""
        extra = []
        if self._request_tool is not None and REQUEST_CAPABILITY not in base:
            extra.append(self._request_tool)
        if self._requestable is not None:
            for name in self._granted:
                tool = self._requestable.get(name, self._granted[name].version)
                if tool is not None and name not in base:
                    extra.append(tool)
        return ToolSet([*base, *extra]) if extra else base

    def _make_request_tool(self) -> RegisteredTool:
        requestable = self._requestable
        assert requestable is not None  # noqa: S101 - only called with one

        def request_capability(arguments: JSONObject, _ctx: ToolContext) -> JSONValue:
            # Reaching here means the policy authorized this request for this tool.
            name = str(arguments["tool"])
            versions = requestable.versions(name)
            return {"tool": name, "granted": bool(versions)}

        private = Registry()
        return private.register(request_capability_spec(), request_capability)

    def _note_grant(self, outcome: object) -> None:
        if self._requestable is None or getattr(outcome, "kind", None) != "observed":
            return
        if getattr(outcome, "tool", "") != f"{REQUEST_CAPABILITY}@v1":
            return
        value = outcome.result.value  # type: ignore[attr-defined]
        if isinstance(value, dict) and value.get("granted"):
            name = str(value["tool"])
            versions = self._requestable.versions(name)
            if versions:
                tool = self._requestable.get(name, max(versions))
                if tool is not None:
                    self._granted[name] = tool.spec

    def _exhausted(self, usage: Usage, elapsed: float) -> str | None:
        b = self.budgets
        checks = (
            ("model_calls", b.model_calls is not None and usage.model_calls >= b.model_calls),
            ("wall_time", b.wall_time is not None and elapsed >= b.wall_time),
            (
                "result_bytes",
                b.result_bytes is not None and usage.result_bytes >= b.result_bytes,
            ),
            ("cost", b.cost is not None and usage.cost >= b.cost),
            ("tool_calls", b.tool_calls is not None and usage.tool_calls >= b.tool_calls),
        )
        return next((name for name, hit in checks if hit), None)


def _writes(phase: ToolSet) -> frozenset[str]:
    """The writes a phase shows, by name and ``name@version``: the task scope (R6, R13).

    Tools granted through ``request_capability`` are not among them: the model asked
    for those, the phase did not declare them.
    """
    specs = [tool.spec for tool in phase if tool.spec.is_write]
    return frozenset(s.ref for s in specs) | frozenset(s.name for s in specs)


def _learn(index: Provenance, toolset: ToolSet, outcome: Outcome) -> None:
    """Index what the model was shown of an observed result, labelled by its tool (R11)."""
    if outcome.kind != "observed":
        return
    inv = outcome.invocation
    tool = toolset.lookup(inv.tool_name, inv.tool_version)
    data = outcome.message.payload.get("data")
    if tool is not None:
        # As the spec declares it: its system-assigned fields, its data classes.
        index.add_result(tool.spec, inv.invocation_id, data)
        return
    label = Label(
        origin="tool",
        tool=inv.tool_name,
        version=inv.tool_version,
        invocation_id=inv.invocation_id,
        untrusted=True,
        private=True,
    )
    index.add(label, data)


def _assistant(turn: ModelTurn) -> Message:
    return {
        "role": "assistant",
        "text": turn.text,
        "calls": [
            {
                "id": p.proposal_id,
                "name": p.name,
                "arguments": p.arguments.decode("utf-8", errors="replace"),
            }
            for p in turn.proposals
        ],
        "incomplete": [c.call_id for c in turn.incomplete],
    }


def _tool_message(outcome: Outcome) -> Message:
    """The transcript entry answering one call."""
    return {"role": "tool", "call_id": outcome.proposal_id, "content": outcome.message.text}


def _incomplete(turn: ModelTurn, i: int, cut: IncompleteCall) -> Proposal:
    """The proposal a cut-off call amounts to, so that it is traced and answered (R15)."""
    return Proposal(
        name=cut.name or "",
        arguments=cut.received_arguments,
        proposal_id=cut.call_id or f"incomplete-{i}",
        model_call_id=turn.model_call_id,
    )


def _cut_off(cut: IncompleteCall) -> Problem:
    return Problem(
        kind="parse",
        code="incomplete_call",
        message=f"the response ended before this call was complete ({cut.reason})",
        recoverable=True,
        hint="send the whole call again",
    )


def _digest(transcript: Sequence[Message]) -> str:
    text = json.dumps(list(transcript), sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _repeated(batch: BatchOutcome, seen: dict[str, tuple[bytes, int]], limit: int) -> str | None:
    """R13: the same normalized call with the same result, again and again."""
    for outcome in batch.outcomes:
        invocation = getattr(outcome, "invocation", None)
        if invocation is None:
            continue
        content = outcome.message.payload.get("data", outcome.message.payload.get("error"))
        fingerprint = json.dumps(content, sort_keys=True, default=str).encode()
        previous = seen.get(invocation.digest)
        count = previous[1] + 1 if previous is not None and previous[0] == fingerprint else 0
        seen[invocation.digest] = (fingerprint, count)
        if count >= limit:
            return f"{outcome.tool} was called {count + 1} times with the same arguments and result"
    return None

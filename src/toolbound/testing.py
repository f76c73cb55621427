"""Test doubles for code that uses toolbound: a scriptable tool, a scripted model.

:class:`FakeTool` is a real tool implementation (not a mock): it counts its calls,
keeps the arguments it saw, and does what its script says — return a value, raise
one of the commit-boundary signals, or take its time. :class:`ScriptedModel` plays
a list of turns to a :class:`~toolbound.loop.Loop`.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from toolbound._clock import FixedClock
from toolbound._model import Proposal
from toolbound.execution.tool import CommitUnknown, NotCommitted, ToolOutput
from toolbound.ledger.memory import MemoryLedger

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from toolbound._model import JSONObject, JSONValue, ToolSpec
    from toolbound.execution.tool import ToolContext
    from toolbound.loop import Message, ModelTurn

__all__ = [
    "FakeTool",
    "FixedClock",
    "MemoryLedger",
    "ScriptedModel",
    "call",
    "turn_from_stream",
]


@dataclass
class FakeTool:
    """A sync tool that does what it is told and remembers every call.

    ``returns`` is the value (or a function of the arguments); ``raises`` an
    exception to raise instead; ``delay`` seconds to sleep first; ``commit_at``
    ``"before_delay"`` / ``"after_delay"`` calls ``ctx.mark_committed()`` there.
    """

    returns: JSONValue | ToolOutput | Callable[[JSONObject], JSONValue | ToolOutput] = None
    raises: BaseException | None = None
    delay: float = 0.0
    commit_at: str | None = None
    calls: list[JSONObject] = field(default_factory=list)
    effects: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, arguments: JSONObject, ctx: ToolContext) -> JSONValue | ToolOutput:
        """Run the script."""
        with self._lock:
            self.calls.append(arguments)
        if self.commit_at == "before_delay":
            self._commit(ctx)
        if self.delay:
            time.sleep(self.delay)
        if self.commit_at == "after_delay":
            self._commit(ctx)
        if self.raises is not None:
            raise self.raises
        if callable(self.returns):
            return self.returns(arguments)
        return self.returns

    def _commit(self, ctx: ToolContext) -> None:
        with self._lock:
            self.effects += 1
        ctx.mark_committed()

    @staticmethod
    def not_committed(message: str = "refused", **kw: object) -> NotCommitted:
        """The signal for a failure before the commit boundary."""
        return NotCommitted(message, **kw)  # type: ignore[arg-type]

    @staticmethod
    def commit_unknown(message: str = "response lost") -> CommitUnknown:
        """The signal for a lost outcome."""
        return CommitUnknown(message)


def call(name: str, arguments: JSONObject | bytes, call_id: str) -> Proposal:
    """A proposal as a model would send it (``arguments`` as bytes or a JSON object)."""
    raw = arguments if isinstance(arguments, bytes) else json.dumps(arguments).encode()
    return Proposal(name=name, arguments=raw, proposal_id=call_id)


class ScriptedModel:
    """A model that plays a script: for tests of loops, like a test double.

    Each entry is a :class:`~toolbound.loop.ModelTurn` or a function of the
    transcript returning one (to react to results). ``contexts`` keeps every
    transcript the model was given, and ``tools`` every tool list it saw.
    """

    def __init__(
        self, script: Sequence[ModelTurn | Callable[[Sequence[Message]], ModelTurn]]
    ) -> None:
        self._script = list(script)
        self.contexts: list[tuple[Message, ...]] = []
        self.tools: list[tuple[str, ...]] = []

    def __call__(self, transcript: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelTurn:
        """The next turn of the script."""
        self.contexts.append(tuple(transcript))
        self.tools.append(tuple(t.ref for t in tools))
        if not self._script:
            msg = "the scripted model ran out of turns"
            raise AssertionError(msg)
        entry = self._script.pop(0)
        return entry(transcript) if callable(entry) else entry


_ASSEMBLERS = {
    "openai-chat": "ChatCompletionsAssembler",
    "openai-responses": "ResponsesAssembler",
    "anthropic": "AnthropicAssembler",
}


def turn_from_stream(
    provider: Literal["openai-chat", "openai-responses", "anthropic"],
    data: bytes,
    *,
    framing: Literal["sse", "jsonl"] = "sse",
) -> ModelTurn:
    """A :class:`~toolbound.loop.ModelTurn` from a recorded provider stream.

    The bytes go through the real assembler, so a recording cut off mid-call yields
    a turn whose call is incomplete and will not be executed.
    """
    from toolbound import streams  # noqa: PLC0415 - only scripted streams need it
    from toolbound.loop import ModelTurn  # noqa: PLC0415 - loop imports this module's peers

    assembler = getattr(streams, _ASSEMBLERS[provider])()
    drive = streams.assemble_sse if framing == "sse" else streams.assemble_jsonl
    return ModelTurn.from_stream(drive(assembler, [data]))

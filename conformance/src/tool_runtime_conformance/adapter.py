"""The adapter protocol: how the kit drives a tool runtime.

An adapter is made fresh for every case (``factory()``), set up with the case's tools,
subject and grants, then driven step by step. Every step returns an
:class:`Observation`: what the runtime did with the call and the exact text the model
would receive. An adapter raises :class:`NotApplicable` (with the reason) when the
runtime has no way to express a case, for instance no concept of a person's approval.

Three capabilities are optional, each its own protocol: :class:`TurnAdapter` sends
several calls in one model turn (R16, and interleaved deltas: R15), :class:`LoopAdapter`
lets the runtime's own loop play scripted turns under its own limits (R13), and
:class:`TracingAdapter` reads the runtime's trace (R14). A case that needs one an
adapter lacks is not applicable for it, and the report says which capability is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias

if TYPE_CHECKING:
    import threading
    from collections.abc import Mapping, Sequence

    from tool_runtime_conformance.cases import GrantDef, Propose, SubjectDef, ToolDef
    from tool_runtime_conformance.world import KitTool

__all__ = [
    "CUT_OFF",
    "Adapter",
    "AdapterFactory",
    "CommitReport",
    "LoopAdapter",
    "LoopEnd",
    "LoopObservation",
    "NotApplicable",
    "Observation",
    "ObservedKind",
    "Setup",
    "TracingAdapter",
    "TurnAdapter",
]

CommitReport: TypeAlias = Literal["committed", "not_committed", "unknown"]
"""What the runtime tells the model about the effect: it happened, it did not, or unknown."""

ObservedKind: TypeAlias = Literal["ran", "refused", "asked", "unknown", "failed", "cancelled"]
"""``ran``: success was reported; ``refused``: a gate said no; ``asked``: waiting for a
person; ``unknown``: the outcome was reported unknown; ``failed``: the call failed;
``cancelled``: the call was reported cancelled."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """What the runtime did with one call, and the text the model receives for it."""

    kind: ObservedKind
    text: str
    commit: CommitReport | None = None
    """What the runtime told about the effect, if it said anything (R9)."""
    detail: str = ""
    """Anything else worth showing in a report (a state, an error code)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    """What an adapter registers for one case.

    ``tools`` pairs each tool's definition with its implementation: call it with
    the parsed arguments (and ``on_effect`` if the runtime tracks a commit boundary).
    """

    tools: tuple[tuple[ToolDef, KitTool], ...]
    subject: SubjectDef
    grants: tuple[GrantDef, ...]
    extras: Mapping[str, object] = field(default_factory=dict)


CUT_OFF = (
    "this adapter drives the framework's non-streaming path, where a call cut off "
    "mid-stream cannot be expressed"
)
"""The reason an adapter without a streaming path gives for a cut-off call (R15)."""


class NotApplicable(Exception):  # noqa: N818 - a verdict, not an error
    """The runtime cannot express this case; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class Adapter(Protocol):
    """One runtime under test, for one case."""

    name: str
    """The row name in a report, e.g. ``"pydantic-ai (approval on)"``."""
    versions: Mapping[str, str]
    """The packages the row exercises and their versions."""

    def start(self, setup: Setup) -> None:
        """Register the tools, the subject and the grants."""
        ...

    def propose(self, proposal: Propose, cancel: threading.Event) -> Observation:
        """The model proposes a call; ``cancel`` is set if the request is cancelled."""
        ...

    def approve(self, call_id: str, shown: str) -> Observation:
        """A person approves ``call_id``, having been shown the call ``shown``."""
        ...

    def deny(self, call_id: str) -> Observation:
        """A person refuses ``call_id``."""
        ...

    def close(self) -> None:
        """Release what :meth:`start` acquired."""
        ...


class AdapterFactory(Protocol):
    """What ``--adapter module:factory`` names: called once per case."""

    def __call__(self) -> Adapter:
        """A fresh adapter."""
        ...


LoopEnd: TypeAlias = Literal["finished", "stopped", "failed"]
"""``finished``: the model ended the loop with text; ``stopped``: the runtime ended it
(a budget, no progress); ``failed``: the loop died with an error."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopObservation:
    """How a runtime's loop ended, and what it did with each call it answered."""

    end: LoopEnd
    calls: Mapping[str, Observation] = field(default_factory=dict)
    """The calls the loop answered, by call id; calls it never reached are absent."""
    detail: str = ""
    """Why it ended, in the runtime's words (a budget's name, an exception)."""


class TurnAdapter(Adapter, Protocol):
    """An adapter that can send one model turn of several calls (R16)."""

    def propose_turn(
        self, calls: Sequence[Propose], cancel: threading.Event, *, interleaved: bool
    ) -> Mapping[str, Observation]:
        """The model proposes ``calls`` in one turn; what came back for each, by call id.

        With ``interleaved``, the calls arrive as one stream whose argument deltas
        alternate between them (R15).
        """
        ...


class LoopAdapter(Adapter, Protocol):
    """An adapter that can run its runtime's own loop over scripted model turns (R13)."""

    def run_loop(
        self, turns: Sequence[Sequence[Propose]], budgets: Mapping[str, int]
    ) -> LoopObservation:
        """Play ``turns`` as the model's, then a text answer, under ``budgets``.

        ``budgets`` may hold ``model_calls`` and ``tool_calls``; the adapter sets them
        in the runtime's own terms, or raises :class:`NotApplicable` when it has none.
        """
        ...


class TracingAdapter(Adapter, Protocol):
    """An adapter that can read what its runtime recorded (R14)."""

    def trace(self) -> Sequence[Mapping[str, object]]:
        """Every event recorded so far, oldest first, each as a JSON object.

        Bytes the runtime kept are given as text (UTF-8, as the runtime renders them).
        """
        ...

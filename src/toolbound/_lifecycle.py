"""One call's way through the state machine (R2), bound to its trace.

The table of legal edges is :data:`toolbound._state.TRANSITIONS`; a
:class:`Lifecycle` is the one place a call's state changes, and each change is one
``transition`` event in the call's trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolbound._errors import IllegalTransition
from toolbound._state import TERMINAL, TRANSITIONS, State

if TYPE_CHECKING:
    from toolbound.trace import Trace

__all__ = ["Lifecycle"]


class Lifecycle:
    """The state of one call and its path so far, bound to its trace."""

    __slots__ = ("path", "state", "trace")

    def __init__(self, trace: Trace, start: State = State.PROPOSED) -> None:
        self.trace = trace
        self.state = start
        self.path: list[State] = [start]

    def advance(self, to: State, /, **data: object) -> None:
        """Move to ``to`` and record it; raise :class:`IllegalTransition` otherwise."""
        previous = self.state
        if to not in TRANSITIONS[previous]:
            msg = f"illegal transition {previous.name} → {to.name}"
            raise IllegalTransition(msg)
        self.trace.add("transition", to, {"previous": previous, **data})
        self.state = to
        self.path.append(to)

    @property
    def terminal(self) -> bool:
        """Whether no further transition is possible."""
        return self.state in TERMINAL

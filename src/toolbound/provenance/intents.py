"""Intent from the user's words: which writes a task asks for, with no model (R6).

Provenance cannot see an injection that only decides *whether* a write happens:
every value is trusted (a hotel from the provider's own catalogue), the call itself is
the attack. A task scope stops it, but the scope a deployer can set without knowing
the task is every tool, which is no scope. So each write tool may declare
:attr:`~toolbound.ToolSpec.intents` — verbs or phrases a person uses when they want
it (``"book"``, ``"reserve"`` for a booking tool; ``"pay"``, ``"paid"``,
``"transfer"``, ``"send money"`` for a payment) — and, where the application gives
no explicit scope, a write is in the task's scope only when the user's own messages
express one of its intents.

Words are compared by a light stem (:func:`stem`: ``booking``, ``booked`` and
``books`` are ``book``; ``reserves`` and ``reserved`` are ``reserv``), a phrase as
consecutive words. Irregular forms are intents of their own (``"paid"``, ``"sent"``).

The failure mode: the words open a tool for the whole task. A user who says "book"
once — "book the hotel, then summarize the reviews" — leaves bookings open to
whatever the reviews ask for, a negation ("don't book anything") opens it all the
same, and text the user pasted into a message counts as their words. Intents close
the writes the user never mentioned, not the ones they did; values are still judged
by the flow rules, and an application that knows its task better (a planner, the
Loop's phases) declares the scope itself, which then wins.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["expresses", "stem", "stems"]

_WORD = re.compile(r"[^\W_]+")
_SHORT = 3  # words this short are kept as written: "is", "bus", "pay"


def stem(word: str) -> str:
    """A light stem of a lower-case word: inflections off, a doubled last letter undone."""
    if len(word) <= _SHORT:
        return word
    for suffix, keep in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and not (suffix == "s" and word.endswith("ss")):
            base = word[: -len(suffix)] + keep
            if len(base) >= _SHORT:
                word = base
                if suffix in {"ing", "ed"} and len(word) > _SHORT and word[-1] == word[-2]:
                    word = word[:-1]  # shipped → ship, cancelled → cancel
                break
    return word[:-1] if word.endswith("e") and len(word) > _SHORT + 1 else word


def stems(text: str) -> tuple[str, ...]:
    """The stems of the words of ``text``, in order."""
    return tuple(stem(w) for w in _WORD.findall(text.casefold()))


def expresses(said: Iterable[tuple[str, ...]], intents: Iterable[str]) -> bool:
    """Whether any message's stems hold one of ``intents`` (a phrase: consecutive stems)."""
    wanted = [phrase for phrase in (stems(i) for i in intents) if phrase]
    for words in said:
        for phrase in wanted:
            n = len(phrase)
            if any(words[i : i + n] == phrase for i in range(len(words) - n + 1)):
                return True
    return False

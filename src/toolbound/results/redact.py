"""Keeping secrets and personal data out of what goes back (R6, R11).

Secrets injected into a call are redacted from everything derived from its result:
the model projection, the human projection and the trace. Personal-data patterns are
redacted from the model projection; the human projection keeps them, since the
person reviewing the call is entitled to the evidence. Every redaction is recorded
as a :class:`Cut`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from toolbound._projection import Cut

if TYPE_CHECKING:
    from collections.abc import Mapping

    from toolbound._model import JSONValue

__all__ = ["EMAIL", "PAYMENT_CARD", "Cut", "Redactor"]

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
PAYMENT_CARD = re.compile(r"\b(?:\d[ -]?){12,18}\d\b")

_SHORTEST_SECRET = 4  # shorter values would redact ordinary words


@dataclass(frozen=True, slots=True)
class Redactor:
    """Replaces secret values and personal-data patterns inside JSON strings."""

    patterns: Mapping[str, re.Pattern[str]] = field(default_factory=dict)

    def redact(
        self,
        value: JSONValue,
        *,
        secrets: Mapping[str, str],
        personal: bool,
    ) -> tuple[JSONValue, tuple[Cut, ...]]:
        """``value`` with secrets (and, if ``personal``, patterns) replaced."""
        rules: list[tuple[str, re.Pattern[str]]] = [
            (f"secret:{name}", re.compile(re.escape(s)))
            for name, s in secrets.items()
            if len(s) >= _SHORTEST_SECRET
        ]
        if personal:
            rules.extend(self.patterns.items())
        if not rules:
            return value, ()
        cuts: list[Cut] = []
        return _walk(value, "", rules, cuts), tuple(cuts)


def _walk(
    value: JSONValue, pointer: str, rules: list[tuple[str, re.Pattern[str]]], cuts: list[Cut]
) -> JSONValue:
    if isinstance(value, str):
        for label, pattern in rules:
            value, n = pattern.subn(f"[redacted:{label.partition(':')[0]}]", value)
            if n:
                cuts.append(Cut(pointer=pointer, reason="redacted", detail=f"{n} x {label}"))
        return value
    if isinstance(value, list):
        return [_walk(v, f"{pointer}/{i}", rules, cuts) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _walk(v, f"{pointer}/{_escape(k)}", rules, cuts) for k, v in value.items()}
    return value


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")

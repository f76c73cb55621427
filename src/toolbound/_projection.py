"""The two projections of one call's observation: the model's and a person's (R11, R12).

A :class:`ModelProjection` is exactly what goes back to the model; a
:class:`HumanProjection` is the structured, secret-free evidence a person reviews.
Each records what was cut from it as a :class:`Cut`. :mod:`toolbound.results.encode`
builds both and exports them; :mod:`toolbound.results.redact` exports :class:`Cut`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from toolbound._frozen import quick_init

if TYPE_CHECKING:
    from toolbound._errors import Problem
    from toolbound._findings import Finding
    from toolbound._model import Attempt, CommitStatus, JSONObject, JSONValue

__all__ = ["Cut", "HumanProjection", "ModelProjection"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Cut:
    """Something removed from a projection: where, why, and how much."""

    pointer: str
    reason: Literal["redacted", "truncated"]
    detail: str

    def as_json(self) -> dict[str, object]:
        """The cut as a JSON object."""
        return {"pointer": self.pointer, "reason": self.reason, "detail": self.detail}


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelProjection:
    """What goes back to the model for one call, byte for byte (``content``)."""

    invocation_id: str
    proposal_id: str
    payload: JSONObject = field(hash=False)
    content: bytes
    is_error: bool
    truncated: bool = False
    cuts: tuple[Cut, ...] = ()

    @property
    def text(self) -> str:
        """``content`` as text, for provider tool-message fields."""
        return self.content.decode()


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HumanProjection:
    """The evidence a person reviews: the whole (secret-free) observation, structured."""

    invocation_id: str
    tool: str
    state: str
    commit_status: CommitStatus | None
    arguments: JSONObject | None = field(default=None, hash=False)
    digest: str | None = None
    value: JSONValue = field(default=None, hash=False)
    problem: Problem | None = None
    external_resource_id: str | None = None
    attempts: tuple[Attempt, ...] = ()
    cuts: tuple[Cut, ...] = ()
    evidence: tuple[Finding, ...] = ()
    """What the policy matched when it asked for confirmation or refused: e.g. where
    an argument value came from (:mod:`toolbound.provenance`)."""

    def as_json(self) -> dict[str, object]:
        """The projection as a JSON object."""
        return {
            "invocation_id": self.invocation_id,
            "tool": self.tool,
            "state": self.state,
            "commit_status": self.commit_status,
            "arguments": self.arguments,
            "digest": self.digest,
            "value": self.value,
            "problem": None if self.problem is None else self.problem.as_json(),
            "external_resource_id": self.external_resource_id,
            "attempts": [a.as_json() for a in self.attempts],
            "cuts": [c.as_json() for c in self.cuts],
            "evidence": [f.as_json() for f in self.evidence],
        }

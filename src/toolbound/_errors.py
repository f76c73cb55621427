"""Errors and problems.

Two families never mix:

* **Exceptions** are raised for developer misuse, at the moment the mistake is made
  (registration, configuration), and for failures at a boundary the caller must
  handle (storage, malformed provider data, a confirmation that fits nothing)::

      ToolboundError                  code, recoverable
      ├── ConfigurationError          bad ToolSpec, schema, policy or runtime setup
      │   ├── SpecError               a ToolSpec that cannot be registered
      │   │   └── SchemaError         a schema that is not valid JSON Schema in its dialect
      │   └── IllegalTransition       a state change the table in ``_state`` forbids
      ├── ConfirmationMismatch        a confirmation that does not fit any parked call
      ├── LedgerError                 the ledger could not record (toolbound.ledger.store)
      ├── TokenRefused                a bearer credential that names no caller (toolbound.identity)
      ├── StreamError                 a provider stream broke its format (toolbound.streams)
      └── ResponseError               a provider response is malformed (toolbound.adapters)

* **Runtime rejections** are about a proposal, not the program. They never escape
  the public API as exceptions: each becomes a :class:`Problem` inside a typed
  outcome. Inside the gates they travel as :class:`Rejection` (raised by a gate,
  caught by the pipeline)::

      Rejection                       carries one Problem
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ConfigurationError",
    "ConfirmationMismatch",
    "IllegalTransition",
    "Problem",
    "ProblemKind",
    "Rejection",
    "SchemaError",
    "SpecError",
    "ToolboundError",
]

ProblemKind = Literal[
    "parse",  # R3: the argument bytes are not one strict JSON object
    "unknown_tool",  # R2: name/version not in this request's visible tool set
    "validation",  # R4: schema says no
    "normalization",  # R5: a normalizer could not produce a definite value
    "semantic",  # R6: a value combination the tool's rules forbid
    "authorization",  # R6: the runtime subject may not do this
    "confirmation",  # R7: a person said no, or the confirmation does not match
    "target",  # R6: the resource is missing or its version moved
    "execution",  # R9: the tool failed
    "timeout",  # R9: the deadline passed
    "cancelled",  # R9: cancelled before the commit boundary
    "idempotency",  # R8: the key was used for other arguments, or is in flight
    "output",  # R11: the tool's result broke its output contract
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """A machine-readable account of why a call did not succeed (R11).

    ``kind`` is the broad class, ``code`` the precise reason (stable, snake_case),
    ``pointer`` a JSON Pointer into the arguments when one field is at fault, and
    ``hint`` tells the model what a corrected *new* proposal could do.
    """

    kind: ProblemKind
    code: str
    message: str
    recoverable: bool
    hint: str | None = None
    pointer: str | None = None

    def as_json(self) -> dict[str, object]:
        """The problem as a JSON object, omitting empty optional members."""
        out: dict[str, object] = {
            "kind": self.kind,
            "code": self.code,
            "message": self.message,
            "recoverable": self.recoverable,
        }
        if self.hint is not None:
            out["hint"] = self.hint
        if self.pointer is not None:
            out["pointer"] = self.pointer
        return out


class ToolboundError(Exception):
    """Root of every exception toolbound raises."""

    code: str = "toolbound_error"
    recoverable: bool = False

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class ConfigurationError(ToolboundError):
    """The embedding program used toolbound wrongly; fix the program."""

    code = "configuration_error"


class SpecError(ConfigurationError):
    """A ToolSpec cannot be registered as written."""

    code = "invalid_spec"


class SchemaError(SpecError):
    """A schema is not valid JSON Schema in its dialect (or names a dialect not known)."""

    code = "invalid_schema"


class IllegalTransition(ConfigurationError):  # noqa: N818 - it names the event, like h11's
    """A state change the transition table forbids; the state is left unchanged."""

    code = "illegal_transition"


class ConfirmationMismatch(ToolboundError):  # noqa: N818 - names the event
    """A confirmation names no parked call, another call, or other arguments (R7).

    The parked call, if any, stays parked: only a matching decision consumes it.
    """

    code = "confirmation_mismatch"


class Rejection(Exception):  # noqa: N818 - a control-flow signal, not an error of ours
    """Raised by a gate to reject a proposal; the pipeline turns it into an outcome."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(f"{problem.code}: {problem.message}")
        self.problem = problem

"""toolbound: the controlled execution layer between a language model and its tools.

A model only proposes (a name and argument bytes); toolbound parses, validates,
normalizes, digests, authorizes, asks for confirmation, executes under a deadline,
tracks the commit boundary and encodes the result back as untrusted data, recording
every step. Start with :class:`Registry`, :class:`Runtime` and :class:`CallContext`.

The top level is what a program using toolbound writes. The rest stays in its module:

* scopes, limits, decisions and custom policies: ``toolbound.gates.authorize``;
  confirmation records: ``toolbound.gates.confirm``; parsing, validation and the
  digest: ``toolbound.gates.parse``, ``.validate``, ``.normalize``
* secrets and the tool protocol: ``toolbound.execution.tool``; reconciling unknown
  outcomes: ``toolbound.execution.reconcile``; retries: ``toolbound.execution.retry``
* the ledger protocol and ``LedgerError``: ``toolbound.ledger.store``; PostgreSQL:
  ``toolbound.ledger.postgres``
* redaction and projections: ``toolbound.results``; flow rules: ``toolbound.provenance``;
  the trace and its sinks: ``toolbound.trace``; tools from typed functions:
  ``toolbound.define``; test doubles: ``toolbound.testing``
* the values the names above are made of — an outcome's ``path`` of states, a
  ledger record's ``Result``, the errors below :class:`ToolboundError` (a bad
  ``ToolSpec`` raises a :class:`ConfigurationError`) — are reached through them and
  their modules above, never imported from toolbound's private (``_``) modules

Names are imported on first use (PEP 562), so ``import toolbound`` loads no store,
event loop or HTTP client.
"""

from __future__ import annotations

import importlib

# typing.TYPE_CHECKING without importing typing: type checkers read any name
# TYPE_CHECKING as true, and `import toolbound` stays a few small modules.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from toolbound._clock import Clock, FixedClock
    from toolbound._errors import (
        ConfigurationError,
        ConfirmationMismatch,
        Problem,
        Rejection,
        ToolboundError,
    )
    from toolbound._model import Proposal, Subject, ToolSpec
    from toolbound._outcome import (
        AwaitingConfirmation,
        Cancelled,
        Failed,
        Observed,
        Outcome,
        OutcomeUnknown,
        Rejected,
    )
    from toolbound.batch import BatchOutcome, arun_batch, run_batch
    from toolbound.execution.tool import CommitUnknown, NotCommitted, ToolContext, ToolOutput
    from toolbound.gates.authorize import AllOf, Grant, GrantPolicy
    from toolbound.ledger.memory import MemoryLedger
    from toolbound.ledger.sqlite import SQLiteLedger
    from toolbound.loop import Budgets, Loop, LoopOutcome, ModelTurn
    from toolbound.pipeline.runtime import CallContext, Preview, Runtime
    from toolbound.provenance import FlowPolicy, Provenance
    from toolbound.registry import Registry, ToolSet

__all__ = [
    "AllOf",
    "AwaitingConfirmation",
    "BatchOutcome",
    "Budgets",
    "CallContext",
    "Cancelled",
    "Clock",
    "CommitUnknown",
    "ConfigurationError",
    "ConfirmationMismatch",
    "Failed",
    "FixedClock",
    "FlowPolicy",
    "Grant",
    "GrantPolicy",
    "Loop",
    "LoopOutcome",
    "MemoryLedger",
    "ModelTurn",
    "NotCommitted",
    "Observed",
    "Outcome",
    "OutcomeUnknown",
    "Preview",
    "Problem",
    "Proposal",
    "Provenance",
    "Registry",
    "Rejected",
    "Rejection",
    "Runtime",
    "SQLiteLedger",
    "Subject",
    "ToolContext",
    "ToolOutput",
    "ToolSet",
    "ToolSpec",
    "ToolboundError",
    "arun_batch",
    "run_batch",
]

# Where each public name is defined; the TYPE_CHECKING imports above say the same
# for type checkers, and tests/test_public_api.py checks that the two agree.
_MODULES: dict[str, str] = {
    # defining tools
    "ToolSpec": "toolbound._model",
    "Registry": "toolbound.registry",
    "ToolSet": "toolbound.registry",
    "ToolContext": "toolbound.execution.tool",
    "ToolOutput": "toolbound.execution.tool",
    "NotCommitted": "toolbound.execution.tool",
    "CommitUnknown": "toolbound.execution.tool",
    # running calls
    "Runtime": "toolbound.pipeline.runtime",
    "CallContext": "toolbound.pipeline.runtime",
    "Preview": "toolbound.pipeline.runtime",
    "Proposal": "toolbound._model",
    "Subject": "toolbound._model",
    # how calls end
    "Outcome": "toolbound._outcome",
    "Observed": "toolbound._outcome",
    "Rejected": "toolbound._outcome",
    "AwaitingConfirmation": "toolbound._outcome",
    "Failed": "toolbound._outcome",
    "OutcomeUnknown": "toolbound._outcome",
    "Cancelled": "toolbound._outcome",
    "Problem": "toolbound._errors",
    # errors
    "ToolboundError": "toolbound._errors",
    "ConfigurationError": "toolbound._errors",
    "ConfirmationMismatch": "toolbound._errors",
    "Rejection": "toolbound._errors",
    # policy
    "Grant": "toolbound.gates.authorize",
    "GrantPolicy": "toolbound.gates.authorize",
    "AllOf": "toolbound.gates.authorize",
    "FlowPolicy": "toolbound.provenance",
    "Provenance": "toolbound.provenance",
    # ledgers
    "MemoryLedger": "toolbound.ledger.memory",
    "SQLiteLedger": "toolbound.ledger.sqlite",
    # the loop and batches
    "Loop": "toolbound.loop",
    "Budgets": "toolbound.loop",
    "LoopOutcome": "toolbound.loop",
    "ModelTurn": "toolbound.loop",
    "BatchOutcome": "toolbound.batch",
    "run_batch": "toolbound.batch",
    "arun_batch": "toolbound.batch",
    # clocks
    "Clock": "toolbound._clock",
    "FixedClock": "toolbound._clock",
}


def _load(name: str) -> object:
    """Import a public name from its module the first time it is asked for (PEP 562)."""
    module = _MODULES.get(name)
    if module is None:
        msg = f"module 'toolbound' has no attribute {name!r}"
        raise AttributeError(msg)
    value: object = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups find it without coming here
    return value


def __dir__() -> list[str]:
    """The public names, whether or not they have been imported yet."""
    return sorted(__all__)


# Hidden from type checkers: they read the TYPE_CHECKING imports instead, so a
# misspelt or removed name stays an error rather than becoming ``object``.
if not TYPE_CHECKING:
    __getattr__ = _load

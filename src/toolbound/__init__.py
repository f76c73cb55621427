"""toolbound: the controlled execution layer between a language model and its tools.

A model only proposes (a name and argument bytes); toolbound parses, validates,
normalizes, digests, authorizes, asks for confirmation, executes under a deadline,
tracks the commit boundary and encodes the result back as untrusted data, recording
every step. Start with :class:`Registry`, :class:`Runtime` and :class:`CallContext`.
"""

from toolbound._clock import Clock, FixedClock, SystemClock
from toolbound._errors import (
    ConfigurationError,
    ConfirmationMismatch,
    IllegalTransition,
    Problem,
    Rejection,
    SchemaError,
    SpecError,
    ToolboundError,
)
from toolbound._model import (
    Attempt,
    Invocation,
    NormalizationContext,
    Proposal,
    ReadBack,
    Resource,
    Result,
    Subject,
    ToolSpec,
)
from toolbound._outcome import (
    AwaitingConfirmation,
    Cancelled,
    Failed,
    Observed,
    Outcome,
    OutcomeUnknown,
    Rejected,
)
from toolbound._state import State
from toolbound.batch import BatchOutcome, arun_batch, run_batch
from toolbound.execution.reconcile import (
    Reconciled,
    Reconciler,
    RemoteCommitted,
    RemoteNotCommitted,
    RemoteUnknown,
    UnknownCall,
)
from toolbound.execution.tool import (
    CommitUnknown,
    EnvSecrets,
    NotCommitted,
    SecretProvider,
    StaticSecrets,
    ToolContext,
    ToolOutput,
)
from toolbound.gates.authorize import (
    AllOf,
    Allow,
    AuthzRequest,
    Confirm,
    Deny,
    DomainScope,
    Grant,
    GrantPolicy,
    IdScope,
    NumberLimit,
    OwnerScope,
    PathScope,
    Policy,
    RateLimit,
    TimeRangeLimit,
)
from toolbound.gates.confirm import Confirmation, ConfirmationRequest
from toolbound.gates.normalize import canonical_json, date_fields, digest, normalize_date
from toolbound.gates.parse import ParseLimits, parse_arguments
from toolbound.gates.validate import CompiledSchema, ValidatorInfo
from toolbound.ledger.memory import MemoryLedger
from toolbound.ledger.sqlite import SQLiteLedger
from toolbound.ledger.store import Ledger, LedgerError
from toolbound.loop import Budgets, Loop, LoopOutcome, ModelTurn
from toolbound.pipeline.runtime import CallContext, Preview, Runtime
from toolbound.provenance import FlowPolicy, NoPrivateData, Provenance, TrustedSource
from toolbound.registry import RegisteredTool, Registry, ToolSet
from toolbound.results.encode import HumanProjection, ModelProjection
from toolbound.results.redact import EMAIL, PAYMENT_CARD, Redactor
from toolbound.trace import Trace, TraceEvent, TraceSink

__all__ = [
    "EMAIL",
    "PAYMENT_CARD",
    "AllOf",
    "Allow",
    "Attempt",
    "AuthzRequest",
    "AwaitingConfirmation",
    "BatchOutcome",
    "Budgets",
    "CallContext",
    "Cancelled",
    "Clock",
    "CommitUnknown",
    "CompiledSchema",
    "ConfigurationError",
    "Confirm",
    "Confirmation",
    "ConfirmationMismatch",
    "ConfirmationRequest",
    "Deny",
    "DomainScope",
    "EnvSecrets",
    "Failed",
    "FixedClock",
    "FlowPolicy",
    "Grant",
    "GrantPolicy",
    "HumanProjection",
    "IdScope",
    "IllegalTransition",
    "Invocation",
    "Ledger",
    "LedgerError",
    "Loop",
    "LoopOutcome",
    "MemoryLedger",
    "ModelProjection",
    "ModelTurn",
    "NoPrivateData",
    "NormalizationContext",
    "NotCommitted",
    "NumberLimit",
    "Observed",
    "Outcome",
    "OutcomeUnknown",
    "OwnerScope",
    "ParseLimits",
    "PathScope",
    "Policy",
    "Preview",
    "Problem",
    "Proposal",
    "Provenance",
    "RateLimit",
    "ReadBack",
    "Reconciled",
    "Reconciler",
    "Redactor",
    "RegisteredTool",
    "Registry",
    "Rejected",
    "Rejection",
    "RemoteCommitted",
    "RemoteNotCommitted",
    "RemoteUnknown",
    "Resource",
    "Result",
    "Runtime",
    "SQLiteLedger",
    "SchemaError",
    "SecretProvider",
    "SpecError",
    "State",
    "StaticSecrets",
    "Subject",
    "SystemClock",
    "TimeRangeLimit",
    "ToolContext",
    "ToolOutput",
    "ToolSet",
    "ToolSpec",
    "ToolboundError",
    "Trace",
    "TraceEvent",
    "TraceSink",
    "TrustedSource",
    "UnknownCall",
    "ValidatorInfo",
    "arun_batch",
    "canonical_json",
    "date_fields",
    "digest",
    "normalize_date",
    "parse_arguments",
    "run_batch",
]

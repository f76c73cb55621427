"""The four objects of R1 — ToolSpec, Proposal, Invocation, Result — and their parts.

They are never folded into one another: the model writes only a :class:`Proposal`;
the runtime derives an :class:`Invocation` from it (subject, capabilities, deadline
and key come from the runtime, never from the arguments); the executor yields a
:class:`Result`. A :class:`ToolSpec` is the versioned contract the model was shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeAlias

from toolbound._frozen import quick_init

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from datetime import datetime

    from toolbound._errors import Problem
    from toolbound._labels import DataClassName, RoleName

__all__ = [
    "Action",
    "Attempt",
    "CommitStatus",
    "EffectClass",
    "IdempotencySupport",
    "Invocation",
    "JSONObject",
    "JSONValue",
    "NormalizationContext",
    "Normalizer",
    "Proposal",
    "QueryAnswer",
    "QueryHook",
    "ReadBack",
    "ReadBackHook",
    "RemoteCommitted",
    "RemoteNotCommitted",
    "RemoteUnknown",
    "Resource",
    "ResourceExtractor",
    "Result",
    "SemanticCheck",
    "Subject",
    "TargetCheck",
    "ToolSpec",
    "UnknownCall",
]

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
JSONObject: TypeAlias = "dict[str, JSONValue]"

EffectClass = Literal["pure", "read", "reversible_write", "irreversible_write", "open_world"]
"""What a call may change. ``pure`` and ``read`` change no business state (R16 lets
them run concurrently); the write classes and ``open_world`` are treated as writes."""

WRITE_EFFECTS: frozenset[EffectClass] = frozenset(
    {"reversible_write", "irreversible_write", "open_world"}
)

IdempotencySupport = Literal["native_key", "query_by_key", "none"]
TaskSupport = Literal["forbidden", "optional", "required"]
"""Whether a call may outlive its request as a task (MCP's tasks extension)."""
"""How the tool's backend honours an idempotency key (R8): it de-duplicates by key
itself, it can be asked what happened to a key, or neither."""

CommitStatus = Literal["not_committed", "committed", "unknown"]

Action = Literal["read", "create", "modify", "delete"]
"""R6 keeps these four apart: a grant to read never lets a call create."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Subject:
    """Who a call runs for. Always supplied by the runtime, never by the model (R6)."""

    id: str
    tenant: str
    session: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource:
    """One thing a call touches, as the tool's resource extractor names it.

    ``owner`` is filled in by the tool's own lookup where rows have owners; a
    missing row has ``exists=False`` so that policies can deny without guessing.
    """

    kind: str
    id: str
    action: Action
    owner: str | None = None
    exists: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class NormalizationContext:
    """The fixed frame normalizers work in (R5).

    A reference instant, the user's IANA timezone and locale: the same context and
    arguments always normalize to the same value.
    """

    reference_time: datetime
    timezone: str
    locale: str = "en"


Normalizer: TypeAlias = "Callable[[JSONObject, NormalizationContext], JSONObject]"
"""A pure function from validated arguments to normalized arguments. It raises
:class:`toolbound.Rejection` when a value has no definite meaning."""

SemanticCheck: TypeAlias = "Callable[[JSONObject, NormalizationContext], Problem | None]"
"""A pure rule over normalized arguments that schema cannot express (end before
start, a timeout outside 1 to 60). Returns the problem, or ``None`` when the call is fine."""

ResourceExtractor: TypeAlias = "Callable[[JSONObject], Sequence[Resource]]"
"""Names the resources a call touches, from its normalized arguments."""

TargetCheck: TypeAlias = "Callable[[Invocation], Problem | None]"
"""Checked just before execution: the target exists and any ``expected_version``
precondition still holds (a stale one is ``version_conflict``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownCall:
    """What a ``query`` hook is told about a call whose outcome is unknown."""

    invocation_id: str
    tool: str
    idempotency_key: str
    arguments: JSONObject = field(hash=False)
    subject: Mapping[str, str | None] = field(hash=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteCommitted:
    """The remote side has the effect: here is what it says."""

    kind: Literal["committed"] = "committed"
    value: JSONValue = field(default=None, hash=False)
    external_resource_id: str | None = None
    evidence: Mapping[str, object] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteNotCommitted:
    """The remote side has no trace of the call: it did not happen."""

    kind: Literal["not_committed"] = "not_committed"
    evidence: Mapping[str, object] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteUnknown:
    """The remote side cannot say (yet)."""

    kind: Literal["unknown"] = "unknown"
    evidence: Mapping[str, object] = field(default_factory=dict, hash=False)


QueryAnswer = RemoteCommitted | RemoteNotCommitted | RemoteUnknown
"""What a ``query`` hook answers: committed, not committed, or cannot say."""

QueryHook: TypeAlias = "Callable[[UnknownCall], QueryAnswer]"
"""Asks the remote side what happened to an idempotency key (R8, R9): used to
resolve an unknown outcome, never to guess one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadBack:
    """What re-observing a write's target showed (R9).

    ``matches`` says whether the observed state agrees with what the call asked
    for; a committed write whose target disagrees is a conflict, not a success.
    """

    matches: bool
    observed: JSONValue = field(default=None, hash=False)
    detail: str = ""


ReadBackHook: TypeAlias = "Callable[[Invocation, JSONValue], ReadBack]"
"""Re-observes the target after COMMITTED, given the invocation and its result."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A versioned tool contract: what the model sees and what the runtime enforces.

    ``name`` and ``version`` together identify a spec. Schemas are JSON Schema
    2020-12; they are checked against the meta-schema and compiled once, when the
    spec is registered.
    """

    name: str
    version: str
    description: str
    input_schema: Mapping[str, object]
    output_schema: Mapping[str, object] | None = None
    effect: EffectClass
    capabilities: tuple[str, ...] = ()
    resources: ResourceExtractor | None = None
    purpose: str = ""
    non_goals: tuple[str, ...] = ()
    normalizers: tuple[Normalizer, ...] = ()
    semantic_check: SemanticCheck | None = None
    target_check: TargetCheck | None = None
    timeout: float = 10.0
    max_attempts: int = 1
    idempotency: IdempotencySupport = "none"
    secrets: tuple[str, ...] = ()
    marks_commit: bool = False
    """The implementation calls ``ctx.mark_committed()`` exactly at its commit
    boundary, so an interruption before that mark proves nothing committed (R9).
    Without it, an interrupted write is OUTCOME_UNKNOWN."""
    result_budget: int = 16_384
    """Bytes of the model projection of a result before it is truncated (R11)."""
    empty_result: str | None = None
    """What an empty result means, told to the model (R11)."""
    query: QueryHook | None = None
    """Asks the remote side about a key: reconciliation and ``query_by_key`` retries."""
    read_back: ReadBackHook | None = None
    """Re-observes the target after a commit (R9)."""
    transactional: bool = False
    """The tool's effect lives in the ledger's database: it runs inside the
    ledger's transaction (``ctx.transaction``), so effect and record commit
    together or not at all (R8)."""
    reads_untrusted: bool = True
    """The results can hold text a third party wrote: web pages, emails, shared
    files, messages, payment references. Provenance tracking labels their values
    untrusted, so flow rules can keep them from steering a write (R6, R11).
    Assumed when not declared: a wrong "no" lets injected text through, a wrong
    "yes" costs at most a confirmation."""
    reads_private: bool = True
    """The results hold the user's private data (mail, files, accounts, calendar):
    flow rules can keep it out of parameters that send data out. Assumed when not
    declared, for the same reason."""
    roles: Mapping[str, RoleName] = field(default_factory=dict, hash=False)
    """What each parameter does, by JSON Pointer (``{"/to": "destination"}``):
    ``destination``, ``target``, ``secret``, ``content`` or ``quantity``. A pointer
    covers everything below it. Parameters not named here have their role inferred
    from the input schema (:mod:`toolbound.provenance.roles`) by the flow rules
    that need one (:func:`toolbound.provenance.guard_writes`)."""
    data_classes: Mapping[str, DataClassName] = field(default_factory=dict, hash=False)
    """The kinds of private data fields of the results hold, by JSON Pointer into the
    output (``{"/passport_number": "identity_document"}``; array indexes left out):
    ``identity_document``, ``payment_card``, ``credential`` or ``health``. Private
    content of such a field leaves in a write only when the user's words ask for
    that kind of data (:mod:`toolbound.provenance.classes`); fields not named here
    are classed by their name and the words beside them."""

    task_support: TaskSupport = "forbidden"
    """Whether a call may outlive its request as a task (MCP's tasks extension,
    ``execution.taskSupport``): ``optional`` runs as one for a client that declares
    the extension, ``required`` is refused to a client that does not. The call passes
    every gate before it becomes a task."""

    intents: tuple[str, ...] = ()
    """Verbs or phrases a person uses when they want this write (``("book",
    "reserve")``). Where the application declares no task scope, a write that
    declares intents is in the task's scope only when the user's own messages
    express one of them (:mod:`toolbound.provenance.intents`); else a person
    confirms it (``out_of_scope``)."""

    @property
    def key(self) -> tuple[str, str]:
        """The identity of this spec: ``(name, version)``."""
        return (self.name, self.version)

    @property
    def ref(self) -> str:
        """``name@version``, as traces and errors print it."""
        return f"{self.name}@{self.version}"

    @property
    def is_write(self) -> bool:
        """Whether a call may change state outside the runtime."""
        return self.effect in WRITE_EFFECTS


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """What a model produced: a tool name and argument bytes, exactly as received.

    ``proposal_id`` is the provider's call id; results are paired with proposals by
    it, never by order (R11, R16). ``version`` is set when the surface the model
    used names versions; otherwise the visible tool set decides.
    """

    name: str
    arguments: bytes
    proposal_id: str
    model_call_id: str | None = None
    version: str | None = None
    received_at: datetime | None = None


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Invocation:
    """A call the runtime has parsed, validated, normalized and digested.

    ``arguments`` are the normalized arguments; ``canonical`` their RFC 8785
    bytes; ``digest`` binds tenant, tool and canonical arguments (R5). Everything
    about authority — subject, capabilities, deadline, idempotency key — was put
    here by the runtime.
    """

    invocation_id: str
    proposal_id: str
    model_call_id: str | None
    tool_name: str
    tool_version: str
    arguments: JSONObject = field(hash=False)
    canonical: bytes
    digest: str
    subject: Subject
    granted_capabilities: frozenset[str]
    resources: tuple[Resource, ...]
    idempotency_key: str | None
    deadline: datetime
    trace_id: str


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One try at executing an invocation, as the trace records it (R10, R14)."""

    attempt_id: str
    number: int
    started_at: datetime
    ended_at: datetime
    outcome: CommitStatus | Literal["cancelled"]
    detail: str | None = None

    def as_json(self) -> dict[str, object]:
        """The attempt as a JSON object."""
        return {
            "attempt_id": self.attempt_id,
            "number": self.number,
            "outcome": self.outcome,
            "started_at": self.started_at.isoformat(),
            "ended_at": self.ended_at.isoformat(),
            "detail": self.detail,
        }


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """What execution produced (R1): a value or a problem, and the commit status.

    ``value`` is the raw observation, before any projection.
    """

    invocation_id: str
    status: Literal["ok", "error"]
    value: JSONValue = field(default=None, hash=False)
    error: Problem | None = None
    commit_status: CommitStatus
    external_resource_id: str | None = None
    observed_at: datetime
    attempts: tuple[Attempt, ...] = ()

"""The problem catalogue: every code toolbound itself emits, each defined once.

A *code* is the stable, snake_case reason a caller can match on. It travels in a
:class:`~toolbound._errors.Problem` inside an outcome (runtime rejections, whose
``kind`` is the broad class), as the ``code`` of an exception toolbound raises
(:class:`~toolbound.ToolboundError` and its family, ``toolbound.service``'s
``ApiError`` as HTTP problem+json), or as the ``code`` of a ``NotCommitted`` signal one
of toolbound's own tools raises (which the runtime turns into a Problem of kind
``execution``). Each :class:`ProblemCode` says, for one code::

    code          the string itself
    kind          the Problem.kind it is used with (None: only ever an exception's code)
    recoverable   the default: whether a corrected *new* call, or the same request
                  later, may succeed
    meaning       one line
    requirements  the SPEC requirement ids it implements (R1…R19)
    r17           the R17 failure-table row it answers, if any (see R17_ROWS)
    raised_as     the exception classes that carry it as their ``code``
    statuses      the HTTP statuses it is answered with, for ApiError codes

:func:`make_problem` builds a Problem from a code, taking ``kind`` and ``recoverable``
from the entry (both overridable); :func:`lookup` raises ``KeyError`` for a code the
catalogue does not define. ``docs/problems.md`` is :func:`render_markdown`'s output
(``make docs`` writes it).

**Adding a code.** Add one entry to ``_ENTRIES`` below, in its group; prefer an
existing code when the meaning is the same. Build the Problem with
:func:`make_problem` (or raise the exception with the code as a literal), then
run ``make docs``. ``tests/test_problems.py`` reads every module under
``src/toolbound`` and fails, naming file:line, for a code literal at a site that
produces a problem or an error and is not catalogued, and for an entry no site uses.

**Codes that are not toolbound's.** A tool's author chooses the codes their tool
raises (``NotCommitted(code=...)``) or its semantic and target checks return; a
scope may return a code of its own; so does an upstream MCP tool. Those codes belong
to the tool and are not catalogued, and :func:`make_problem` refuses them: build such
a Problem directly. The example packs in ``toolbound.packs`` are such tools (their
``not_found``, ``version_conflict``, ``outside_workspace``… are theirs), so the scan
skips them.

Sans-IO and cheap to import: this module imports only the standard library and
:mod:`toolbound._errors`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Literal, get_args

from toolbound._errors import Problem, ProblemKind

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "CATALOGUE",
    "R17_ROWS",
    "ErrorClass",
    "FailureRow",
    "ProblemCode",
    "lookup",
    "make_problem",
    "render_markdown",
]

ErrorClass = Literal[
    "ApiError",
    "ConfigurationError",
    "ConfirmationMismatch",
    "IllegalTransition",
    "JournalError",
    "LedgerError",
    "NotCommitted",
    "ResponseError",
    "SchemaError",
    "ServiceUnreachableError",
    "SpecError",
    "StreamError",
    "TokenRefused",
    "ToolVersionMismatch",
    "ToolboundError",
]
"""The classes whose ``code`` a catalogued code can be (``NotCommitted``: a tool signal)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureRow:
    """One row of SPEC R17's failure table, quoted."""

    failure: str
    boundary: str
    response: str


R17_ROWS: Final[tuple[FailureRow, ...]] = (
    FailureRow(
        failure="unknown tool or version",
        boundary="lookup",
        response="reject; no fuzzy name matching",
    ),
    FailureRow(
        failure="parseable JSON with an extra field",
        boundary="schema",
        response="reject per additionalProperties",
    ),
    FailureRow(
        failure="`format: date` not asserted",
        boundary="validator config",
        response="explicit semantic check, recorded",
    ),
    FailureRow(
        failure="model claims admin in args",
        boundary="authorization",
        response="ignore; use the runtime subject",
    ),
    FailureRow(
        failure="args replaced after confirmation",
        boundary="confirmation binding",
        response="digest differs; confirm again",
    ),
    FailureRow(
        failure="write timeout treated as not executed",
        boundary="execution",
        response="mark outcome unknown and query",
    ),
    FailureRow(
        failure="same key, different arguments",
        boundary="idempotency store",
        response="reject key reuse",
    ),
    FailureRow(
        failure="web content in a result promoted to instruction",
        boundary="result encoding",
        response="keep the untrusted tool-data boundary",
    ),
    FailureRow(
        failure="ordinary deltas sent after cancel",
        boundary="lifecycle",
        response="nothing after a terminal state",
    ),
)
"""SPEC R17, row by row; each row is answered by at least one code below."""

(
    _UNKNOWN_TOOL,
    _EXTRA_FIELD,
    _DATE_NOT_ASSERTED,
    _CLAIMS_ADMIN,
    _ARGS_REPLACED,
    _WRITE_TIMEOUT,
    _KEY_REUSED,
    _WEB_CONTENT,
    _AFTER_CANCEL,
) = R17_ROWS


@dataclass(frozen=True, slots=True, kw_only=True)
class ProblemCode:
    """One catalogued code: what it means and where it is used."""

    code: str
    kind: ProblemKind | None
    recoverable: bool
    meaning: str
    requirements: tuple[str, ...]
    r17: FailureRow | None = None
    raised_as: tuple[ErrorClass, ...] = ()
    statuses: tuple[int, ...] = ()


def _c(
    code: str,
    kind: ProblemKind | None,
    requirements: str,
    meaning: str,
    *,
    recoverable: bool = False,
    r17: FailureRow | None = None,
    raised_as: tuple[ErrorClass, ...] = (),
    statuses: tuple[int, ...] = (),
) -> ProblemCode:
    return ProblemCode(
        code=code,
        kind=kind,
        recoverable=recoverable,
        meaning=meaning,
        requirements=tuple(requirements.split()),
        r17=r17,
        raised_as=raised_as,
        statuses=statuses,
    )


def _schema(code: str, keyword: str, *, r17: FailureRow | None = None) -> ProblemCode:
    """A JSON Schema keyword's code (``toolbound.gates.validate``): always recoverable."""
    meaning = f"the value breaks the schema's {keyword} rule"
    return _c(code, "validation", "R4", meaning, recoverable=True, r17=r17)


_ENTRIES: Final[tuple[ProblemCode, ...]] = (
    # -- parse (R3): the argument bytes are not one strict JSON object -------------------
    _c(
        "too_large",
        "parse",
        "R3 R15",
        "the argument bytes exceed the size limit (or, streamed, the call's byte budget)",
        recoverable=True,
        raised_as=("StreamError",),
    ),
    _c("too_deep", "parse", "R3", "the arguments nest deeper than the limit", recoverable=True),
    _c("trailing_data", "parse", "R3", "something follows the one JSON object", recoverable=True),
    _c("byte_order_mark", "parse", "R3", "the bytes start with a UTF-8 BOM", recoverable=True),
    _c(
        "not_an_object",
        "parse",
        "R3 R15",
        "the arguments (or a JSON-lines stream line) are not a JSON object",
        recoverable=True,
        raised_as=("StreamError",),
    ),
    _c(
        "invalid_json",
        "parse",
        "R3 R15",
        "the arguments (or a stream's JSON) are not valid JSON",
        recoverable=True,
        raised_as=("StreamError",),
    ),
    _c("truncated", "parse", "R3", "the JSON ends before it is complete", recoverable=True),
    _c(
        "invalid_utf8",
        "parse",
        "R3 R15",
        "the bytes (of the arguments or of a stream) are not strict UTF-8",
        recoverable=True,
        raised_as=("StreamError",),
    ),
    _c("duplicate_key", "parse", "R3", "an object repeats a key", recoverable=True),
    _c("non_finite_number", "parse", "R3", "NaN or Infinity, not JSON", recoverable=True),
    _c("number_out_of_range", "parse", "R3", "an integer too large to keep", recoverable=True),
    _c(
        "number_underflow",
        "parse",
        "R3 R5",
        "a non-zero number too small for a double, which would round it to 0",
        recoverable=True,
    ),
    _c("lone_surrogate", "parse", "R3", "half a surrogate pair is escaped", recoverable=True),
    _c(
        "duplicate_call_id",
        "parse",
        "R11 R16",
        "two calls in one response share a call id",
        recoverable=True,
        raised_as=("ResponseError",),
    ),
    _c(
        "incomplete_call",
        "parse",
        "R15",
        "the stream ended before the call's arguments were complete",
        recoverable=True,
    ),
    _c("missing_call_id", "parse", "R11", "a framework's call has no call id", recoverable=True),
    _c(
        "invalid_tool_call",
        "parse",
        "R3",
        "a framework reported the call's arguments as unparseable",
        recoverable=True,
    ),
    _c("not_json", "parse", "R3", "a framework handed over arguments that are not JSON"),
    # -- unknown_tool (R2) ---------------------------------------------------------------
    _c(
        "unknown_tool",
        "unknown_tool",
        "R2",
        "the name/version is not in this request's visible tool set (or not served upstream)",
        recoverable=True,
        r17=_UNKNOWN_TOOL,
        raised_as=("ToolVersionMismatch",),
    ),
    # -- validation (R4): one code per failing JSON Schema keyword -----------------------
    _schema("additional_items", "additionalItems"),
    _schema("additional_properties", "additionalProperties", r17=_EXTRA_FIELD),
    _schema("any_of", "anyOf"),
    _schema("const", "const"),
    _schema("contains", "contains"),
    _schema("enum", "enum"),
    _schema("exclusive_maximum", "exclusiveMaximum"),
    _schema("exclusive_minimum", "exclusiveMinimum"),
    _c(
        "false_schema",
        "validation",
        "R4",
        "the schema is `false` at this place: no value is allowed",
        recoverable=True,
    ),
    _schema("format", "format"),
    _schema("max_contains", "maxContains"),
    _schema("max_items", "maxItems"),
    _schema("max_length", "maxLength"),
    _schema("max_properties", "maxProperties"),
    _schema("maximum", "maximum"),
    _schema("min_contains", "minContains"),
    _schema("min_items", "minItems"),
    _schema("min_length", "minLength"),
    _schema("min_properties", "minProperties"),
    _schema("minimum", "minimum"),
    _schema("multiple_of", "multipleOf"),
    _schema("not", "not"),
    _schema("one_of", "oneOf"),
    _schema("pattern", "pattern"),
    _schema("property_names", "propertyNames"),
    _schema("required", "required"),
    _schema("type", "type"),
    _schema("unevaluated_items", "unevaluatedItems"),
    _schema("unevaluated_properties", "unevaluatedProperties"),
    _schema("unique_items", "uniqueItems"),
    _c(
        "schema_violation",
        "validation",
        "R4",
        "the arguments break a schema rule without a code of its own",
        recoverable=True,
    ),
    # -- normalization (R5) --------------------------------------------------------------
    _c(
        "not_canonicalizable",
        "normalization",
        "R5",
        "the normalized arguments have no RFC 8785 canonical form",
        recoverable=True,
    ),
    _c(
        "invalid_date",
        "normalization",
        "R5",
        "not a calendar date (or date-time), checked explicitly",
        recoverable=True,
        r17=_DATE_NOT_ASSERTED,
    ),
    _c(
        "not_a_date_string",
        "normalization",
        "R5",
        "a date field holds something other than a string",
        recoverable=True,
        r17=_DATE_NOT_ASSERTED,
    ),
    _c(
        "unrecognized_date",
        "normalization",
        "R5",
        "a date phrase the normalizer does not understand",
        recoverable=True,
        r17=_DATE_NOT_ASSERTED,
    ),
    _c(
        "ambiguous_date",
        "normalization",
        "R5",
        "a date that reads two ways (03/04) or names no year",
        recoverable=True,
    ),
    # -- semantic (R6) -------------------------------------------------------------------
    _c("check_failed", "semantic", "R6", "the tool's semantic check raised; fails closed"),
    # -- authorization (R6) --------------------------------------------------------------
    _c(
        "capability_missing",
        "authorization",
        "R6",
        "no live grant of the runtime subject for a capability the tool needs",
        r17=_CLAIMS_ADMIN,
    ),
    _c(
        "action_not_granted",
        "authorization",
        "R6",
        "no grant allows read/create/modify/delete on that resource",
        r17=_CLAIMS_ADMIN,
    ),
    _c(
        "resource_out_of_scope",
        "authorization",
        "R6",
        "the path, domain or id lies outside the granted scope",
        r17=_CLAIMS_ADMIN,
    ),
    _c(
        "not_found_or_not_owned",
        "authorization",
        "R6",
        "the row is missing or someone else's (never says which)",
        r17=_CLAIMS_ADMIN,
    ),
    _c(
        "scope_unchecked",
        "authorization",
        "R6",
        "the only grants are scoped, and the call names no resource",
    ),
    _c(
        "limit_exceeded",
        "authorization",
        "R6",
        "an amount, quantity or time range is over a limit",
        recoverable=True,
    ),
    _c("rate_limited", "authorization", "R6", "too many calls in the window", recoverable=True),
    _c("policy_failed", "authorization", "R6", "the policy raised; authorization fails closed"),
    _c(
        "resource_lookup_failed",
        "authorization",
        "R6",
        "the tool's resource extractor raised; fails closed",
    ),
    _c(
        "untrusted_source",
        "authorization",
        "R6 R11",
        "the value came only from untrusted tool data",
        r17=_WEB_CONTENT,
    ),
    _c(
        "no_trusted_source",
        "authorization",
        "R6 R11",
        "the value has no trusted source (the user or a trusted tool)",
    ),
    _c("private_data_flow", "authorization", "R6 R11", "private data would flow out here"),
    _c(
        "provenance_not_tracked",
        "authorization",
        "R6",
        "the call carried no provenance for a flow rule to check",
    ),
    # -- confirmation (R7) ---------------------------------------------------------------
    _c(
        "confirmation_for_other_call",
        "confirmation",
        "R7",
        "the confirmation was given for another invocation",
        r17=_ARGS_REPLACED,
        raised_as=("ConfirmationMismatch",),
    ),
    _c(
        "digest_mismatch",
        "confirmation",
        "R7",
        "the confirmed arguments (digest) differ from this call's",
        r17=_ARGS_REPLACED,
        raised_as=("ConfirmationMismatch", "ApiError"),
        statuses=(409,),
    ),
    _c("denied_by_person", "confirmation", "R7", "the person asked said no"),
    _c(
        "confirmation_expired",
        "confirmation",
        "R7",
        "nobody confirmed in time, or the confirmation expired before the call ran",
        raised_as=("ConfirmationMismatch", "ApiError"),
        statuses=(409,),
    ),
    _c(
        "confirmation_pending",
        "confirmation",
        "R7 R18",
        "the call waits for a person's decision (MCP server)",
        recoverable=True,
    ),
    _c(
        "not_pending",
        None,
        "R7 R18",
        "no call with that id is waiting for a confirmation",
        raised_as=("ConfirmationMismatch", "ConfigurationError", "ApiError"),
        statuses=(404, 409),
    ),
    _c(
        "not_issued",
        None,
        "R7",
        "the confirmation was not issued by this runtime",
        raised_as=("ConfirmationMismatch",),
    ),
    _c(
        "already_decided",
        None,
        "R7 R18",
        "another decision on the parked call came first",
        raised_as=("JournalError", "ApiError"),
        statuses=(409,),
    ),
    _c(
        "holder_gone",
        None,
        "R7 R18",
        "the process holding the parked call (another surface's) is gone: nobody can decide it",
        raised_as=("JournalError", "ConfirmationMismatch", "ApiError"),
        statuses=(409,),
    ),
    _c(
        "not_decided",
        None,
        "R7",
        "nobody decided the parked call, or its decision was applied already: it cannot resume",
        raised_as=("ConfirmationMismatch",),
    ),
    _c(
        "no_journal",
        None,
        "R7",
        "decisions made elsewhere are read from a journal, and the runtime keeps none",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "not_owner",
        None,
        "R2 R19",
        "another process took the call over after its owner's lease passed; its ending stands",
        raised_as=("JournalError",),
    ),
    # -- target (R6) ---------------------------------------------------------------------
    _c(
        "target_check_failed",
        "target",
        "R6",
        "the tool's target check raised; try again later",
        recoverable=True,
    ),
    # -- idempotency (R8) ----------------------------------------------------------------
    _c(
        "key_reused",
        "idempotency",
        "R8",
        "the idempotency key was used for other arguments (another digest)",
        r17=_KEY_REUSED,
    ),
    _c(
        "in_progress",
        "idempotency",
        "R8",
        "the same call under this key is still executing",
        recoverable=True,
    ),
    _c(
        "outcome_unknown",
        "idempotency",
        "R8 R9",
        "the same call under this key has an unknown outcome awaiting reconciliation",
        recoverable=True,
        r17=_WRITE_TIMEOUT,
    ),
    _c(
        "key_expired",
        "idempotency",
        "R8",
        "the key is past its retention window and the policy rejects it",
    ),
    # -- execution (R9, R10): the runtime's own ------------------------------------------
    _c("tool_error", "execution", "R9", "the tool raised an exception nobody classified"),
    _c(
        "commit_unknown",
        "execution",
        "R9",
        "the tool cannot tell whether its effect committed: OUTCOME_UNKNOWN",
        r17=_WRITE_TIMEOUT,
    ),
    _c(
        "not_committed",
        "execution",
        "R9 R10",
        "reconciliation or the remote side confirmed the call did not happen",
        recoverable=True,
    ),
    _c(
        "secret_unavailable",
        "execution",
        "R6 R9",
        "a credential the tool needs is not configured",
        raised_as=("NotCommitted",),
    ),
    _c(
        "ledger_unavailable",
        "execution",
        "R8 R19",
        "the ledger could not record the call; nothing ran",
        recoverable=True,
    ),
    _c(
        "result_lost",
        "execution",
        "R9",
        "the effect committed but the tool gave no usable result",
    ),
    # -- execution: the signals of toolbound's own tools (NotCommitted, R10) ---------------
    _c(
        "tool_failed",
        "execution",
        "R9",
        "a NotCommitted that names no code: failed before its commit boundary",
        recoverable=True,
        raised_as=("NotCommitted",),
    ),
    _c(
        "not_reached",
        "execution",
        "R10",
        "the request provably never reached the service",
        recoverable=True,
        raised_as=("NotCommitted",),
    ),
    _c(
        "transient",
        "execution",
        "R10",
        "429 or 5xx without work done; the same call may succeed later",
        recoverable=True,
        raised_as=("NotCommitted",),
    ),
    _c(
        "auth_failed",
        "execution",
        "R6 R10",
        "the service rejected the credentials (401/403); never retried",
        raised_as=("NotCommitted",),
    ),
    _c(
        "business_rejection",
        "execution",
        "R10",
        "the service understood and refused (a 4xx); a new call may differ",
        recoverable=True,
        raised_as=("NotCommitted",),
    ),
    _c(
        "no_response",
        "execution",
        "R10",
        "a read's response never came; nothing committed",
        recoverable=True,
        raised_as=("NotCommitted",),
    ),
    _c(
        "invalid_request",
        "execution",
        "R10",
        "an HTTP tool's request could not be sent at all (its set-up is wrong)",
        raised_as=("NotCommitted",),
    ),
    _c(
        "invalid_argument",
        "execution",
        "R9",
        "an argument cannot fill an HTTP tool's URL path",
        recoverable=True,
        raised_as=("NotCommitted",),
    ),
    _c(
        "destination_refused",
        "execution",
        "R6 R9 R10",
        "an HTTP tool's destination resolves to an address its egress policy refuses "
        "(loopback, private, link-local, metadata…); nothing was connected, never retried",
        raised_as=("NotCommitted",),
    ),
    _c(
        "upstream_unavailable",
        "execution",
        "R9 R10 R18",
        "an upstream MCP server's process ended while a read was in flight; the message "
        "gives its exit status and the last lines of its stderr",
        recoverable=True,
        raised_as=("NotCommitted",),
    ),
    _c(
        "tool_quarantined",
        "execution",
        "R18",
        "an upstream changed the tool's definition before the call went out; nothing was "
        "sent, and the tool waits for a person's approval",
        recoverable=True,
        raised_as=("NotCommitted",),
    ),
    _c(
        "upstream_tool_error",
        "execution",
        "R9 R18",
        "an upstream MCP tool reported an error",
        recoverable=True,
        raised_as=("NotCommitted",),
    ),
    _c(
        "input_required",
        "execution",
        "R18",
        "an upstream asked a 2026-07-28 caller for input (SEP-2322): the caller got its "
        "inputRequests, this round committed nothing, and the retry with the answers is the call",
        recoverable=True,
        raised_as=("NotCommitted",),
    ),
    _c(
        "input_request_refused",
        "execution",
        "R18",
        "an upstream asked for input the gateway may not relay (allow_elicitation or "
        "allow_sampling not set) or the caller's client does not offer; nothing was asked",
        recoverable=False,
        raised_as=("NotCommitted",),
    ),
    _c(
        "input_state_mismatch",
        "execution",
        "R5 R18",
        "a retry's requestState was sealed for a call with other arguments (another "
        "digest); nothing was sent to the upstream",
        recoverable=True,
        raised_as=("NotCommitted",),
    ),
    # -- timeout (R9) --------------------------------------------------------------------
    _c(
        "deadline_exceeded",
        "timeout",
        "R9",
        "the deadline passed; a write that may have committed is OUTCOME_UNKNOWN "
        "(an HttpTool's own arrives as kind execution)",
        recoverable=True,
        r17=_WRITE_TIMEOUT,
        raised_as=("NotCommitted",),
    ),
    _c(
        "lease_lost",
        "timeout",
        "R9",
        "this process no longer held the call's lease with margin when the tool was to "
        "start (it may have paused); the tool was not started: nothing happened",
        recoverable=True,
    ),
    # -- cancelled (R9) ------------------------------------------------------------------
    _c(
        "cancelled",
        "cancelled",
        "R9",
        "cancelled before the commit boundary: nothing happened",
        r17=_AFTER_CANCEL,
    ),
    _c(
        "cancelled_during_write",
        "cancelled",
        "R9",
        "cancelled while a write was in flight: OUTCOME_UNKNOWN",
    ),
    _c(
        "cancelled_after_commit",
        "cancelled",
        "R9",
        "cancelled after the commit boundary: the effect stands",
    ),
    # -- output (R9, R11) ----------------------------------------------------------------
    _c(
        "output_rejected",
        "output",
        "R11",
        "the tool's result broke its output contract (e.g. an invented field)",
        r17=_WEB_CONTENT,
    ),
    _c("output_not_json", "output", "R11", "the tool returned a value that is not JSON"),
    _c(
        "readback_conflict",
        "output",
        "R9",
        "the write committed but a read-back of its target contradicts it",
    ),
    # -- exceptions: the root and developer misuse ---------------------------------------
    _c(
        "toolbound_error",
        None,
        "R18",
        "the default code of ToolboundError",
        raised_as=("ToolboundError",),
    ),
    _c(
        "configuration_error",
        None,
        "R1",
        "the program used toolbound wrongly",
        raised_as=("ConfigurationError",),
    ),
    _c("invalid_spec", None, "R1", "a ToolSpec cannot be registered", raised_as=("SpecError",)),
    _c(
        "invalid_schema",
        None,
        "R4",
        "a schema is not valid JSON Schema in its dialect",
        raised_as=("SchemaError",),
    ),
    _c(
        "illegal_transition",
        None,
        "R2",
        "a state change the transition table forbids; state unchanged",
        r17=_AFTER_CANCEL,
        raised_as=("IllegalTransition",),
    ),
    _c(
        "confirmation_mismatch",
        None,
        "R7",
        "the default code of ConfirmationMismatch",
        raised_as=("ConfirmationMismatch",),
    ),
    _c(
        "policy_overgrant",
        None,
        "R6",
        "a policy allowed capabilities the tool does not list",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "invalid_provider_name",
        None,
        "R18",
        "a tool name maps to a provider name providers refuse",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "provider_name_collision",
        None,
        "R18",
        "two tool names map to the same provider name",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "unpaired_results",
        None,
        "R11",
        "results do not pair 1:1 with the calls",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "stream_closed",
        None,
        "R15",
        "a decoder was fed after close()",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "not_a_stream_event",
        None,
        "R15",
        "an object that is not an SDK stream event or a mapping",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "not_confirmable",
        None,
        "R7 R18",
        "an OpenAI Agents approval for a call toolbound rejects",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "approval_without_confirmation",
        None,
        "R7 R18",
        "a Pydantic AI approval carries no toolbound confirmation (digest)",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "edit_not_recorded",
        None,
        "R7 R18",
        "a Pydantic AI approval names an edit this toolset's decide() did not record",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "edit_of_denial",
        None,
        "R7 R18",
        "decide() was given corrected arguments for a call it was told to deny",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "service_unreachable",
        None,
        "R18",
        "toolbound.client got no answer from the service, after every retry it allowed",
        recoverable=True,
        raised_as=("ServiceUnreachableError",),
    ),
    _c(
        "not_a_confirmation",
        None,
        "R7 R18",
        "a LangGraph resume value is not a toolbound confirmation",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "no_ai_message",
        None,
        "R18",
        "the LangGraph state holds no AIMessage",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "no_messages",
        None,
        "R18",
        "the LangGraph state holds no messages list",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "approvals_unreadable",
        None,
        "R18",
        "the MCP gateway's approvals file cannot be read",
        raised_as=("ConfigurationError",),
    ),
    _c(
        "tool_name_collision",
        None,
        "R18",
        'two MCP upstreams would serve a tool under the same name (kept names, prefix = "")',
        raised_as=("ConfigurationError",),
    ),
    _c(
        "no_stdio_principal",
        None,
        "R18",
        "serving MCP over stdio needs a stdio principal",
        raised_as=("ToolboundError",),
    ),
    _c(
        "version_mismatch",
        None,
        "R2 R18",
        "an approval names a digest that is not the upstream tool's current definition",
        r17=_UNKNOWN_TOOL,
        raised_as=("ToolVersionMismatch",),
    ),
    # -- exceptions: the ledger (R8, R19) ------------------------------------------------
    _c("ledger_error", None, "R19", "the default code of LedgerError", raised_as=("LedgerError",)),
    _c(
        "storage_unavailable",
        None,
        "R19",
        "the store is locked, unreachable or refused the statement; the service answers "
        "503 with Retry-After",
        recoverable=True,
        raised_as=("LedgerError", "JournalError", "ApiError"),
        statuses=(503,),
    ),
    _c(
        "storage_full",
        None,
        "R19",
        "the disk is full; nothing was written; the service answers 503 with Retry-After",
        recoverable=True,
        raised_as=("LedgerError", "JournalError", "ApiError"),
        statuses=(503,),
    ),
    _c(
        "corrupt_store",
        None,
        "R19",
        "not a toolbound store, or a damaged one; left untouched",
        raised_as=("LedgerError",),
    ),
    _c(
        "unsupported_schema",
        None,
        "R19",
        "a store written by a newer toolbound",
        raised_as=("LedgerError", "JournalError"),
    ),
    _c(
        "store_in_use",
        None,
        "R19",
        "a restore refused: a running process has the store open",
        raised_as=("LedgerError",),
    ),
    _c(
        "not_holder",
        None,
        "R8",
        "this invocation does not hold the idempotency key",
        raised_as=("LedgerError",),
    ),
    _c(
        "illegal_phase",
        None,
        "R8",
        "a ledger phase change the record's phase forbids",
        raised_as=("LedgerError",),
    ),
    _c(
        "fenced",
        None,
        "R9",
        "the call was taken over under a newer epoch: its old owner may not record it",
        raised_as=("LedgerError",),
    ),
    _c(
        "not_yet",
        None,
        "R2 R9",
        "the call's owner may still start its effect (its deadline has not passed); "
        "take it over or find it not committed after retry_at",
        recoverable=True,
        raised_as=("LedgerError", "ApiError"),
        statuses=(409,),
    ),
    _c(
        "not_unknown",
        None,
        "R2 R9",
        "the invocation has no unknown outcome to reconcile",
        raised_as=("LedgerError", "ApiError"),
        statuses=(409,),
    ),
    # -- exceptions: streams and provider responses (R15, R18) ----------------------------
    _c(
        "stream_error",
        None,
        "R15",
        "the default code of StreamError",
        raised_as=("StreamError",),
    ),
    _c(
        "protocol",
        None,
        "R15",
        "a stream event breaks its provider's format",
        raised_as=("StreamError",),
    ),
    _c(
        "unsupported",
        None,
        "R15",
        "a stream feature toolbound does not assemble (n > 1, legacy function_call)",
        raised_as=("StreamError",),
    ),
    _c(
        "call_id_conflict",
        None,
        "R15",
        "two streamed calls claim one id, or one call two ids",
        raised_as=("StreamError",),
    ),
    _c(
        "arguments_mismatch",
        None,
        "R15",
        "a call's deltas differ from its stated final arguments",
        raised_as=("StreamError",),
    ),
    _c(
        "stream_too_large",
        None,
        "R15",
        "a stream holds more bytes than its budget (calls, text, an unfinished line or event)",
        raised_as=("StreamError",),
    ),
    _c(
        "several_responses",
        None,
        "R15",
        "a second response follows the first in one stream; one assembler assembles one",
        raised_as=("StreamError",),
    ),
    _c(
        "malformed_response",
        None,
        "R18",
        "the default code of ResponseError",
        raised_as=("ResponseError",),
    ),
    _c(
        "malformed",
        None,
        "R18",
        "a provider response lacks or misshapes a field toolbound reads",
        raised_as=("ResponseError",),
    ),
    # -- HTTP answers (R18): the service and the MCP confirmation endpoint --------------
    _c(
        "unauthenticated",
        None,
        "R18",
        "no API key or token, or an unknown one",
        raised_as=("ApiError", "TokenRefused"),
        statuses=(401,),
    ),
    # -- bearer JWTs (toolbound.identity): why a token names no caller -------------------
    *(
        _c(code, None, "R6 R18", meaning, raised_as=("TokenRefused", "ApiError"), statuses=(401,))
        for code, meaning in (
            ("token_invalid", "the bearer token is not a well-formed JWT"),
            ("token_algorithm_refused", "the token's alg is not one its issuer's table allows"),
            ("token_key_unknown", "no key of the issuer has the token's kid"),
            ("token_signature_invalid", "the token's signature does not verify"),
            ("token_issuer_invalid", "no [[identity.jwt]] trusts the token's iss"),
            ("token_audience_invalid", "the token's aud does not name the issuer's audience"),
            ("token_expired", "the token is past its exp, beyond the clock skew"),
            ("token_not_yet_valid", "the token is before its nbf or iat, beyond the clock skew"),
            ("token_claim_missing", "a required claim, the subject or the tenant is absent"),
        )
    ),
    _c(
        "token_roles_unmapped",
        None,
        "R6 R18",
        "the issuer's role_map maps none of the token's roles: it would act as nobody",
        raised_as=("TokenRefused", "ApiError"),
        statuses=(403,),
    ),
    _c(
        "identity_unavailable",
        None,
        "R18",
        "the issuer's keys (or HMAC secret) cannot be had now; later may succeed",
        recoverable=True,
        raised_as=("TokenRefused", "ApiError"),
        statuses=(503,),
    ),
    _c(
        "forbidden",
        None,
        "R18",
        "the principal lacks the role",
        raised_as=("ApiError",),
        statuses=(403,),
    ),
    _c(
        "four_eyes",
        None,
        "R7 R18",
        "a call cannot be approved by the subject it runs for",
        raised_as=("ConfirmationMismatch", "ApiError"),
        statuses=(403,),
    ),
    _c(
        "csrf_failed",
        None,
        "R18",
        "the console form's CSRF token does not match",
        recoverable=True,
        raised_as=("ApiError",),
        statuses=(403,),
    ),
    _c(
        "bad_request_body",
        None,
        "R18",
        "the request body is not the JSON the endpoint takes",
        raised_as=("ApiError",),
        statuses=(400,),
    ),
    _c(
        "bad_query",
        None,
        "R18",
        "a query parameter is invalid",
        raised_as=("ApiError",),
        statuses=(400,),
    ),
    _c(
        "bad_cursor",
        None,
        "R18",
        "the event stream's Last-Event-ID (or after) is not a cursor it gave",
        raised_as=("ApiError", "JournalError"),
        statuses=(400,),
    ),
    _c(
        "bad_form",
        None,
        "R18",
        "a console form is invalid",
        raised_as=("ApiError",),
        statuses=(400,),
    ),
    _c(
        "evidence_missing",
        None,
        "R2 R9",
        "a reconciliation finding needs evidence",
        raised_as=("ApiError",),
        statuses=(400,),
    ),
    _c(
        "idempotency_key_missing",
        None,
        "R8 R18",
        "POST /v1/proposals needs an Idempotency-Key header",
        raised_as=("ApiError",),
        statuses=(400,),
    ),
    _c(
        "idempotency_key_invalid",
        None,
        "R8 R18",
        "the Idempotency-Key is not a string of 1 to 255 printable ASCII characters",
        raised_as=("ApiError",),
        statuses=(400,),
    ),
    _c(
        "idempotency_key_reused",
        None,
        "R8 R18",
        "the Idempotency-Key was used with another request body",
        r17=_KEY_REUSED,
        raised_as=("ApiError",),
        statuses=(422,),
    ),
    _c(
        "request_in_progress",
        None,
        "R8 R18",
        "the request under this Idempotency-Key is still being answered",
        recoverable=True,
        raised_as=("ApiError",),
        statuses=(409,),
    ),
    _c(
        "not_found",
        None,
        "R18",
        "no invocation with that id (for this principal), or no such path",
        raised_as=("ApiError", "JournalError"),
        statuses=(404, 409),
    ),
    _c(
        "method_not_allowed",
        None,
        "R18",
        "the path exists but does not take this HTTP method (see Allow)",
        raised_as=("ApiError",),
        statuses=(405,),
    ),
    _c(
        "request_too_large",
        None,
        "R18",
        "the request body is larger than [service] max_body_bytes",
        raised_as=("ApiError",),
        statuses=(413,),
    ),
    _c(
        "body_timeout",
        None,
        "R18",
        "the request body did not arrive within [service] body_timeout (a slow client)",
        raised_as=("ApiError",),
        statuses=(408,),
    ),
    _c(
        "internal_error",
        None,
        "R18",
        "the service failed unexpectedly; the answer names no internals",
        recoverable=True,
        raised_as=("ApiError",),
        statuses=(500,),
    ),
    _c(
        "unsupported_store",
        None,
        "R19",
        "no service journal for that store URL",
        raised_as=("JournalError",),
    ),
)

CATALOGUE: Final[Mapping[str, ProblemCode]] = MappingProxyType({e.code: e for e in _ENTRIES})
"""Every code toolbound itself emits, by code."""

_KINDS: Final[tuple[ProblemKind, ...]] = get_args(ProblemKind)
_CLASSES: Final[tuple[ErrorClass, ...]] = get_args(ErrorClass)
_CLASS_NOTES: Final[Mapping[ErrorClass, str]] = {
    "ConfigurationError": "The program used toolbound wrongly; fix the program.",
    "ConfirmationMismatch": "A confirmation that fits no parked call; the call stays parked.",
    "IllegalTransition": "A state change the table in `toolbound._state` forbids.",
    "JournalError": "The service's journal (`toolbound.service.journal`).",
    "LedgerError": "The idempotency ledger (`toolbound.ledger`).",
    "NotCommitted": (
        "Signals of toolbound's own tools (`HttpTool`, `toolbound.execution.retry`, the MCP"
        " gateway's upstream tools); the runtime reports each as a Problem of kind"
        " `execution`."
    ),
    "ResponseError": "A provider response toolbound cannot read (`toolbound.adapters`).",
    "SchemaError": "A schema that is not valid JSON Schema in its dialect, at registration.",
    "ServiceUnreachableError": (
        "`toolbound.client`: no answer came from the service; a submission may be sent "
        "again with the same Idempotency-Key."
    ),
    "SpecError": "A ToolSpec that cannot be registered.",
    "StreamError": "A provider stream that broke its format (`toolbound.streams`).",
    "TokenRefused": (
        "A bearer credential that names no caller (`toolbound.identity`); the service and"
        " the MCP gateway answer it as problem+json with the same code."
    ),
    "ToolVersionMismatch": "The MCP gateway: an approval for another tool definition.",
    "ToolboundError": "The root of every exception toolbound raises.",
}


def lookup(code: str) -> ProblemCode:
    """The catalogue entry for ``code``; ``KeyError`` when toolbound defines no such code."""
    try:
        return CATALOGUE[code]
    except KeyError:
        msg = f"{code!r} is not in toolbound's problem catalogue (toolbound.problems)"
        raise KeyError(msg) from None


def make_problem(
    code: str,
    message: str,
    *,
    hint: str | None = None,
    pointer: str | None = None,
    recoverable: bool | None = None,
    kind: ProblemKind | None = None,
) -> Problem:
    """A :class:`Problem` for a catalogued code; ``kind`` and ``recoverable`` from its entry.

    Raises ``KeyError`` for a code the catalogue does not define and ``ValueError``
    for one that is only ever an exception's code and names no ``kind``.
    """
    entry = lookup(code)
    kind = kind or entry.kind
    if kind is None:
        msg = f"{code!r} is an exception's code, not a Problem's: pass kind= to use it"
        raise ValueError(msg)
    return Problem(
        kind=kind,
        code=code,
        message=message,
        recoverable=entry.recoverable if recoverable is None else recoverable,
        hint=hint,
        pointer=pointer,
    )


# -- docs/problems.md ---------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _codes(entries: Iterable[ProblemCode]) -> str:
    return ", ".join(f"`{e.code}`" for e in entries) or "—"


def _table(header: str, rows: Iterable[tuple[str, ...]]) -> list[str]:
    columns = header.count("|") - 1
    return [header, "|" + "---|" * columns, *("| " + " | ".join(r) + " |" for r in rows), ""]


def _row(e: ProblemCode, *, also: str) -> tuple[str, ...]:
    return (
        f"`{e.code}`",
        "yes" if e.recoverable else "no",
        _cell(e.meaning),
        " ".join(e.requirements),
        also,
    )


def render_markdown() -> str:
    """``docs/problems.md``: a table per Problem kind and per exception, and R17's rows."""
    out = [
        "# Problems",
        "",
        "<!-- Generated by `make docs` from src/toolbound/problems.py; edit that instead. -->",
        "",
        "Every code toolbound itself emits, from `toolbound.problems.CATALOGUE`. A",
        "`Problem` in an outcome has a `kind` (its broad class) and a `code` (the precise",
        "reason); exceptions and HTTP answers carry a `code` too. *Recoverable* is the",
        "default: whether a corrected new call, or the same request later, may succeed.",
        "",
        "Codes a tool chooses itself (`NotCommitted(code=...)`, a semantic or target",
        "check's Problem, a scope's own code, an upstream MCP tool's error) belong to the",
        "tool and are not listed here; the example packs in `toolbound.packs` are such tools.",
        "How to add a code: the docstring of `toolbound.problems`.",
        "",
        "## Problems, by kind",
        "",
    ]
    for kind in _KINDS:
        entries = [e for e in _ENTRIES if e.kind == kind]
        out += [f"### `{kind}`", ""]
        header = "| code | recoverable | meaning | requirements | also the code of |"
        rows = (_row(e, also=", ".join(e.raised_as) or "—") for e in entries)
        out += _table(header, rows)
    out += ["## Exceptions, by class", ""]
    for cls in _CLASSES:
        if cls == "ApiError":
            continue
        entries = [e for e in _ENTRIES if cls in e.raised_as]
        out += [f"### `{cls}`", "", _CLASS_NOTES[cls], ""]
        header = "| code | recoverable | meaning | requirements | Problem kind |"
        rows = (_row(e, also=f"`{e.kind}`" if e.kind else "—") for e in entries)
        out += _table(header, rows)
    out += [
        "## HTTP answers (`ApiError`, problem+json)",
        "",
        *_table(
            "| code | status | meaning | requirements |",
            (
                (
                    f"`{e.code}`",
                    ", ".join(map(str, e.statuses)),
                    _cell(e.meaning),
                    " ".join(e.requirements),
                )
                for e in _ENTRIES
                if "ApiError" in e.raised_as
            ),
        ),
        "## R17: the failure table and the codes that answer it",
        "",
        *_table(
            "| failure | earliest boundary | correct response | codes |",
            (
                (
                    _cell(row.failure),
                    _cell(row.boundary),
                    _cell(row.response),
                    _codes(e for e in _ENTRIES if e.r17 is row),
                )
                for row in R17_ROWS
            ),
        ),
    ]
    return "\n".join(out).rstrip("\n") + "\n"

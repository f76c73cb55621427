"""The idempotency ledger's contract (R8, R9, R19).

A ledger remembers which writes happened. Records are keyed by
``(scope, tool version, key)`` and hold the invocation digest, the phase, the
canonical arguments (so an unknown outcome can be reconciled later) and, once
committed, the stored result. Every phase is durable before the next step runs::

    intent ──▶ executing ──▶ committed
       │           ├──────▶ failed        (before the commit boundary)
       └─▶ failed  └──────▶ unknown ──▶ committed | failed   (reconciliation)

:meth:`Ledger.claim` answers the four cases of R8:

* no record, or a failed one for the same digest → :class:`Claimed` (intent written);
* same digest, committed → :class:`Replay` of the original result, no second effect;
* same digest, intent / executing / unknown → :class:`InFlight`;
* different digest → :class:`KeyReused`;

and a record past the retention window follows the configured policy: ``"reject"``
(:class:`Expired`) or ``"new"`` (the old record is replaced) — never a guess.

Each ownership of a key has an **epoch** (a fencing token): ``1`` for the first claim,
one more for every later claim of the key (a failed call run again, an expired record
replaced) and for every takeover (:meth:`Ledger.take_over`, a sweep). The holder
passes its epoch to :meth:`Ledger.advance`, so an owner that paused past its lease and
was taken over cannot move the record any more (``fenced``); a tool gets its epoch in
its ``ToolContext`` to hand the same fence to the system it writes to.

:meth:`Ledger.claim_executing` is the same claim for a call about to run: a free key
is recorded straight in ``executing``, so the claim and the move to ``executing`` are
one commit instead of two. R9 still holds: the record is durable before the side
effect, and a record left in ``executing`` is swept to ``unknown`` (it may have run).

Stores: :class:`~toolbound.ledger.memory.MemoryLedger` (tests),
:class:`~toolbound.ledger.sqlite.SQLiteLedger` (the embedded default) and
:class:`~toolbound.ledger.postgres.PostgresLedger` (several replicas, one ledger). One
conformance suite runs against all of them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal, Protocol

from toolbound._errors import Problem, ToolboundError
from toolbound._jsontext import compact
from toolbound._model import Attempt, Result

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from toolbound._model import JSONObject

__all__ = [
    "PHASE_EDGES",
    "Claim",
    "Claimed",
    "Expired",
    "ExpiredPolicy",
    "InFlight",
    "Intent",
    "KeyReused",
    "Ledger",
    "LedgerError",
    "LedgerKey",
    "LedgerRecord",
    "LedgerTransaction",
    "NotYetError",
    "Phase",
    "Replay",
    "check_edge",
    "dumps_result",
    "loads_result",
    "result_from_json",
    "result_to_json",
]

Phase = Literal["intent", "executing", "committed", "failed", "unknown"]

PHASE_EDGES: dict[Phase, frozenset[Phase]] = {
    "intent": frozenset({"executing", "failed"}),
    "executing": frozenset({"committed", "failed", "unknown"}),
    # R2: OUTCOME_UNKNOWN leaves only through reconciliation with evidence.
    "unknown": frozenset({"committed", "failed"}),
    "committed": frozenset(),
    "failed": frozenset(),
}
"""The ledger's own transitions; a store refuses any other with :class:`LedgerError`."""

ExpiredPolicy = Literal["reject", "new"]


class LedgerError(ToolboundError):
    """The ledger could not do what was asked: storage failed, or the call was wrong.

    ``code`` says which: ``storage_unavailable``, ``corrupt_store``, ``storage_full``,
    ``not_holder`` (this invocation does not hold the key), ``fenced`` (it held the key
    under an older epoch: another process took it over), ``illegal_phase``,
    ``unsupported_schema`` (a database written by another version), ``not_yet`` (a
    takeover or a "not committed" finding before the owner's deadline has passed; see
    :class:`NotYetError`).
    """

    code = "ledger_error"


class NotYetError(LedgerError):
    """Too early to take a call from its owner: it may still start its effect.

    ``code`` is ``not_yet``; ``retry_at`` is the earliest instant the same request can
    succeed (the owner's deadline plus the allowed clock skew, R9).
    """

    code = "not_yet"
    recoverable = True

    def __init__(self, message: str, *, retry_at: datetime) -> None:
        super().__init__(message, code="not_yet")
        self.retry_at = retry_at


@dataclass(frozen=True, slots=True)
class LedgerKey:
    """Where one idempotency record lives."""

    scope: str
    tool_version: str
    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Intent:
    """What the runtime writes before any side effect."""

    key: LedgerKey
    digest: str
    invocation_id: str
    tool: str
    """``name@version``."""
    canonical: bytes
    """The RFC 8785 arguments, for reconciliation."""
    subject: Mapping[str, str | None] = field(hash=False)
    """``{"id", "tenant", "session"}`` of the runtime subject."""
    deadline: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerRecord:
    """One stored record, as a store returns it."""

    key: LedgerKey
    digest: str
    invocation_id: str
    tool: str
    canonical: bytes
    subject: Mapping[str, str | None] = field(hash=False)
    phase: Phase
    deadline: datetime
    created_at: datetime
    updated_at: datetime
    result: Result | None = None
    evidence: tuple[Mapping[str, object], ...] = ()
    epoch: int = 1
    """The ownership this record is under: one more at each claim and takeover."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Claimed:
    """The key is ours: intent is recorded, execute."""

    kind: Literal["claimed"] = "claimed"
    epoch: int = 1
    """This ownership's fencing token: pass it to :meth:`Ledger.advance`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    """The same call already committed: here is its result."""

    kind: Literal["replay"] = "replay"
    invocation_id: str
    result: Result


@dataclass(frozen=True, slots=True, kw_only=True)
class InFlight:
    """The same call is in intent or executing, or its outcome is unknown."""

    kind: Literal["in_flight"] = "in_flight"
    invocation_id: str
    phase: Phase


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyReused:
    """The key was used for different arguments (R8: reject key reuse)."""

    kind: Literal["key_reused"] = "key_reused"
    invocation_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Expired:
    """The key's record is past retention and the policy is ``"reject"``."""

    kind: Literal["expired"] = "expired"
    invocation_id: str


Claim = Claimed | Replay | InFlight | KeyReused | Expired


class LedgerTransaction(Protocol):
    """One transaction for ledger records and a tool's own writes.

    They commit together, or not at all (R8: same database, one transaction).

    ``connection`` is the store's DB-API connection (``None`` for the memory store):
    a tool with ``transactional=True`` writes its business rows through it.
    """

    @property
    def connection(self) -> object:
        """The connection the tool's own writes go through."""
        ...

    def claim(self, intent: Intent, *, now: datetime) -> Claim:
        """:meth:`Ledger.claim` inside this transaction."""
        ...

    def advance(
        self,
        key: LedgerKey,
        *,
        invocation_id: str,
        phase: Phase,
        now: datetime,
        result: Result | None = None,
        evidence: Mapping[str, object] | None = None,
        epoch: int | None = None,
    ) -> None:
        """:meth:`Ledger.advance` inside this transaction."""
        ...


class Ledger(Protocol):
    """Durable memory of which writes happened.

    Safe across threads; the SQL stores are safe across processes too.
    """

    retention: timedelta
    expired: ExpiredPolicy

    def claim(self, intent: Intent, *, now: datetime) -> Claim:
        """Atomically look the key up and, if free, record the intent (durably)."""
        ...

    def claim_executing(self, intent: Intent, *, now: datetime) -> Claim:
        """:meth:`claim` for a call about to run: a ``Claimed`` record is ``executing``.

        The claim and the move to ``executing`` are one atomic, durable write (one
        commit in the SQL stores). Every other answer is :meth:`claim`'s and writes
        nothing. A record left ``executing`` means "it may have started": the caller
        that knows its tool did not start must move it to ``failed``.
        """
        ...

    def advance(
        self,
        key: LedgerKey,
        *,
        invocation_id: str,
        phase: Phase,
        now: datetime,
        result: Result | None = None,
        evidence: Mapping[str, object] | None = None,
        epoch: int | None = None,
    ) -> None:
        """Move the record held by ``invocation_id`` to ``phase``.

        Only along :data:`PHASE_EDGES`; stores ``result`` and appends ``evidence``.
        ``epoch``: the holder's fencing token; a record under another epoch is not
        moved (``fenced``). ``None`` (an operator's reconciliation) checks no epoch.
        """
        ...

    def take_over(
        self,
        key: LedgerKey,
        *,
        invocation_id: str,
        now: datetime,
        evidence: Mapping[str, object] | None = None,
    ) -> LedgerRecord:
        """Take a call from an owner that stopped answering (R9); the record as it is now.

        ``intent`` → ``failed``, ``executing`` → ``unknown``, under the next epoch, so
        the old owner's later writes are ``fenced``. Refused with :class:`NotYetError`
        (``not_yet``) until the record's deadline (plus the allowed clock skew) has
        passed: until then the owner may still start its effect.
        """
        ...

    def get(self, key: LedgerKey) -> LedgerRecord | None:
        """The record at ``key``, if any."""
        ...

    def find(self, invocation_id: str) -> LedgerRecord | None:
        """The record an invocation holds, if any."""
        ...

    def unresolved(self) -> list[LedgerRecord]:
        """Every record whose outcome is unknown, oldest first."""
        ...

    def sweep(self, *, now: datetime, grace: timedelta) -> list[LedgerRecord]:
        """Settle records abandoned by a dead process (past deadline + grace).

        ``intent`` → ``failed`` (the tool was never started); ``executing`` →
        ``unknown`` (it may have committed). Returns the records changed.
        """
        ...

    def atomic(self) -> AbstractContextManager[LedgerTransaction]:
        """A transaction shared by ledger records and a tool's own writes."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


# -- how results are stored ---------------------------------------------------------


def result_to_json(result: Result) -> JSONObject:
    """A :class:`Result` as JSON, for the SQL stores (round-trips exactly)."""
    out: JSONObject = {
        "invocation_id": result.invocation_id,
        "status": result.status,
        "value": result.value,
        "commit_status": result.commit_status,
        "external_resource_id": result.external_resource_id,
        "observed_at": result.observed_at.isoformat(),
        "attempts": [a.as_json() for a in result.attempts],  # type: ignore[misc]
        "error": None if result.error is None else result.error.as_json(),  # type: ignore[dict-item]
    }
    return out


def result_from_json(data: Mapping[str, object]) -> Result:
    """The inverse of :func:`result_to_json`."""
    error = data.get("error")
    attempts = data.get("attempts") or []
    assert isinstance(attempts, list)  # noqa: S101 - written by result_to_json
    return Result(
        invocation_id=str(data["invocation_id"]),
        status="ok" if data["status"] == "ok" else "error",
        value=data.get("value"),  # type: ignore[arg-type]
        commit_status=data["commit_status"],  # type: ignore[arg-type]
        external_resource_id=_opt_str(data.get("external_resource_id")),
        observed_at=datetime.fromisoformat(str(data["observed_at"])),
        attempts=tuple(
            Attempt(
                attempt_id=str(a["attempt_id"]),
                number=int(a["number"]),
                started_at=datetime.fromisoformat(str(a["started_at"])),
                ended_at=datetime.fromisoformat(str(a["ended_at"])),
                outcome=a["outcome"],
                detail=_opt_str(a.get("detail")),
            )
            for a in attempts
        ),
        error=None
        if not isinstance(error, Mapping)
        else Problem(
            kind=error["kind"],
            code=str(error["code"]),
            message=str(error["message"]),
            recoverable=bool(error["recoverable"]),
            hint=_opt_str(error.get("hint")),
            pointer=_opt_str(error.get("pointer")),
        ),
    )


_ENCODE = compact(allow_nan=True)
"""``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` through an encoder
built once: the SQL stores encode a result, a subject and the evidence on every write,
and ``JSONEncoder.encode`` builds its C encoder again on each call."""


def dumps_result(result: Result) -> str:
    """Compact JSON text of a result."""
    return _ENCODE(result_to_json(result))


def loads_result(text: str | bytes | None) -> Result | None:
    """Parse what :func:`dumps_result` wrote (``None`` stays ``None``)."""
    if text is None:
        return None
    return result_from_json(json.loads(text))


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def check_edge(current: Phase, target: Phase) -> None:
    """Raise :class:`LedgerError` unless ``current → target`` is in :data:`PHASE_EDGES`."""
    if target not in PHASE_EDGES[current]:
        msg = f"ledger phase {current} cannot become {target}"
        raise LedgerError(msg, code="illegal_phase")

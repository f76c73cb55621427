"""The retry matrix (R10): what to do after an attempt fails, as a pure decision.

Nothing here sleeps, reads a clock or touches the network. :func:`decide` maps a
failure class, the call's key reliability and the time left onto one of four actions;
the runtime carries the action out (and records every attempt in the trace, R10).
Sleeping goes through a :class:`Sleeper`, so tests inject :class:`FakeSleeper` and
never wait for real.

Tools report *why* they failed with typed signals. They subclass the two signals of
:mod:`toolbound.execution.tool`, so a runtime that has not yet consulted the matrix
still settles each one correctly (R9: ``NotCommitted`` → failed before commit,
``CommitUnknown`` → outcome unknown)::

    NotCommitted                         failed before the commit boundary
    ├── NotReached         not_reached       connection refused, DNS, connect timeout
    ├── Transient          transient         429, 503, 408, 425; any 5xx on a read
    ├── AuthFailed         auth              401, 403
    ├── BusinessRejection  business          any other 4xx: the service said no
    └── NoResponse         timeout_unknown   a *read* whose response never came
    CommitUnknown                        the effect may or may not have happened
    ├── ResponseLost       timeout_unknown   a write sent, its response lost or late
    └── MaybeCommitted     maybe_committed   500/502/504 (other 5xx) on a write

Why ``transient`` and ``maybe_committed`` are separate classes: R10's cell "429 /
transient 5xx / write without key" says *decide whether it may have committed*. A 429
or 503 is the server refusing before doing any work, so the write did not happen and a
careful retry is safe; a 500, 502 or 504 can come from a server (or a gateway in front
of it) that failed after the write reached the database. The HTTP adapter makes that
call once, at the boundary, and the matrix stays a plain table.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Literal, Protocol, get_args

from toolbound.execution.tool import CommitUnknown, NotCommitted

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from toolbound._model import ToolSpec

__all__ = [
    "ACTIONS",
    "FAILURES",
    "MATRIX",
    "RELIABILITIES",
    "Action",
    "AuthFailed",
    "BusinessRejection",
    "FailureClass",
    "FakeSleeper",
    "KeyReliability",
    "MaybeCommitted",
    "NoResponse",
    "NotReached",
    "ResponseLost",
    "RetryDecision",
    "RetryPolicy",
    "Sleeper",
    "SystemSleeper",
    "Transient",
    "backoff_delay",
    "classify",
    "decide",
    "policy_for",
    "reliability_of",
    "retry_after_of",
]

FailureClass = Literal[
    "parse_schema",
    "authorization_deny",
    "not_reached",
    "transient",
    "maybe_committed",
    "timeout_unknown",
    "auth",
    "business",
]
"""Why an attempt failed, as far as retrying is concerned (the rows of R10).

* ``parse_schema`` and ``authorization_deny`` are the gates' rejections (R3 to R6). Such a
  call never reaches execution, so nothing is ever retried: they are rows of the table
  only so that the table is R10 whole, and every cell in them is ``stop``.
* ``not_reached``: provably never reached the service (refused, DNS, connect timeout).
* ``transient``: the service refused before doing work (429, 503) — or any 5xx on a read.
* ``maybe_committed``: a transient-looking 5xx (500, 502, 504) on a write, which may
  have come after the write took effect.
* ``timeout_unknown``: the request went out and no usable response came back.
* ``auth``: 401 / 403; only new credentials could help, never a retry.
* ``business``: the service understood and said no; only a *new* call can help.
"""

KeyReliability = Literal["read", "keyed_write", "queryable_write", "unkeyed_write"]
"""How safely a call can be repeated (the columns of R10).

R10's column "write with reliable key" is split in two, because its cell "same key:
query / retry" names two actions: a backend that de-duplicates by key itself
(``native_key`` → ``keyed_write``) is simply retried with the same key; one that can
only be *asked* about a key (``query_by_key`` → ``queryable_write``) is queried first.
"""

Action = Literal["retry", "query", "unknown", "stop"]
"""What the runtime does next.

* ``retry``: run the same invocation again, same idempotency key, after ``delay``.
* ``query``: ask the backend what happened to the key (the tool's ``query`` hook)
  before anything else. A "not found" answer proves nothing committed: the runtime
  may then call :func:`decide` again as if the failure were ``not_reached``.
* ``unknown``: settle OUTCOME_UNKNOWN and leave it to reconciliation (R9).
* ``stop``: settle the failure as it is; the model may propose a *new* call (R10).
"""

FAILURES: Final[tuple[FailureClass, ...]] = get_args(FailureClass)
RELIABILITIES: Final[tuple[KeyReliability, ...]] = get_args(KeyReliability)
ACTIONS: Final[tuple[Action, ...]] = get_args(Action)

# R10, row by row; columns in RELIABILITIES order. Read it against SPEC.md.
_ROWS: Final[Mapping[FailureClass, tuple[Action, Action, Action, Action]]] = {
    #                    read     keyed_write  queryable_write  unkeyed_write
    # R3/R4: never executed; the model's corrected call is a new Proposal.
    "parse_schema": ("stop", "stop", "stop", "stop"),
    # R6: the runtime's own deny; nothing ran and repeating cannot change the answer.
    "authorization_deny": ("stop", "stop", "stop", "stop"),
    # Nothing arrived anywhere, so even an unkeyed write may go again ("careful
    # retry"): the care is in classification, which says not_reached only on proof.
    "not_reached": ("retry", "retry", "retry", "retry"),
    # 429 / 503 mean "not now, and I did nothing": back off and go again, same key.
    "transient": ("retry", "retry", "retry", "retry"),
    # 500 / 502 / 504 on a write may follow the commit: the native key makes a
    # repeat harmless, a queryable key is asked first, no key means reconcile (R9).
    "maybe_committed": ("retry", "retry", "query", "unknown"),
    # R9: a lost response is never "not executed". A read is simply re-read.
    "timeout_unknown": ("retry", "retry", "query", "unknown"),
    # R10: 401/403 are never retried; without new credentials the answer is the same.
    "auth": ("stop", "stop", "stop", "stop"),
    # R10: only a new call with new arguments (and, for writes, a new key).
    "business": ("stop", "stop", "stop", "stop"),
}

MATRIX: Final[Mapping[tuple[FailureClass, KeyReliability], Action]] = MappingProxyType(
    {
        (failure, reliability): action
        for failure, row in _ROWS.items()
        for reliability, action in zip(RELIABILITIES, row, strict=True)
    }
)
"""R10 as a read-only table: one action per (failure class, key reliability)."""

# A write whose effect may already exist cannot fall back to "stop" (that would say
# "nothing happened"); when its retry or query cannot go ahead it is OUTCOME_UNKNOWN.
_MAY_HAVE_COMMITTED: Final[frozenset[FailureClass]] = frozenset(
    {"maybe_committed", "timeout_unknown"}
)


# -- typed failure signals ------------------------------------------------------------


class NotReached(NotCommitted):
    """The request provably never reached the service: refused, DNS, connect timeout."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, code="not_reached", recoverable=True, hint=hint)


class Transient(NotCommitted):
    """The service refused for now without doing any work (429, 503; any 5xx on a read).

    ``retry_after`` is the server's Retry-After in seconds, when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(
            message,
            code="transient",
            recoverable=True,
            hint="the service is busy or unavailable; the same call may succeed later",
        )
        self.status = status
        self.retry_after = retry_after


class AuthFailed(NotCommitted):
    """The service rejected the credentials (401) or the access (403): never retried."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        # Not recoverable by the model: it cannot change the credentials (R6).
        super().__init__(message, code="auth_failed", recoverable=False)
        self.status = status


class BusinessRejection(NotCommitted):
    """The service understood the request and refused it (a 4xx such as 404 or 422).

    The message carries the service's own (trimmed) explanation, so that the model
    can propose a corrected *new* call (R10).
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(
            message,
            code="business_rejection",
            recoverable=True,
            hint="change the arguments and make a new call",
        )
        self.status = status


class NoResponse(NotCommitted):
    """A *read* whose response never came (timed out or dropped).

    A read commits nothing, so this is a failure before commit, not OUTCOME_UNKNOWN;
    for the matrix it is still ``timeout_unknown`` (re-read within the budget).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, code="no_response", recoverable=True)


class ResponseLost(CommitUnknown):
    """A write was sent and its response was lost or late: it may have committed (R9)."""


class MaybeCommitted(CommitUnknown):
    """A write got a 5xx that can follow a commit (500, 502, 504): outcome unknown."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        evidence: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(message, evidence=evidence)
        self.status = status


# Most specific first: the bare CommitUnknown row catches every other commit-unknown
# signal a tool may raise. A bare NotCommitted has no row (see classify).
_SIGNALS: Final[tuple[tuple[type[BaseException], FailureClass], ...]] = (
    (NotReached, "not_reached"),
    (Transient, "transient"),
    (AuthFailed, "auth"),
    (BusinessRejection, "business"),
    (NoResponse, "timeout_unknown"),
    (MaybeCommitted, "maybe_committed"),
    (CommitUnknown, "timeout_unknown"),
)


def classify(exc: BaseException) -> FailureClass | None:
    """The failure class of a typed signal, or ``None`` for anything unclassified.

    A bare :class:`NotCommitted` gives ``None``: it may be a business refusal, and
    guessing "transient" would repeat a call the service already turned down. Any
    other :class:`CommitUnknown` is ``timeout_unknown`` — exactly what it says.
    """
    for signal, failure in _SIGNALS:
        if isinstance(exc, signal):
            return failure
    return None


def retry_after_of(exc: BaseException) -> float | None:
    """The server's Retry-After carried by a :class:`Transient`, else ``None``."""
    return exc.retry_after if isinstance(exc, Transient) else None


def reliability_of(spec: ToolSpec, *, key: str | None) -> KeyReliability:
    """The column of R10 a call of ``spec`` with idempotency key ``key`` belongs to.

    A write whose backend honours keys but that runs without one is ``unkeyed_write``:
    the guarantee needs the key to travel with the request (R8).
    """
    if not spec.is_write:
        return "read"
    if key is None or spec.idempotency == "none":
        return "unkeyed_write"
    if spec.idempotency == "native_key":
        return "keyed_write"
    return "queryable_write"


# -- policy and decision ------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How many attempts, and how long to wait between them.

    ``max_attempts`` counts the first attempt: 2 means the first try and one retry.
    The wait before retry *n* + 1 is drawn with full jitter from
    ``[0, min(max_delay, base_delay * 2 ** (n - 1))]``. ``min_attempt_time`` is the
    least time worth starting an attempt with: a retry is planned only if its delay
    plus this much still fits before the deadline.
    """

    max_attempts: int = 3
    base_delay: float = 0.1
    max_delay: float = 5.0
    min_attempt_time: float = 0.05

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            msg = f"max_attempts must be at least 1, not {self.max_attempts}"
            raise ValueError(msg)
        if self.base_delay < 0 or self.max_delay < 0 or self.min_attempt_time < 0:
            msg = "base_delay, max_delay and min_attempt_time must not be negative"
            raise ValueError(msg)


def policy_for(spec: ToolSpec, base: RetryPolicy | None = None) -> RetryPolicy:
    """``base`` (or the default policy) with ``max_attempts`` taken from ``spec``."""
    return replace(base or RetryPolicy(), max_attempts=spec.max_attempts)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryDecision:
    """What :func:`decide` concluded.

    ``delay`` is the wait in seconds before a ``retry`` or ``query``, and ``None``
    for ``stop`` and ``unknown``. ``reason`` is for the trace and for people.
    """

    action: Action
    delay: float | None
    reason: str


def backoff_delay(
    attempt: int,
    policy: RetryPolicy,
    rng: Callable[[], float],
    *,
    limit: float | None = None,
) -> float:
    """The full-jitter wait after failed attempt number ``attempt`` (1-based).

    ``rng`` returns a float in ``[0, 1]`` (``random.random``); the window is
    ``min(max_delay, base_delay * 2 ** (attempt - 1))``, further capped by ``limit``
    (the time a retry may still spend waiting) when given.
    """
    if attempt < 1:
        msg = f"attempt numbers start at 1, not {attempt}"
        raise ValueError(msg)
    draw = rng()
    if not 0.0 <= draw <= 1.0:
        msg = f"rng must return a number in [0, 1], not {draw}"
        raise ValueError(msg)
    # Cap the exponent first: 2 ** 1100 overflows a float long before max_delay binds.
    growth = policy.base_delay * 2.0 ** min(attempt - 1, 64)
    window = min(policy.max_delay, growth)
    if limit is not None:
        window = max(0.0, min(window, limit))
    return draw * window


def decide(
    failure: FailureClass,
    reliability: KeyReliability,
    *,
    attempt: int,
    policy: RetryPolicy,
    remaining: float,
    retry_after: float | None,
    rng: Callable[[], float],
) -> RetryDecision:
    """What to do after attempt number ``attempt`` failed with ``failure`` (R10).

    ``remaining`` is the time left before the invocation's deadline, in seconds;
    ``retry_after`` the server's Retry-After in seconds, if any. The table
    :data:`MATRIX` gives the intended action; this function then enforces the
    bounds: no attempt past ``policy.max_attempts``, no wait past the deadline, and a
    Retry-After honoured only when it fits — otherwise the call stops (seed 42.4).
    Whenever a planned retry or query cannot go ahead, a write that may have
    committed ends ``unknown`` rather than ``stop``: R9 never calls it "not executed".
    """
    if attempt < 1:
        msg = f"attempt numbers start at 1, not {attempt}"
        raise ValueError(msg)
    planned = MATRIX[failure, reliability]
    cell = f"{failure} on a {reliability.replace('_', ' ')}"
    fallback: Action = (
        "unknown" if failure in _MAY_HAVE_COMMITTED and reliability != "read" else "stop"
    )
    if planned in {"stop", "unknown"}:
        return RetryDecision(action=planned, delay=None, reason=f"{cell}: {planned} (R10)")
    if remaining < policy.min_attempt_time:
        return RetryDecision(
            action=fallback,
            delay=None,
            reason=f"{cell}: {planned} wanted, but only {remaining:.3f}s are left",
        )
    if planned == "query":
        # A query is not an execution attempt, so it does not count against
        # max_attempts; it only needs time.
        return RetryDecision(
            action="query", delay=0.0, reason=f"{cell}: ask the backend about the key first"
        )
    if attempt >= policy.max_attempts:
        return RetryDecision(
            action=fallback,
            delay=None,
            reason=f"{cell}: attempt {attempt} of {policy.max_attempts} was the last",
        )
    room = remaining - policy.min_attempt_time
    if retry_after is not None:
        # The server's word is a floor, not a hint: waiting less would be refused
        # again, and waiting past the deadline breaks R10. So: it fits, or we stop.
        if retry_after > room:
            return RetryDecision(
                action=fallback,
                delay=None,
                reason=(
                    f"{cell}: Retry-After {retry_after:g}s does not fit in the "
                    f"{remaining:.3f}s left"
                ),
            )
        delay = max(0.0, retry_after)
        source = "Retry-After"
    else:
        # Full jitter, its window cut to the room before the deadline: the retry
        # always starts in time, however large the drawn delay would have been.
        delay = backoff_delay(attempt, policy, rng, limit=room)
        source = "backoff"
    return RetryDecision(
        action="retry",
        delay=delay,
        reason=(
            f"{cell}: retry as attempt {attempt + 1} of {policy.max_attempts} "
            f"after {delay:.3f}s ({source})"
        ),
    )


# -- sleeping -------------------------------------------------------------------------


class Sleeper(Protocol):
    """Waits between attempts; the runtime takes one so tests can pass a fake."""

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds``."""
        ...

    async def asleep(self, seconds: float) -> None:
        """Suspend the calling task for ``seconds``."""
        ...


class SystemSleeper:
    """Real waiting: :func:`time.sleep` and :func:`asyncio.sleep`."""

    __slots__ = ()

    def sleep(self, seconds: float) -> None:
        """``time.sleep(seconds)``."""
        time.sleep(seconds)

    async def asleep(self, seconds: float) -> None:
        """``await asyncio.sleep(seconds)``."""
        await asyncio.sleep(seconds)


class _Advances(Protocol):
    def advance(self, seconds: float) -> None: ...


@dataclass(slots=True)
class FakeSleeper:
    """A sleeper that returns at once and records what it was asked to wait.

    Give it the runtime's :class:`~toolbound.FixedClock` and each "sleep" moves that
    clock forward, so deadlines and trace times behave as if time had passed.
    """

    clock: _Advances | None = None
    slept: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        """Record ``seconds`` and advance the clock, without waiting."""
        self.slept.append(seconds)
        if self.clock is not None:
            self.clock.advance(seconds)

    async def asleep(self, seconds: float) -> None:
        """Record ``seconds`` and advance the clock, without waiting."""
        self.sleep(seconds)

    @property
    def total(self) -> float:
        """All the time it was asked to wait."""
        return sum(self.slept)

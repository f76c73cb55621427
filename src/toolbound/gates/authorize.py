"""The authorization gate (R6): whether the runtime subject may make this call.

Authorization reads five things only: the subject the *runtime* supplied, the
:class:`~toolbound.ToolSpec`, the normalized arguments (for limits and
confirmation rules), the resources the tool's own extractor named, and where the
argument values came from (:mod:`toolbound.provenance`, when tracked). It never
reads an identity written in the arguments, so ``{"principal": "leo"}`` or
``{"role": "admin"}`` in a proposal changes nothing (R6; R17 "model claims admin
in args").

A :class:`Policy` answers with one of three values::

    Allow(capabilities, reason)     run, with exactly these capabilities
    Confirm(capabilities, reason)   run only after a person approves (R7)
    Deny(problem)                   a Problem of kind "authorization"

Each may carry ``evidence``: what the policy matched (e.g. provenance findings),
recorded in the trace and shown to the person asked to confirm.

:class:`GrantPolicy` decides from :class:`Grant` records; :class:`AllOf` combines
policies; :func:`authorize` is the one entry point the pipeline calls and holds the
R6 invariants whatever policy is plugged in.

Problem codes (all ``kind="authorization"``)::

    capability_missing       no live grant of the subject for a capability the tool needs
    action_not_granted       no grant allows read/create/modify/delete on that resource
    resource_out_of_scope    the path, domain or id lies outside the granted scope
    not_found_or_not_owned   the row is missing or someone else's (never says which)
    scope_unchecked          the only grants are scoped, and the call names no resource
    limit_exceeded           an amount, quantity or time range is over a limit (recoverable)
    rate_limited             too many calls in the window (recoverable)

A scope may return a code of its own; it becomes the problem's code.
"""

from __future__ import annotations

import enum
import ipaddress
import math
import os
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias, assert_never, get_args
from urllib.parse import urlsplit

from toolbound._errors import ConfigurationError, Problem
from toolbound._frozen import quick_init
from toolbound._model import Action
from toolbound.problems import make_problem

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from toolbound._clock import Clock
    from toolbound._model import JSONObject, JSONValue, Resource, Subject, ToolSpec
    from toolbound.provenance.labels import Finding, FlowReport

__all__ = [
    "AllOf",
    "Allow",
    "AuthzRequest",
    "Confirm",
    "Decision",
    "Deny",
    "DomainScope",
    "Grant",
    "GrantPolicy",
    "IdScope",
    "Limit",
    "NumberLimit",
    "OwnerScope",
    "PathScope",
    "Policy",
    "RateLimit",
    "Scope",
    "TimeRangeLimit",
    "authorize",
]

_ACTIONS: frozenset[str] = frozenset(get_args(Action))
_OUT_OF_SCOPE = "resource_out_of_scope"
_NOT_OWNED = "not_found_or_not_owned"


def _require_aware(value: datetime, what: str) -> None:
    # Naive datetimes cannot be compared with aware ones, and a guessed offset
    # would move an expiry by hours; refuse them where they are configured.
    if value.tzinfo is None or value.utcoffset() is None:
        msg = f"{what} must be a timezone-aware datetime"
        raise ConfigurationError(msg)


# ---------------------------------------------------------------------------
# Request and decisions


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AuthzRequest:
    """Everything a policy may look at for one call.

    ``subject`` comes from the runtime, never from the arguments (R6).
    ``arguments`` are the *normalized* arguments; ``resources`` are what the tool's
    extractor named; ``now`` is the timezone-aware instant grants expire against.
    ``recheck`` is set when a call already admitted once is checked again (after
    a person confirmed it): budgets such as rate limits are not spent twice.
    ``provenance`` says where each argument value came from, when the call
    carries a :class:`~toolbound.provenance.Provenance` index (``None`` otherwise).
    """

    subject: Subject
    spec: ToolSpec
    arguments: JSONObject = field(hash=False)
    resources: tuple[Resource, ...] = ()
    now: datetime
    recheck: bool = False
    provenance: FlowReport | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        """Refuse a naive ``now``."""
        _require_aware(self.now, "AuthzRequest.now")


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Allow:
    """Run the call; execution may use exactly ``capabilities`` and no more."""

    kind: Literal["allow"] = field(default="allow", init=False)
    capabilities: frozenset[str]
    reason: str
    evidence: tuple[Finding, ...] = ()


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Deny:
    """Do not run the call; ``problem`` says why (``kind="authorization"``)."""

    kind: Literal["deny"] = field(default="deny", init=False)
    problem: Problem
    evidence: tuple[Finding, ...] = ()
    """What the policy matched, e.g. where a value came from (recorded in the trace)."""


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Confirm:
    """Run the call only after a person approves this exact invocation (R7)."""

    kind: Literal["confirm"] = field(default="confirm", init=False)
    capabilities: frozenset[str]
    reason: str
    evidence: tuple[Finding, ...] = ()
    """What the policy matched; shown to the person asked to confirm."""


Decision: TypeAlias = Allow | Deny | Confirm
"""What a policy answers; match on ``kind`` or on the class, exhaustively."""


class Policy(Protocol):
    """Decides one call. Must not read identity from ``request.arguments``."""

    def authorize(self, request: AuthzRequest) -> Decision:
        """Allow, confirm or deny the call described by ``request``."""
        ...


class Scope(Protocol):
    """Which resources a grant reaches (R6 resource scopes)."""

    def admits(self, resource: Resource, subject: Subject) -> str | None:
        """``None`` when admitted, else a snake_case code that becomes the problem's code."""
        ...


class Limit(Protocol):
    """A bound on the arguments or the pace of calls a grant allows.

    ``check`` should be pure; :class:`RateLimit` is the stateful exception and is
    consulted once, after every other check has passed.
    """

    def check(self, request: AuthzRequest) -> str | None:
        """``None`` when within the limit, else a sentence saying what is over it."""
        ...


# ---------------------------------------------------------------------------
# Scopes


@dataclass(frozen=True, slots=True)
class PathScope:
    """Filesystem paths at or below ``root``, after resolving symlinks and ``..``.

    Both ``root`` and the resource path go through :func:`os.path.realpath` at
    check time; a relative resource path is taken relative to ``root``, never to
    the working directory. The check is a snapshot: a symlink swapped in after it
    is the executor's to guard against (open with ``O_NOFOLLOW`` or check again).
    """

    root: str | os.PathLike[str]

    def __post_init__(self) -> None:
        """Refuse a relative root, which would depend on the working directory."""
        if not Path(self.root).is_absolute():
            msg = f"PathScope root must be an absolute path, got {os.fspath(self.root)!r}"
            raise ConfigurationError(msg)

    def admits(self, resource: Resource, subject: Subject) -> str | None:  # noqa: ARG002
        """Admit ``resource.id`` if its real path is ``root`` or inside it."""
        if not resource.id:
            return _OUT_OF_SCOPE
        try:
            root = os.path.realpath(self.root)
            path = os.path.realpath(Path(root) / resource.id)
            # commonpath compares whole components: "/data" is not a prefix of
            # "/database/x", which a plain startswith would wrongly admit.
            inside = os.path.commonpath([root, path]) == root
        except ValueError:  # embedded NUL, or paths on different drives
            return _OUT_OF_SCOPE
        return None if inside else _OUT_OF_SCOPE


@dataclass(frozen=True, slots=True)
class OwnerScope:
    """Rows whose ``owner`` is the subject (R6 row ownership).

    A missing row and another subject's row get the same code,
    ``not_found_or_not_owned``, so the answer never reveals which ids exist. The
    extractor is expected to look rows up within the subject's tenant.
    """

    def admits(self, resource: Resource, subject: Subject) -> str | None:
        """Admit only an existing resource owned by ``subject.id``."""
        if resource.exists and resource.owner is not None and resource.owner == subject.id:
            return None
        return _NOT_OWNED


_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


def _normalize_host(host: str) -> str | None:
    """Return the comparable ASCII form of a host name or IP literal, or ``None``."""
    host = host.lower().removesuffix(".")
    if not host:
        return None
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        pass
    if not host.isascii():
        try:
            ascii_host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
        # IDNA 2003 (the stdlib codec) maps some names ("faß", fullwidth letters,
        # ideographic dots) where IDNA 2008 clients map them elsewhere. Accept only
        # names that survive a round trip, so that the host we compare is the host
        # an HTTP client will contact.
        if ascii_host.encode("ascii").decode("idna") != host:
            return None
        host = ascii_host
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in host.split(".")):  # noqa: PLR2004 - DNS name length
        return None
    return host


def _host_of(target: str) -> str | None:
    """Return the normalized host of an http(s) URL or a bare host; ``None`` if unsafe."""
    # Browsers read "\" as "/", and control characters are stripped by some
    # parsers and not others; either can make two parsers disagree on the host.
    if "\\" in target or any(ch.isspace() or not ch.isprintable() for ch in target):
        return None
    parts = urlsplit(target)
    if parts.scheme:
        if parts.scheme not in {"http", "https"}:
            return None
    else:
        parts = urlsplit("//" + target)
    # "https://example.com@evil.com" goes to evil.com; refuse userinfo outright.
    if "@" in parts.netloc or not parts.hostname:
        return None
    try:
        _ = parts.port
    except ValueError:
        return None
    return _normalize_host(parts.hostname)


def _reject_bare_string(value: object, what: str) -> None:
    # frozenset("example.com") is a set of letters; catch the slip at construction.
    if isinstance(value, str):
        msg = f"{what} must be a set of strings, not one string"
        raise ConfigurationError(msg)


@dataclass(frozen=True, slots=True)
class DomainScope:
    """URLs and hosts on an allowlist of domains (R6 domain allowlist).

    ``resource.id`` is an ``http``/``https`` URL or a bare host. The host is
    compared in lowercase IDNA form, exactly, or as a true subdomain when
    ``allow_subdomains`` (``a.example.com`` matches ``example.com``;
    ``evil-example.com`` does not). Userinfo, other schemes, bad ports, backslashes
    and hosts that are not plain DNS names or IP literals are refused.
    """

    domains: frozenset[str]
    allow_subdomains: bool = False
    _allowed: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Normalize the allowlist once; refuse entries that are not host names."""
        _reject_bare_string(self.domains, "DomainScope.domains")
        allowed: set[str] = set()
        for domain in self.domains:
            host = _normalize_host(domain)
            if host is None:
                msg = f"DomainScope: {domain!r} is not a host name"
                raise ConfigurationError(msg)
            allowed.add(host)
        object.__setattr__(self, "_allowed", frozenset(allowed))

    def admits(self, resource: Resource, subject: Subject) -> str | None:  # noqa: ARG002
        """Admit a URL or host whose host is on the allowlist."""
        host = _host_of(resource.id)
        if host is None:
            return _OUT_OF_SCOPE
        if host in self._allowed:
            return None
        if self.allow_subdomains and any(host.endswith("." + d) for d in self._allowed):
            return None
        return _OUT_OF_SCOPE


@dataclass(frozen=True, slots=True)
class IdScope:
    """Resources whose id is one of ``ids`` (e.g. calendar ids), compared exactly."""

    ids: frozenset[str]

    def __post_init__(self) -> None:
        """Refuse a bare string, which would be read as a set of characters."""
        _reject_bare_string(self.ids, "IdScope.ids")

    def admits(self, resource: Resource, subject: Subject) -> str | None:  # noqa: ARG002
        """Admit a resource whose id is enumerated."""
        return None if resource.id in self.ids else _OUT_OF_SCOPE


# ---------------------------------------------------------------------------
# Limits


class _Absent(enum.Enum):
    ABSENT = enum.auto()


_ABSENT = _Absent.ABSENT


def _parse_pointer(pointer: str) -> tuple[str, ...]:
    """RFC 6901 reference tokens, or ConfigurationError."""
    if pointer == "":
        return ()
    if not pointer.startswith("/") or re.search(r"~(?![01])", pointer):
        msg = f"{pointer!r} is not a JSON Pointer"
        raise ConfigurationError(msg)
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/"))


def _lookup(document: JSONValue, pointer: str) -> JSONValue | _Absent:
    node = document
    for step in _parse_pointer(pointer):
        if isinstance(node, dict):
            if step not in node:
                return _ABSENT
            node = node[step]
        elif isinstance(node, list):
            if not step.isdigit() or (step != "0" and step.startswith("0")):
                return _ABSENT
            index = int(step)
            if index >= len(node):
                return _ABSENT
            node = node[index]
        else:
            return _ABSENT
    return node


def _show(number: float) -> str:
    if isinstance(number, float) and number.is_integer():
        return str(int(number))
    return str(number)


@dataclass(frozen=True, slots=True)
class NumberLimit:
    """A bound on the number at ``pointer`` (an amount, a quantity).

    A missing field passes (the schema decides whether it is required); a value
    that is not a finite number fails, since it cannot be shown to be in bounds.
    """

    pointer: str
    minimum: float | None = None
    maximum: float | None = None

    def __post_init__(self) -> None:
        """Check the pointer and that the bounds make sense."""
        _parse_pointer(self.pointer)
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            msg = f"NumberLimit at {self.pointer}: minimum is above maximum"
            raise ConfigurationError(msg)

    def check(self, request: AuthzRequest) -> str | None:
        """Say what is wrong with the number, or ``None``."""
        value = _lookup(request.arguments, self.pointer)
        if value is _ABSENT:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{self.pointer} must be a number to be checked against its limit"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{self.pointer} must be a finite number"
        if self.minimum is not None and value < self.minimum:
            return f"{self.pointer} is {_show(value)}, below the minimum {_show(self.minimum)}"
        if self.maximum is not None and value > self.maximum:
            return f"{self.pointer} is {_show(value)}, above the maximum {_show(self.maximum)}"
        return None


def _instant(value: JSONValue) -> date | datetime | None:
    """Parse an ISO 8601 date or date-time string; ``None`` if it is neither."""
    if not isinstance(value, str):
        return None
    try:
        if "T" in value.upper():
            return datetime.fromisoformat(value)
        return date.fromisoformat(value)
    except ValueError:
        return None


def _as_datetime(value: date, tz: tzinfo | None, *, end_of_day: bool) -> datetime:
    if isinstance(value, datetime):
        return value
    # A date names a whole day: as a start it begins at midnight, as an end it
    # runs to the next midnight, so 1-30 January spans 30 days, not 29.
    start = datetime.combine(value, time(), tzinfo=tz)
    return start + timedelta(days=1) if end_of_day else start


@dataclass(frozen=True, slots=True)
class TimeRangeLimit:
    """A bound on the range between the ISO dates or date-times at two pointers.

    The span may not exceed ``max_span``; a date counts as the whole day. With
    ``not_before_now`` the start may not lie in the past: a date-time is compared
    with ``request.now``, a bare date with the date still current somewhere on
    Earth (UTC-12), since a date carries no timezone. Missing fields pass; values
    that are not ISO 8601, an end before the start, or naive and aware date-times
    mixed, fail.
    """

    start: str
    end: str
    max_span: timedelta
    not_before_now: bool = False

    def __post_init__(self) -> None:
        """Check the pointers and that the span is positive."""
        _parse_pointer(self.start)
        _parse_pointer(self.end)
        if self.max_span <= timedelta(0):
            msg = "TimeRangeLimit.max_span must be positive"
            raise ConfigurationError(msg)

    def check(self, request: AuthzRequest) -> str | None:
        """Say what is wrong with the range, or ``None``."""
        raw_start = _lookup(request.arguments, self.start)
        raw_end = _lookup(request.arguments, self.end)
        start = None if raw_start is _ABSENT else _instant(raw_start)
        end = None if raw_end is _ABSENT else _instant(raw_end)
        for pointer, raw, parsed in ((self.start, raw_start, start), (self.end, raw_end, end)):
            if raw is not _ABSENT and parsed is None:
                return f"{pointer} is not an ISO 8601 date or date-time"
        if start is not None and self.not_before_now:
            reason = self._check_not_past(start, request.now)
            if reason is not None:
                return reason
        if start is None or end is None:
            return None
        return self._check_span(start, end)

    def _check_not_past(self, start: date, now: datetime) -> str | None:
        if isinstance(start, datetime):
            if start.tzinfo is None or start.utcoffset() is None:
                return f"{self.start} needs a UTC offset to be compared with the current time"
            if start < now:
                return f"{self.start} is in the past"
            return None
        if start < (now.astimezone(UTC) - timedelta(hours=12)).date():
            return f"{self.start} is in the past"
        return None

    def _check_span(self, start: date, end: date) -> str | None:
        anchor = start if isinstance(start, datetime) else end
        tz = anchor.tzinfo if isinstance(anchor, datetime) else None
        lo = _as_datetime(start, tz, end_of_day=False)
        hi = _as_datetime(end, tz, end_of_day=True)
        try:
            span = hi - lo
        except TypeError:
            return f"{self.start} and {self.end} mix date-times with and without a UTC offset"
        # A date end covers its whole day, so it is before the start only when
        # that day ends at or before the start; a date-time end may equal it.
        empty = span < timedelta(0) if isinstance(end, datetime) else span <= timedelta(0)
        if empty:
            return f"{self.end} is before {self.start}"
        if span > self.max_span:
            return f"the range {self.start}..{self.end} spans {span}, more than {self.max_span}"
        return None


class RateLimit:
    """At most ``max_calls`` per ``per`` for each subject (id and tenant).

    A sliding window over ``clock.monotonic()``; thread-safe. It counts only the
    calls it lets through, at the moment it lets them through. One instance is one
    budget: share an instance between grants to share the budget.
    """

    __slots__ = ("_calls", "_clock", "_last_sweep", "_lock", "max_calls", "per")

    def __init__(self, max_calls: int, per: timedelta, clock: Clock) -> None:
        """Set the budget; ``clock`` is injected so tests need no real waiting."""
        if max_calls < 1 or per <= timedelta(0):
            msg = "RateLimit needs max_calls >= 1 and a positive window"
            raise ConfigurationError(msg)
        self.max_calls = max_calls
        self.per = per
        self._clock = clock
        self._lock = threading.Lock()
        self._calls: dict[tuple[str, str], deque[float]] = {}
        self._last_sweep = clock.monotonic()

    def __repr__(self) -> str:
        """Show the budget, not the counters."""
        return f"RateLimit(max_calls={self.max_calls}, per={self.per!r})"

    def check(self, request: AuthzRequest) -> str | None:
        """Count this call and return ``None``, or say when to retry without counting it."""
        key = (request.subject.tenant, request.subject.id)
        window = self.per.total_seconds()
        with self._lock:
            now = self._clock.monotonic()
            self._sweep(now, window)
            calls = self._calls.setdefault(key, deque())
            while calls and calls[0] <= now - window:
                calls.popleft()
            if request.recheck:
                return None  # this call was counted when it was first admitted
            if len(calls) >= self.max_calls:
                wait = calls[0] + window - now
                return f"at most {self.max_calls} calls per {self.per}; retry in {wait:.1f} s"
            calls.append(now)
            return None

    def _sweep(self, now: float, window: float) -> None:
        # Once per window drop subjects with no call in it, so memory follows the
        # subjects active in one window rather than every subject ever seen.
        if now - self._last_sweep < window:
            return
        self._last_sweep = now
        for key in [k for k, calls in self._calls.items() if calls[-1] <= now - window]:
            del self._calls[key]


# ---------------------------------------------------------------------------
# Grants


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """One capability held by one subject of one tenant.

    It matches a request only on exact ``subject`` id *and* ``tenant``, and on
    ``session`` when set (``None`` means any session of that subject); it is dead
    from ``expires_at`` on. ``actions`` keeps read, create, modify and delete apart
    (R6). ``confirm`` marks high-impact use: ``True``, or a predicate over the
    request (e.g. amount above 100).
    """

    subject: str
    tenant: str
    session: str | None = None
    capability: str
    actions: frozenset[Action]
    scope: Scope | None = None
    limits: tuple[Limit, ...] = ()
    confirm: bool | Callable[[AuthzRequest], bool] = False
    expires_at: datetime | None = None

    def __post_init__(self) -> None:
        """Refuse grants that could match by accident or never be checked."""
        if not (self.subject and self.tenant and self.capability):
            msg = "a Grant needs a subject, a tenant and a capability"
            raise ConfigurationError(msg)
        if not isinstance(self.actions, frozenset) or not self.actions <= _ACTIONS:
            msg = f"Grant.actions must be a frozenset of {sorted(_ACTIONS)}, got {self.actions!r}"
            raise ConfigurationError(msg)
        object.__setattr__(self, "limits", tuple(self.limits))
        if self.expires_at is not None:
            _require_aware(self.expires_at, "Grant.expires_at")

    def holds_for(self, subject: Subject, now: datetime) -> bool:
        """Whether this grant belongs to ``subject`` and is live at ``now``."""
        return (
            self.subject == subject.id
            and self.tenant == subject.tenant
            and (self.session is None or self.session == subject.session)
            and (self.expires_at is None or now < self.expires_at)
        )


# ---------------------------------------------------------------------------
# Problems


def _deny(code: str, message: str, hint: str, *, pointer: str | None = None) -> Deny:
    return Deny(problem=make_problem(code, message, hint=hint, pointer=pointer))


def _capability_missing(spec: ToolSpec, capability: str) -> Deny:
    # Names only the capability the tool needs: nothing about who else holds it.
    return _deny(
        "capability_missing",
        f"{spec.ref} needs capability {capability!r}, which this subject does not hold",
        "Changing the arguments cannot grant a capability; tell the user it is missing.",
    )


def _scope_denial(code: str, resource: Resource) -> Deny:
    what = f"{resource.kind} {resource.id!r}"
    if code == _NOT_OWNED:
        # One message for missing and for someone else's row (R6): never say which.
        return _deny(
            _NOT_OWNED,
            f"{what} was not found or does not belong to this subject",
            "Check the id with the user; do not try other ids.",
        )
    if code == _OUT_OF_SCOPE:
        return _deny(
            _OUT_OF_SCOPE,
            f"{what} is outside the scope this subject was granted",
            "Use a resource inside the permitted scope, or ask the user.",
        )
    # A scope's own code is its author's, not the catalogue's (toolbound.problems).
    return Deny(
        problem=Problem(
            kind="authorization",
            code=code or _OUT_OF_SCOPE,
            message=f"{what} is not admitted by the granted scope",
            recoverable=False,
            hint="Use a resource inside the permitted scope, or ask the user.",
        )
    )


def _limit_denial(limit: Limit, reason: str) -> Deny:
    return _deny(
        "limit_exceeded",
        reason,
        "Propose the call again with arguments inside the limit.",
        pointer=limit.pointer if isinstance(limit, NumberLimit) else None,
    )


# ---------------------------------------------------------------------------
# Policies


class _Call:
    """One request being decided: grant selection, limit checks, cached confirm rules."""

    __slots__ = ("_confirm", "request")

    def __init__(self, request: AuthzRequest) -> None:
        self.request = request
        self._confirm: dict[int, bool] = {}

    def wants_confirm(self, grant: Grant) -> bool:
        if id(grant) not in self._confirm:
            rule = grant.confirm
            self._confirm[id(grant)] = rule if isinstance(rule, bool) else bool(rule(self.request))
        return self._confirm[id(grant)]

    def pure_refusal(self, grant: Grant) -> Deny | None:
        for limit in grant.limits:
            if isinstance(limit, RateLimit):
                continue  # consulted once, last, on the grants actually used
            reason = limit.check(self.request)
            if reason is not None:
                return _limit_denial(limit, reason)
        return None

    def pick(self, candidates: list[Grant]) -> Grant | Deny:
        """Return the first grant whose limits pass, preferring one needing no person."""
        refusals = [(g, self.pure_refusal(g)) for g in candidates]
        passing = [g for g, refusal in refusals if refusal is None]
        if not passing:
            # Report the first candidate's refusal; candidates is never empty here.
            return next(refusal for _, refusal in refusals if refusal is not None)
        return next((g for g in passing if not self.wants_confirm(g)), passing[0])

    def grants_used(self, held: dict[str, list[Grant]]) -> list[Grant] | Deny:
        """Choose a grant for every resource, then for every capability left over."""
        pool = [g for grants in held.values() for g in grants]
        used: dict[int, Grant] = {}
        for resource in self.request.resources:
            chosen = self.grant_for_resource(pool, resource)
            if isinstance(chosen, Deny):
                return chosen
            used.setdefault(id(chosen), chosen)
        covered = {g.capability for g in used.values()}
        for capability, grants in held.items():
            if capability in covered:
                continue
            chosen = self.grant_for_capability(capability, grants)
            if isinstance(chosen, Deny):
                return chosen
            used.setdefault(id(chosen), chosen)
        return list(used.values())

    def grant_for_resource(self, pool: list[Grant], resource: Resource) -> Grant | Deny:
        with_action = [g for g in pool if resource.action in g.actions]
        if not with_action:
            # Also the answer when the spec lists no capability at all: a resource
            # is reached only through a capability the tool declares.
            return _deny(
                "action_not_granted",
                f"no grant of this tool's capabilities allows {resource.action} on "
                f"{resource.kind} {resource.id!r}",
                f"This subject may not {resource.action} this kind of resource; ask the user.",
            )
        subject = self.request.subject
        codes = [
            None if g.scope is None else g.scope.admits(resource, subject) for g in with_action
        ]
        admitted = [g for g, code in zip(with_action, codes, strict=True) if code is None]
        if not admitted:
            return _scope_denial(next(c for c in codes if c is not None), resource)
        return self.pick(admitted)

    def grant_for_capability(self, capability: str, grants: list[Grant]) -> Grant | Deny:
        # A scoped grant is only as good as the resources shown to its scope; with
        # none to show, using it would bypass the scope (R6 resource scopes).
        unscoped = [g for g in grants if g.scope is None]
        if not unscoped:
            return _deny(
                "scope_unchecked",
                f"capability {capability!r} is granted only within a scope, and this "
                "call names no resource that scope could check",
                "Name the resource the call acts on, or ask the user.",
            )
        return self.pick(unscoped)

    def spend_rate_limits(self, used: list[Grant]) -> Deny | None:
        # Rate limits last, on the grants actually used, so that a call refused
        # for any other reason is not counted against the subject.
        for grant in used:
            for limit in grant.limits:
                if isinstance(limit, RateLimit) and (reason := limit.check(self.request)):
                    return _deny(
                        "rate_limited",
                        reason,
                        "Wait before proposing the call again.",
                    )
        return None

    def verdict(self, used: list[Grant], granted: frozenset[str]) -> Allow | Confirm:
        confirming = sorted({g.capability for g in used if self.wants_confirm(g)})
        if confirming:
            return Confirm(
                capabilities=granted,
                reason="confirmation required by the grant for " + ", ".join(confirming),
            )
        return _allowed(granted)


class GrantPolicy:
    """Decides from a fixed set of :class:`Grant` records.

    For a call it keeps only the subject's own live grants (id, tenant, session,
    expiry) and then requires, in this order:

    1. a grant for every capability the spec lists (``capability_missing``);
    2. for every resource, a grant of one of those capabilities whose actions
       include the resource's action (``action_not_granted``) and whose scope
       admits it (``resource_out_of_scope`` or the scope's code);
    3. for every capability no resource used, an *unscoped* grant: a scope that
       is never shown a resource would be bypassed (``scope_unchecked``);
    4. the limits of every grant used (``limit_exceeded``), then their rate limits
       (``rate_limited``).

    Where several grants would do, the first (in the order given) whose limits
    pass is used, preferring one that needs no confirmation. If any grant used
    needs confirmation the answer is :class:`Confirm`. The capabilities granted
    are exactly the spec's.
    """

    __slots__ = ("_allow", "_by_capability")

    def __init__(self, grants: Iterable[Grant]) -> None:
        """Index ``grants`` by (tenant, subject, capability), in the order given."""
        index: dict[tuple[str, str, str], list[Grant]] = {}
        for grant in grants:
            index.setdefault((grant.tenant, grant.subject, grant.capability), []).append(grant)
        self._by_capability = {key: tuple(value) for key, value in index.items()}
        self._allow: dict[tuple[str, ...], Allow] = {}  # decisions are values: one per set

    def authorize(self, request: AuthzRequest) -> Decision:
        """Allow, confirm or deny ``request`` from the grants."""
        subject, now = request.subject, request.now
        # R6: only the runtime subject selects grants; the arguments are never read
        # for identity, whatever keys they carry.
        capabilities = tuple(dict.fromkeys(request.spec.capabilities))
        held: dict[str, list[Grant]] = {}
        for capability in capabilities:
            grants = self._by_capability.get((subject.tenant, subject.id, capability), ())
            live = [g for g in grants if g.holds_for(subject, now)]
            if not live:
                return _capability_missing(request.spec, capability)
            held[capability] = live
        if not request.resources and all(_plain(grants) for grants in held.values()):
            # The common read: no resource to scope, and for every capability the
            # first unscoped grant has no limit and no confirmation, so it is the
            # grant steps 3 and 4 pick, and nothing is left to check or spend.
            allow = self._allow.get(capabilities)
            if allow is None:
                allow = self._allow.setdefault(capabilities, _allowed(frozenset(capabilities)))
            return allow
        call = _Call(request)
        used = call.grants_used(held)
        if isinstance(used, Deny):
            return used
        return call.spend_rate_limits(used) or call.verdict(used, frozenset(capabilities))


def _plain(grants: list[Grant]) -> bool:
    """Whether the first unscoped grant of ``grants`` has no limit and needs no person."""
    for grant in grants:
        if grant.scope is None:
            return not grant.limits and grant.confirm is False
    return False


def _allowed(granted: frozenset[str]) -> Allow:
    if not granted:
        return Allow(capabilities=granted, reason="the tool needs no capability")
    return Allow(capabilities=granted, reason="granted " + ", ".join(sorted(granted)))


class AllOf:
    """Every policy must agree, consulted in order.

    The first :class:`Deny` wins and later policies are not consulted (so their
    rate limits are not spent). Otherwise the answer is :class:`Confirm` if any
    policy asked for confirmation, else :class:`Allow`; either way the
    capabilities are the *intersection* of what every policy granted, since
    execution may use only what all of them allowed, and the evidence is all of
    theirs.
    """

    __slots__ = ("policies",)

    def __init__(self, *policies: Policy) -> None:
        """Combine ``policies``; at least one, since none would allow everything."""
        if not policies:
            msg = "AllOf needs at least one policy"
            raise ConfigurationError(msg)
        self.policies = policies

    def authorize(self, request: AuthzRequest) -> Decision:
        """Deny on the first deny; else confirm if any confirms; else allow."""
        agreed: list[Allow | Confirm] = []
        for policy in self.policies:
            decision = policy.authorize(request)
            match decision:
                case Deny():
                    return decision
                case Allow() | Confirm():
                    agreed.append(decision)
                case _:
                    assert_never(decision)
        granted = frozenset.intersection(*(d.capabilities for d in agreed))
        evidence = tuple(e for d in agreed for e in d.evidence)
        confirms = [d.reason for d in agreed if isinstance(d, Confirm)]
        if confirms:
            return Confirm(capabilities=granted, reason="; ".join(confirms), evidence=evidence)
        return Allow(
            capabilities=granted, reason="; ".join(d.reason for d in agreed), evidence=evidence
        )


def authorize(policy: Policy, request: AuthzRequest) -> Decision:
    """Ask ``policy`` about ``request`` and hold the R6 invariants on its answer.

    * An answer granting a capability the spec does not list raises
      :class:`~toolbound.ConfigurationError` (code ``policy_overgrant``): execution
      must never hold more than the tool declares, and trimming silently would
      hide the bug.
    * An Allow or Confirm lacking a capability the spec lists becomes
      ``Deny(capability_missing)``: a tool runs with all its capabilities or not
      at all.
    * A policy that raises (a broken rule, a lookup that failed) denies with
      ``policy_failed``: authorization fails closed.
    """
    try:
        decision = policy.authorize(request)
    except ConfigurationError:
        raise
    except Exception as exc:  # noqa: BLE001 - fail closed, whatever broke
        return _deny(
            "policy_failed",
            f"the policy could not decide ({type(exc).__name__})",
            "Try again later, or ask the user.",
        )
    match decision:
        case Deny():
            return decision
        case Allow() | Confirm():
            required = tuple(dict.fromkeys(request.spec.capabilities))
            extra = decision.capabilities.difference(required)
            if extra:
                msg = (
                    f"policy {type(policy).__name__} granted {sorted(extra)} "
                    f"which {request.spec.ref} does not declare"
                )
                raise ConfigurationError(msg, code="policy_overgrant")
            for capability in required:
                if capability not in decision.capabilities:
                    return _capability_missing(request.spec, capability)
            return decision
        case _:
            assert_never(decision)

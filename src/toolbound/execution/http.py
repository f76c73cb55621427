"""HTTP endpoints as tools, on httpx (R8, R9, R10). Needs ``pip install 'toolbound[http]'``.

:class:`HttpTool` is a tool implementation — call it (sync) or register its
:meth:`HttpTool.acall` (async) — for one endpoint: a method, a URL template whose
``{placeholders}`` are filled from the arguments, and the arguments that go to the
query string or the JSON body. Two pure halves do the thinking and one thin layer
does the I/O:

* :meth:`HttpTool.prepare` builds an :class:`HttpRequest` from the arguments and the
  :class:`~toolbound.execution.tool.ToolContext`: the invocation's idempotency key as
  ``Idempotency-Key`` (R8), a W3C ``traceparent`` carrying the invocation's trace id
  (R14), and credentials from ``ctx.secrets`` (R6) — never from the arguments;
* :meth:`HttpTool.interpret` turns status, headers and body into a
  :class:`~toolbound.execution.tool.ToolOutput`, or raises the typed signal of
  :mod:`toolbound.execution.retry` that places the failure in the retry matrix (R10);
* httpx's own exceptions are mapped once, at this boundary (:func:`transport_failure`).

Where the request may go (:mod:`toolbound.execution.egress`): the URL template's
scheme, host and port are fixed, unless ``host_argument`` declares the argument that
is the host (authorize it with a ``DomainScope`` grant over
:class:`~toolbound.execution.egress.HostResource`). The clients the tool builds
connect through :func:`guarded_transport`: each host is resolved once, *every*
address is checked against the tool's :class:`~toolbound.execution.egress.EgressPolicy`,
and the connection goes to an address that passed — TLS SNI, certificate checks and
the ``Host`` header keep the original name. A refused destination raises
:class:`DestinationRefused` before any connection is opened: ``destination_refused``,
failed before commit, never retried. Redirects are not followed.

Status classes (:func:`classify_status`)::

    2xx                      success: ToolOutput, commit boundary crossed
    408 425 429 503          Transient (Retry-After kept): refused before any work
    500 502 504, other 5xx   write: MaybeCommitted (outcome unknown); read: Transient
    501 505                  BusinessRejection: will never work, however often tried
    401 403                  AuthFailed: never retried
    other 4xx, 1xx, 3xx      BusinessRejection with the service's own text, trimmed

Transport failures (:func:`transport_failure`)::

    destination refused by the egress policy                    NotCommitted (never retried)
    connect error / DNS, connect or pool timeout, proxy error   NotReached
    read/write timeout, dropped connection, bad response        write: ResponseLost
                                                                read: NoResponse

The httpx timeout for an attempt is ``ctx.deadline_in``. httpx applies it to each
phase (connect, each read), so the runtime's own deadline still bounds the whole.
"""

from __future__ import annotations

import json
import os
import re
import socket
import string
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from typing import TYPE_CHECKING, Final, Literal, Protocol, TypeAlias, assert_never
from urllib.parse import quote

from toolbound._clock import Clock, SystemClock
from toolbound._errors import ConfigurationError
from toolbound._model import WRITE_EFFECTS
from toolbound.execution.egress import EgressPolicy, destination_problem, host_text
from toolbound.execution.retry import (
    AuthFailed,
    BusinessRejection,
    MaybeCommitted,
    NoResponse,
    NotReached,
    ResponseLost,
    Transient,
)
from toolbound.execution.tool import CommitUnknown, NotCommitted, ToolContext, ToolOutput
from toolbound.results.redact import Redactor
from toolbound.trace import attempt_carrier, attempt_span

try:
    import anyio
    import httpcore
    import httpx
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.execution.http needs httpx: pip install 'toolbound[http]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from datetime import datetime

    from toolbound._model import EffectClass, JSONObject, JSONValue

__all__ = [
    "DestinationRefused",
    "HttpRequest",
    "HttpTool",
    "KeyAnswer",
    "KeyCommitted",
    "KeyNotFound",
    "KeyUnknown",
    "RequestHook",
    "Resolver",
    "StatusClass",
    "SystemResolver",
    "async_guarded_transport",
    "classify_status",
    "error_text",
    "guarded_transport",
    "parse_retry_after",
    "traceparent",
    "transport_failure",
]

StatusClass = Literal["transient", "maybe_committed", "auth", "business"]
"""The failure classes an HTTP status can put a call in (a subset of ``FailureClass``)."""

_BODYLESS: Final = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
_METHODS: Final = _BODYLESS | {"POST", "PUT", "PATCH"}
# 408: the server gave up waiting for the request; 425: it would not risk a replay;
# 429 / 503: it is refusing work for now. None of them did the work (R10).
_TRANSIENT: Final = frozenset({408, 425, 429, 503})
# 501 / 505: the server cannot do this at all; repeating never helps.
_NEVER: Final = frozenset({501, 505})
_TRACE_ID: Final = re.compile(r"[0-9a-f]{32}")
_ERROR_FIELDS: Final = ("message", "error_description", "detail", "title", "error")
_REDACTOR: Final = Redactor()


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpRequest:
    """One HTTP request, before any I/O: what :meth:`HttpTool.prepare` builds.

    ``url`` has its path filled in (and keeps any query string the template had);
    ``params`` are the query parameters added from the arguments, in order;
    ``content`` is the encoded body (``None`` for none).
    """

    method: str
    url: str
    params: tuple[tuple[str, str], ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    content: bytes | None = None

    def __repr__(self) -> str:
        # Headers may hold credentials: a repr lands in logs, so it names them only.
        return (
            f"HttpRequest(method={self.method!r}, url={self.url!r}, "
            f"params={self.params!r}, headers=<{', '.join(self.headers)}>)"
        )


RequestHook: TypeAlias = "Callable[[HttpRequest, JSONObject, ToolContext], HttpRequest]"
"""Reshapes the request :meth:`HttpTool.prepare` built, for anything custom (a
signature over the final body, an extra header). It runs last, so it sees the
standard headers; it must keep ``Idempotency-Key`` and ``traceparent``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyCommitted:
    """The service knows the key and the effect happened: here is its result."""

    kind: Literal["committed"] = "committed"
    value: JSONValue
    external_resource_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyNotFound:
    """The service has no record of the key: the effect did not happen.

    Proof only once the original request can no longer arrive (its attempt is over).
    """

    kind: Literal["not_found"] = "not_found"
    status: int = 404


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyUnknown:
    """The service could not say (unreachable, busy, an unexpected answer)."""

    kind: Literal["unknown"] = "unknown"
    reason: str


KeyAnswer: TypeAlias = KeyCommitted | KeyNotFound | KeyUnknown
"""What :meth:`HttpTool.query` learned about an idempotency key."""


# -- pure mapping functions -------------------------------------------------------------


def classify_status(status: int, *, write: bool) -> StatusClass | None:
    """The failure class of an HTTP status; ``None`` for success (2xx)."""
    if 200 <= status < 300:  # noqa: PLR2004 - the 2xx range
        return None
    if status in _TRANSIENT:
        return "transient"
    if status in {401, 403}:
        return "auth"
    if status in _NEVER:
        return "business"
    if 500 <= status < 600:  # noqa: PLR2004 - the 5xx range
        # A read changes nothing, so its 5xx is just "try later". A write's 500,
        # 502 or 504 may come after the commit (a crash, a gateway timing out on
        # a server that finished): R10 "decide whether it may have committed".
        return "maybe_committed" if write else "transient"
    return "business"


def parse_retry_after(value: str | None, *, now: datetime) -> float | None:
    """Retry-After (RFC 9110 §10.2.3) in seconds from ``now``; ``None`` if absent or bad.

    Accepts delay-seconds and HTTP-dates; a date in the past means 0.
    """
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": RFC 5322's "UTC, origin unknown"
        return None
    return max(0.0, (when - now).total_seconds())


def traceparent(trace_id: str, span_id: str | None = None) -> str | None:
    """A W3C ``traceparent`` (version 00, sampled) for ``trace_id``; ``None`` if invalid.

    A trace id that is not 32 hex digits (or is all zeros) would make the receiver
    discard the header and start a new trace anyway, so none is sent.
    """
    trace_id = trace_id.lower()
    if not _TRACE_ID.fullmatch(trace_id) or trace_id == "0" * 32:
        return None
    span = span_id or _span_id()
    return f"00-{trace_id}-{span}-01"


def _propagation(ctx: ToolContext, span_id: str | None) -> Mapping[str, str]:
    """The trace headers of one attempt's request (R14).

    The parent is the attempt's span when a telemetry sink opened one: the headers
    the deployment's propagators wrote for it (``traceparent``, ``tracestate``,
    baggage, or another format's), with a built-in ``traceparent`` naming that span
    when they wrote none. A ``traceparent`` of another trace than the invocation's
    is not sent: the built-in one is.
    """
    trace_id = ctx.invocation.trace_id.lower()
    parent = traceparent(trace_id, span_id or attempt_span(ctx.attempt_id))
    built_in = {} if parent is None else {"traceparent": parent}
    carrier = None if span_id is not None else attempt_carrier(ctx.attempt_id)
    if carrier is None:
        return built_in
    written = carrier.get("traceparent")
    if written is None:
        return {**carrier, **built_in}
    return carrier if f"-{trace_id}-" in written else built_in


def _span_id() -> str:
    while (span := os.urandom(8).hex()) == "0" * 16:  # all zeros is invalid (W3C)
        pass  # pragma: no cover - one chance in 2**64
    return span


def error_text(content: bytes, *, limit: int = 300) -> str:
    """The service's explanation from an error body, one line, at most ``limit`` chars.

    Looks for the usual JSON members (``message``, ``detail``, ``title``, ``error``…)
    and falls back to the body as text.
    """
    text = content.decode("utf-8", errors="replace")
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    found = _explanation(document)
    if found is not None:
        text = found
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "\u2026"


def _explanation(document: object) -> str | None:
    if not isinstance(document, dict):
        return None
    for name in _ERROR_FIELDS:
        member = document.get(name)
        if isinstance(member, str) and member.strip():
            return member
        if isinstance(member, dict):
            inner = _explanation(member)
            if inner is not None:
                return inner
        if isinstance(member, list) and member:
            # FastAPI / pydantic put a list of problems under "detail".
            return json.dumps(member, ensure_ascii=False, separators=(",", ":"))
    return None


def transport_failure(
    exc: httpx.HTTPError | httpx.InvalidURL,
    *,
    write: bool,
    evidence: Mapping[str, object] | None = None,
) -> NotCommitted | CommitUnknown:
    """The signal for an httpx exception raised while sending one request.

    Only failures that happen before a byte of the request can have left are
    ``NotReached``; anything later is commit-unknown for a write (R9: a lost
    response is never "not executed") and a plain re-readable failure for a read.
    """
    name = type(exc).__name__
    if isinstance(exc, DestinationRefused):
        # Not "not reached, try again": the same destination is refused every time.
        return NotCommitted(
            str(exc),
            code="destination_refused",
            recoverable=False,
            hint="This tool may not contact that destination; do not try other addresses. "
            "Tell the user it is not allowed.",
        )
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
        return NotReached(f"the service could not be reached ({name})")
    if isinstance(exc, httpx.ProxyError):
        return NotReached(f"the proxy would not connect to the service ({name})")
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.LocalProtocolError | httpx.InvalidURL):
        # Our request could not be sent at all: a bug in the tool's set-up, which
        # the same request will hit every time.
        return NotCommitted(
            f"the request could not be sent ({name})", code="invalid_request", recoverable=False
        )
    why = (
        "no response came in time"
        if isinstance(exc, httpx.TimeoutException)
        else f"the response was lost ({name})"
    )
    if write:
        return ResponseLost(
            f"the request was sent but {why}; it may have taken effect",
            evidence={**(evidence or {}), "error": name},
        )
    return NoResponse(f"the request was sent but {why}")


# -- egress: where a connection may go ------------------------------------------------


class DestinationRefused(httpx.TransportError):
    """The egress policy refused an address a host resolved to; nothing was connected."""

    def __init__(self, host: str, address: str, reason: str) -> None:
        where = address if host == address else f"{host} resolves to {address}, which"
        super().__init__(f"{where} is {reason}; the tool may not connect to it")
        self.host = host
        self.address = address
        self.reason = reason


class Resolver(Protocol):
    """Resolves a host name to the addresses a connection may use (raises ``OSError``)."""

    def resolve(self, host: str, port: int) -> Sequence[str]:
        """The addresses of ``host``, best first."""
        ...

    async def aresolve(self, host: str, port: int) -> Sequence[str]:
        """:meth:`resolve`, async."""
        ...


@dataclass(frozen=True, slots=True)
class SystemResolver:
    """The operating system's resolver (``getaddrinfo``); an IP literal resolves to itself."""

    def resolve(self, host: str, port: int) -> Sequence[str]:
        """The addresses of ``host``, in the order ``getaddrinfo`` gives them."""
        return _addresses(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))

    async def aresolve(self, host: str, port: int) -> Sequence[str]:
        """:meth:`resolve`, in a worker thread."""
        return _addresses(await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM))


def _addresses(infos: Iterable[tuple[object, ...]]) -> list[str]:
    found: dict[str, None] = {}
    for info in infos:
        sockaddr = info[4]
        if isinstance(sockaddr, tuple) and isinstance(sockaddr[0], str):
            found.setdefault(sockaddr[0], None)
    return list(found)


def _checked(policy: EgressPolicy, host: str, addresses: Sequence[str]) -> Sequence[str]:
    # Every address, not just the first: a name may answer a public address and a
    # private one, and the network stack would happily fall back to the second.
    if not addresses:
        msg = f"{host!r} resolves to no address"
        raise httpcore.ConnectError(msg)
    for address in addresses:
        reason = policy.refusal(host, address)
        if reason is not None:
            raise DestinationRefused(host, address, reason)
    return addresses


class _GuardedBackend(httpcore.NetworkBackend):
    """Resolves once, checks every address, connects to a checked address (sync)."""

    def __init__(
        self, policy: EgressPolicy, resolver: Resolver, network: httpcore.NetworkBackend
    ) -> None:
        self._policy = policy
        self._resolver = resolver
        self._network = network

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            found = self._resolver.resolve(host, port)
        except OSError as exc:
            msg = f"cannot resolve {host!r}: {exc}"
            raise httpcore.ConnectError(msg) from exc
        failure: Exception | None = None
        for address in _checked(self._policy, host, found):
            try:
                # httpcore still starts TLS with the URL's host as server name, so
                # SNI and certificate checks are for the name, not the address.
                return self._network.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure or httpcore.ConnectError(host)

    def sleep(self, seconds: float) -> None:
        self._network.sleep(seconds)


class _AsyncGuardedBackend(httpcore.AsyncNetworkBackend):
    """:class:`_GuardedBackend`, async."""

    def __init__(
        self, policy: EgressPolicy, resolver: Resolver, network: httpcore.AsyncNetworkBackend
    ) -> None:
        self._policy = policy
        self._resolver = resolver
        self._network = network

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                found = await self._resolver.aresolve(host, port)
        except TimeoutError as exc:
            msg = f"resolving {host!r} took too long"
            raise httpcore.ConnectTimeout(msg) from exc
        except OSError as exc:
            msg = f"cannot resolve {host!r}: {exc}"
            raise httpcore.ConnectError(msg) from exc
        failure: Exception | None = None
        for address in _checked(self._policy, host, found):
            try:
                return await self._network.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure or httpcore.ConnectError(host)

    async def sleep(self, seconds: float) -> None:
        await self._network.sleep(seconds)


# httpx's own default limits, which a bare httpcore pool does not share.
_LIMITS: Final = httpx.Limits(max_connections=100, max_keepalive_connections=20)


def _expect_pool(transport: object, kind: type) -> None:
    # Should a future httpx keep its pool elsewhere, replacing "_pool" would leave
    # the real pool unguarded: refuse to build the transport instead.
    if isinstance(getattr(transport, "_pool", None), kind):
        return
    msg = f"toolbound's egress guard does not support httpx {httpx.__version__}"
    raise ImportError(msg)


class _GuardedTransport(httpx.HTTPTransport):
    def __init__(self, backend: _GuardedBackend) -> None:
        ssl_context = httpx.create_ssl_context()
        # trust_env=False: an environment proxy would resolve and connect on its own,
        # past the check.
        super().__init__(verify=ssl_context, trust_env=False)
        # httpx offers no public way to give its pool a network backend; httpcore's
        # does. The pool httpx built (no sockets yet) is replaced by the same pool
        # over the guarded backend, and httpx's request/response and exception
        # mapping are kept as they are.
        _expect_pool(self, httpcore.ConnectionPool)
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            network_backend=backend,
            max_connections=_LIMITS.max_connections,
            max_keepalive_connections=_LIMITS.max_keepalive_connections,
            keepalive_expiry=_LIMITS.keepalive_expiry,
        )


class _AsyncGuardedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, backend: _AsyncGuardedBackend) -> None:
        ssl_context = httpx.create_ssl_context()
        super().__init__(verify=ssl_context, trust_env=False)
        _expect_pool(self, httpcore.AsyncConnectionPool)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            network_backend=backend,
            max_connections=_LIMITS.max_connections,
            max_keepalive_connections=_LIMITS.max_keepalive_connections,
            keepalive_expiry=_LIMITS.keepalive_expiry,
        )


def guarded_transport(
    policy: EgressPolicy,
    *,
    resolver: Resolver | None = None,
    network: httpcore.NetworkBackend | None = None,
) -> httpx.HTTPTransport:
    """An httpx transport that connects only where ``policy`` allows.

    Each new connection resolves its host once through ``resolver`` (the system's by
    default), raises :class:`DestinationRefused` if ``policy`` refuses *any* of the
    addresses, and otherwise connects to those addresses in order through
    ``network`` (httpcore's socket backend by default; tests pass a recording one).
    TLS is started with the URL's host name, so SNI and certificate verification are
    unchanged, and so is the ``Host`` header. Environment proxies are not used.
    Give it to your own client (``httpx.Client(transport=...)``) to guard it too:
    every redirect hop a client follows opens its connection here, so is checked.
    """
    backend = _GuardedBackend(
        policy, resolver or SystemResolver(), network or httpcore.SyncBackend()
    )
    return _GuardedTransport(backend)


def async_guarded_transport(
    policy: EgressPolicy,
    *,
    resolver: Resolver | None = None,
    network: httpcore.AsyncNetworkBackend | None = None,
) -> httpx.AsyncHTTPTransport:
    """:func:`guarded_transport`, for ``httpx.AsyncClient``."""
    backend = _AsyncGuardedBackend(
        policy, resolver or SystemResolver(), network or httpcore.AnyIOBackend()
    )
    return _AsyncGuardedTransport(backend)


# -- the tool -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpTool:
    """A tool implementation for one HTTP endpoint.

    ``url`` is a template: ``"https://api.example/orders/{order_id}"`` fills
    ``order_id`` from the arguments (percent-encoded; ``.``, ``..`` and empty values
    are refused). ``query_args`` / ``body_args`` name the arguments for the query
    string / JSON body; left ``None``, every argument not used elsewhere goes to the
    query for GET, HEAD, DELETE and OPTIONS, and to the body for POST, PUT and PATCH.

    ``effect`` must be the spec's effect class: a write's 5xx and lost responses are
    commit-unknown, a read's are not. ``bearer_secret`` names the secret sent as
    ``Authorization: Bearer …``; ``secret_headers`` maps other header names to secret
    names. Secrets come from ``ctx.secrets`` (so the spec must list them) and are
    redacted from every value and message the tool returns.

    ``resource_id_field`` names the member of a 2xx JSON object holding the created
    or changed resource's id; without it (or when absent) the ``Location`` header is
    used. ``query_url`` is a template with ``{key}`` for :meth:`query`.

    Where it may connect: ``url`` fixes the scheme, host and port, unless
    ``host_argument`` names the argument that is the host (``"https://{host}/v1"``;
    a plain DNS name or IP literal, checked again here). Give such a tool's spec
    ``resources=HostResource(host_argument, action)`` and grant it with a
    ``DomainScope``: that is what keeps the model to an allow-list of hosts. Whatever
    the host, the clients the tool builds refuse internal addresses
    (:func:`~toolbound.execution.egress.address_refusal`) unless ``egress`` allows
    them, after resolving the name once through ``resolver`` (see
    :func:`guarded_transport`).

    Without ``client`` / ``async_client`` each call opens and closes its own client;
    pass long-lived ones to reuse connections (the tool never closes them). A client
    you pass is yours, transport included: build it over :func:`guarded_transport`
    to keep the egress check.
    """

    method: str
    url: str
    effect: EffectClass
    query_args: tuple[str, ...] | None = None
    body_args: tuple[str, ...] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    bearer_secret: str | None = None
    secret_headers: Mapping[str, str] = field(default_factory=dict)
    idempotency_header: str = "Idempotency-Key"
    resource_id_field: str | None = None
    query_url: str | None = None
    build_request: RequestHook | None = field(default=None, compare=False)
    error_text_limit: int = 300
    client: httpx.Client | None = field(default=None, repr=False, compare=False)
    async_client: httpx.AsyncClient | None = field(default=None, repr=False, compare=False)
    clock: Clock = field(default_factory=SystemClock, repr=False, compare=False)
    host_argument: str | None = None
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    resolver: Resolver | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        method = self.method.upper()
        if method not in _METHODS:
            msg = f"HttpTool: unsupported method {self.method!r}"
            raise ConfigurationError(msg)
        object.__setattr__(self, "method", method)  # frozen: normalise once, here
        for name, template, host in (
            ("url", self.url, self.host_argument),
            ("query_url", self.query_url, None),
        ):
            problem = (
                None if template is None else destination_problem(template, host_argument=host)
            )
            if problem is not None:
                msg = f"HttpTool: {name} {problem}"
                raise ConfigurationError(msg)
        path = _placeholders(self.url)
        for names in (self.query_args or (), self.body_args or ()):
            clash = path.intersection(names)
            if clash:
                msg = f"HttpTool: {sorted(clash)} fill the URL path and cannot also be sent"
                raise ConfigurationError(msg)
        if self.query_url is not None and _placeholders(self.query_url) != {"key"}:
            msg = "HttpTool: query_url must have exactly one placeholder, {key}"
            raise ConfigurationError(msg)

    @property
    def is_write(self) -> bool:
        """Whether this endpoint changes state (from ``effect``)."""
        return self.effect in WRITE_EFFECTS

    # -- sans-IO halves: no network; only the injected clock ------------------------

    def prepare(
        self, arguments: JSONObject, ctx: ToolContext, *, span_id: str | None = None
    ) -> HttpRequest:
        """The request for one attempt; raises :class:`NotCommitted` for bad arguments."""
        path = _placeholders(self.url)
        rest = [name for name in arguments if name not in path]
        in_query = self._chosen(self.query_args, rest, self.body_args, natural=_BODYLESS)
        in_body = self._chosen(self.body_args, rest, self.query_args, natural=_METHODS - _BODYLESS)
        params = tuple(
            (name, text)
            for name in in_query
            if name in arguments
            for text in _query_values(arguments[name])
        )
        headers: dict[str, str] = {**self.headers, "Accept": "application/json"}
        content = None
        if self.method not in _BODYLESS or self.body_args is not None:
            body = {name: arguments[name] for name in in_body if name in arguments}
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
            headers["Content-Type"] = "application/json"
        headers.update(self._credentials(ctx.secrets))
        if ctx.idempotency_key is not None:
            headers[self.idempotency_header] = ctx.idempotency_key  # R8: the key travels
        headers.update(_propagation(ctx, span_id))
        request = HttpRequest(
            method=self.method,
            url=_fill(self.url, arguments, path, host=self.host_argument),
            params=params,
            headers=headers,
            content=content,
        )
        if self.build_request is not None:
            request = self.build_request(request, arguments, ctx)
        return request

    def interpret(
        self,
        status: int,
        headers: Mapping[str, str],
        content: bytes,
        ctx: ToolContext,
    ) -> ToolOutput:
        """The output of a 2xx answer; for any other status, raises its signal."""
        failure = classify_status(status, write=self.is_write)
        if failure is None:
            # R9: the service's 2xx is this tool's commit boundary.
            ctx.mark_committed()
            value = _scrub(_body_value(content), ctx.secrets)
            return ToolOutput(value=value, external_resource_id=self._resource_id(value, headers))
        said = _scrub(error_text(content, limit=self.error_text_limit), ctx.secrets)
        message = f"the service answered {status} {_phrase(status)}" + (f": {said}" if said else "")
        match failure:
            case "transient":
                after = parse_retry_after(_header(headers, "retry-after"), now=self.clock.now())
                raise Transient(message, status=status, retry_after=after)
            case "maybe_committed":
                maybe = f"{message}; the write may have taken effect"
                raise MaybeCommitted(
                    maybe,
                    status=status,
                    evidence=self._evidence(ctx, status=status),
                )
            case "auth":
                raise AuthFailed(message, status=status)
            case "business":
                raise BusinessRejection(message, status=status)
            case _:  # pragma: no cover - exhaustive
                assert_never(failure)

    # -- I/O ------------------------------------------------------------------------

    def __call__(self, arguments: JSONObject, ctx: ToolContext) -> ToolOutput:
        """Run one attempt (sync)."""
        request = self.prepare(arguments, ctx)
        timeout = _timeout(ctx)
        try:
            if self.client is not None:
                response = _send(self.client, request, timeout)
            else:
                with self._client() as client:
                    response = _send(client, request, timeout)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise self._failed(exc, ctx, request) from exc
        return self.interpret(response.status_code, response.headers, response.content, ctx)

    async def acall(self, arguments: JSONObject, ctx: ToolContext) -> ToolOutput:
        """Run one attempt (async): register ``tool.acall`` for the async path."""
        request = self.prepare(arguments, ctx)
        timeout = _timeout(ctx)
        try:
            if self.async_client is not None:
                response = await _asend(self.async_client, request, timeout)
            else:
                async with self._async_client() as client:
                    response = await _asend(client, request, timeout)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise self._failed(exc, ctx, request) from exc
        return self.interpret(response.status_code, response.headers, response.content, ctx)

    def query(
        self,
        key: str,
        *,
        secrets: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        trace_id: str | None = None,
    ) -> KeyAnswer:
        """Ask the service what became of idempotency key ``key`` (a GET to ``query_url``).

        For reconciliation (R9): 2xx → :class:`KeyCommitted` with the body, 404 →
        :class:`KeyNotFound`, anything else, a network failure included →
        :class:`KeyUnknown`. It never raises for the service's answers.
        """
        request = self._key_request(key, secrets or {}, trace_id)
        try:
            if self.client is not None:
                response = _send(self.client, request, timeout)
            else:
                with self._client() as client:
                    response = _send(client, request, timeout)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return KeyUnknown(reason=f"the service could not be asked ({type(exc).__name__})")
        return self._answer(response.status_code, response.headers, response.content, secrets)

    async def aquery(
        self,
        key: str,
        *,
        secrets: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        trace_id: str | None = None,
    ) -> KeyAnswer:
        """:meth:`query`, async."""
        request = self._key_request(key, secrets or {}, trace_id)
        try:
            if self.async_client is not None:
                response = await _asend(self.async_client, request, timeout)
            else:
                async with self._async_client() as client:
                    response = await _asend(client, request, timeout)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return KeyUnknown(reason=f"the service could not be asked ({type(exc).__name__})")
        return self._answer(response.status_code, response.headers, response.content, secrets)

    # -- helpers --------------------------------------------------------------------

    def _client(self) -> httpx.Client:
        # Redirects are not followed: a 3xx is the service's answer (a business
        # rejection), and no hop escapes the destination rules.
        transport = guarded_transport(self.egress, resolver=self.resolver)
        return httpx.Client(transport=transport, follow_redirects=False, trust_env=False)

    def _async_client(self) -> httpx.AsyncClient:
        transport = async_guarded_transport(self.egress, resolver=self.resolver)
        return httpx.AsyncClient(transport=transport, follow_redirects=False, trust_env=False)

    def _chosen(
        self,
        explicit: tuple[str, ...] | None,
        rest: list[str],
        other: tuple[str, ...] | None,
        *,
        natural: frozenset[str],
    ) -> tuple[str, ...]:
        if explicit is not None:
            return explicit
        if self.method not in natural:
            return ()
        taken = set(other or ())
        return tuple(name for name in rest if name not in taken)

    def _credentials(self, secrets: Mapping[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.bearer_secret is not None:
            out["Authorization"] = f"Bearer {_secret(secrets, self.bearer_secret)}"
        for header, name in self.secret_headers.items():
            out[header] = _secret(secrets, name)
        return out

    def _resource_id(self, value: JSONValue, headers: Mapping[str, str]) -> str | None:
        if self.resource_id_field is not None and isinstance(value, dict):
            found = value.get(self.resource_id_field)
            if isinstance(found, str | int) and not isinstance(found, bool):
                return str(found)
        return _header(headers, "location")

    def _evidence(self, ctx: ToolContext, **extra: object) -> dict[str, object]:
        # What a reconciler needs to ask the service later; no headers, no secrets.
        return {
            "method": self.method,
            "url": self.url,
            "idempotency_key": ctx.idempotency_key,
            "trace_id": ctx.invocation.trace_id,
            **extra,
        }

    def _failed(
        self, exc: httpx.HTTPError | httpx.InvalidURL, ctx: ToolContext, request: HttpRequest
    ) -> NotCommitted | CommitUnknown:
        evidence = self._evidence(ctx, traceparent=request.headers.get("traceparent"))
        return transport_failure(exc, write=self.is_write, evidence=evidence)

    def _key_request(
        self, key: str, secrets: Mapping[str, str], trace_id: str | None
    ) -> HttpRequest:
        if self.query_url is None:
            msg = "HttpTool.query needs query_url, a URL template with {key}"
            raise ConfigurationError(msg)
        headers: dict[str, str] = {**self.headers, "Accept": "application/json"}
        headers.update(self._credentials(secrets))
        parent = None if trace_id is None else traceparent(trace_id)
        if parent is not None:
            headers["traceparent"] = parent
        url = self.query_url.format(key=quote(key, safe=""))
        return HttpRequest(method="GET", url=url, headers=headers)

    def _answer(
        self,
        status: int,
        headers: Mapping[str, str],
        content: bytes,
        secrets: Mapping[str, str] | None,
    ) -> KeyAnswer:
        if 200 <= status < 300:  # noqa: PLR2004 - the 2xx range
            value = _scrub(_body_value(content), secrets or {})
            return KeyCommitted(value=value, external_resource_id=self._resource_id(value, headers))
        if status == HTTPStatus.NOT_FOUND:
            return KeyNotFound(status=status)
        return KeyUnknown(reason=f"the service answered {status} {_phrase(status)}")


# -- small private helpers ------------------------------------------------------------


def _placeholders(template: str) -> frozenset[str]:
    names: set[str] = set()
    for _, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            msg = f"URL template {template!r}: use plain {{name}} placeholders"
            raise ConfigurationError(msg)
        names.add(name)
    return frozenset(names)


def _fill(
    template: str, arguments: JSONObject, names: frozenset[str], *, host: str | None = None
) -> str:
    values: dict[str, str] = {}
    for name in names:
        value = arguments.get(name)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            msg = f"the argument {name!r} must be a string or number to fill the URL"
            raise NotCommitted(msg, code="invalid_argument")
        text = str(value)
        if name == host:
            # Not percent-encoded: checked to be a bare host name, so it can carry
            # no port, userinfo or path that would move the request elsewhere.
            filled = host_text(text)
            if filled is None:
                msg = f"the argument {name!r} must be a host name or IP address, got {text!r}"
                raise NotCommitted(msg, code="invalid_argument")
            values[name] = filled
            continue
        # Percent-encoding keeps "/" out, but "." and ".." survive it and would be
        # resolved as dot-segments: the call would reach another resource.
        if text in {"", ".", ".."}:
            msg = f"the argument {name!r} cannot be {text!r} in a URL path"
            raise NotCommitted(msg, code="invalid_argument")
        values[name] = quote(text, safe="")
    return template.format_map(values)


def _query_values(value: JSONValue) -> list[str]:
    if value is None:
        return []
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, list):
        return [text for item in value for text in _query_values(item)]
    if isinstance(value, dict):
        return [json.dumps(value, ensure_ascii=False, separators=(",", ":"))]
    return [str(value)]


def _secret(secrets: Mapping[str, str], name: str) -> str:
    try:
        return secrets[name]
    except KeyError:
        msg = f"the credential {name!r} is not available to this tool (list it in the spec)"
        raise NotCommitted(msg, code="secret_unavailable", recoverable=False) from None


def _scrub(value: JSONValue, secrets: Mapping[str, str]) -> JSONValue:
    # R6/R11: a service that echoes a credential back must not hand it to anyone.
    return _REDACTOR.redact(value, secrets=secrets, personal=False)[0]


def _body_value(content: bytes) -> JSONValue:
    if not content:
        return None
    text = content.decode("utf-8", errors="replace")
    try:
        value: JSONValue = json.loads(text)
    except ValueError:
        return text  # not JSON: the text itself; the output schema decides if that is fine
    return value


def _header(headers: Mapping[str, str], name: str) -> str | None:
    if isinstance(headers, httpx.Headers):  # case-insensitive already
        found: str | None = headers.get(name)
        return found
    return next((v for k, v in headers.items() if k.lower() == name), None)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _timeout(ctx: ToolContext) -> float:
    if ctx.deadline_in <= 0:
        msg = "the deadline passed before the request was sent"
        raise NotCommitted(msg, code="deadline_exceeded")
    return ctx.deadline_in


def _url(request: HttpRequest) -> httpx.URL:
    # Merged here, not through httpx's ``params=``: that would replace a query string
    # written into the URL template (``?version=2``) instead of adding to it.
    return httpx.URL(request.url).copy_merge_params(request.params)


def _send(client: httpx.Client, request: HttpRequest, timeout: float) -> httpx.Response:
    return client.request(
        request.method,
        _url(request),
        headers=dict(request.headers),
        content=request.content,
        timeout=timeout,
    )


async def _asend(client: httpx.AsyncClient, request: HttpRequest, timeout: float) -> httpx.Response:
    return await client.request(
        request.method,
        _url(request),
        headers=dict(request.headers),
        content=request.content,
        timeout=timeout,
    )

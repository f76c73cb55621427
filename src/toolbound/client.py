"""A Python client for toolbound's HTTP service, for agents in other processes.

``pip install 'toolbound[http]'`` (httpx). An agent submits the proposals its model
made, waits for a person's decision or the call's result, and reads traces; an
approver or operator decides (or corrects the arguments and approves) and reconciles,
all with typed answers::

    from toolbound.client import Client

    with Client("http://127.0.0.1:8780", api_key=AGENT_KEY) as tb:
        answer = tb.submit("notes.add", '{"text": "hi"}', call_id="call_1")
        if answer.status == "awaiting_confirmation":  # a person decides in the console
            answer = tb.wait(answer.invocation_id, timeout=600).answer

:class:`Client` blocks; :class:`AsyncClient` has the same methods as coroutines. Both
are thin drivers over one sans-IO core: each method is a :class:`_Request` built by a
pure function and an answer read by :func:`_read`, so the two cannot drift apart.

**Retries.** A request is sent again, with backoff, when it never reached the service
(a connection refused or reset before sending), and when the service says to try later:
503 and 429 (after their ``Retry-After``), and 409 ``request_in_progress`` for a
submission whose first attempt is still running. A submission keeps its
``Idempotency-Key`` on every attempt (made once, or the caller's), so the service runs
it once and answers a retry with the first answer (``replayed``). A decision, an edit
or a reconciliation is sent again only when it never reached the service. Every other
refusal raises :class:`ServiceError` at once, with the problem document's ``code``.

**Waiting.** :meth:`Client.wait` asks the service to answer once the call is settled
— no longer waiting for a person nor running — (``GET /v1/invocations/{id}?wait=``,
up to :data:`LONG_POLL` seconds a request, asked again until ``timeout`` passes:
:class:`TimeoutError`). No request is made while nothing happens.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal, Self
from urllib.parse import quote

from toolbound._errors import ToolboundError

try:
    import httpx
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    msg = "toolbound.client needs httpx: pip install 'toolbound[http]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import TracebackType

__all__ = [
    "AsyncClient",
    "CallAnswer",
    "Client",
    "Invocation",
    "ServiceError",
    "ServiceUnreachableError",
]

Status = Literal[
    "observed", "rejected", "awaiting_confirmation", "failed", "outcome_unknown", "cancelled"
]

# A call in these journal statuses is not settled yet: a person has not decided, or
# it is running (a decided call runs on until its answer is recorded).
_UNSETTLED = frozenset({"awaiting_confirmation", "running"})
# Refusals that say "the same request may succeed later".
_TRY_LATER = frozenset({429, 503})
_MAX_BACKOFF = 5.0
LONG_POLL: Final = 30.0
"""The longest one waiting request asks the service to hold on for (it allows 60)."""


class ServiceError(ToolboundError):
    """The service refused a request: its RFC 9457 problem document, typed.

    ``status`` is the HTTP status, ``code`` the catalogue's code (``not_pending``,
    ``digest_mismatch``, ``forbidden``…), ``problem`` the whole document.
    ``recoverable`` is true where the same request may succeed later (429, 503).
    """

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        hint: str | None = None,
        problem: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {detail}", code=code)
        self.status = status
        self.detail = detail
        self.hint = hint
        self.problem: Mapping[str, object] = problem or {}
        self.recoverable = status in _TRY_LATER


class ServiceUnreachableError(ToolboundError):
    """No answer came from the service, after every retry the request allowed.

    The request may or may not have reached it: a submission can be sent again with
    the same ``idempotency_key``, which the service answers once.
    """

    code = "service_unreachable"
    recoverable = True


@dataclass(frozen=True, slots=True, kw_only=True)
class CallAnswer:
    """A call's typed outcome as the service answers it (``POST /v1/proposals``).

    ``message`` is what goes back to the model, as untrusted data; ``problem`` why
    the call did not succeed; ``confirmation`` the digest, reason and expiry a person
    is asked about while ``status`` is ``awaiting_confirmation``. ``replayed`` is true
    when the service answered a repeated Idempotency-Key with the first answer.
    """

    invocation_id: str
    status: Status
    state: str
    digest: str | None
    message: str
    is_error: bool
    problem: Mapping[str, object] | None = None
    confirmation: Mapping[str, object] | None = None
    replayed: bool = False
    raw: Mapping[str, object] = field(default_factory=dict, repr=False)

    @property
    def handed_over(self) -> bool:
        """A decision recorded for the surface holding the call, which runs it (202)."""
        return self.raw.get("handed_over") is True

    @classmethod
    def of(cls, body: Mapping[str, object], *, replayed: bool = False) -> CallAnswer:
        """The answer in ``body``, a JSON object the service sent."""
        message = body.get("message")
        message = message if isinstance(message, dict) else {}
        return cls(
            invocation_id=str(body.get("invocation_id", "")),
            status=_status(body.get("status")),
            state=str(body.get("state", "")),
            digest=_text(body.get("digest")),
            message=str(message.get("content", "")),
            is_error=bool(message.get("is_error", False)),
            problem=_object(body.get("problem")),
            confirmation=_object(body.get("confirmation")),
            replayed=replayed,
            raw=body,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Invocation:
    """One call as the journal holds it (``GET /v1/invocations/{id}``).

    ``status`` is the journal's: a :data:`Status`, or ``running`` while a decided call
    runs on. ``answer`` is the latest outcome recorded, once there is one.
    """

    invocation_id: str
    tool: str | None
    subject: str | None
    status: str
    state: str | None
    digest: str | None
    decision: str | None
    approver: str | None
    answer: CallAnswer | None
    surface: str = "service"
    """Which surface parked or ran it: ``service``, ``mcp-gateway``, ``mcp-serve``, ``library``."""
    decidable: bool = True
    """In a listing of parked calls: whether a decision can land (false: its holder is gone)."""
    raw: Mapping[str, object] = field(default_factory=dict, repr=False)

    @property
    def settled(self) -> bool:
        """Neither waiting for a person nor running: the call's answer is final."""
        return self.status not in _UNSETTLED

    @classmethod
    def of(cls, body: Mapping[str, object]) -> Invocation:
        """The invocation in ``body``, a JSON object the service sent."""
        answer = _object(body.get("response"))
        return cls(
            invocation_id=str(body.get("invocation_id", "")),
            tool=_text(body.get("tool")),
            subject=_text(body.get("subject")),
            status=str(body.get("status", "")),
            state=_text(body.get("state")),
            digest=_text(body.get("digest")),
            decision=_text(body.get("decision")),
            approver=_text(body.get("approver")),
            answer=None if answer is None else CallAnswer.of(answer),
            surface=str(body.get("surface") or "service"),
            decidable=body.get("decidable") is not False,
            raw=body,
        )


# -- the sans-IO core: requests as values, answers read by one function -----------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Request:
    method: Literal["GET", "POST"]
    path: str
    body: Mapping[str, object] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    # Whether a request the service may have received can be sent again: true where
    # the service makes a repeat harmless (a read, an Idempotency-Key).
    repeatable: bool = True


def _submit(
    tool: str,
    arguments: str | bytes | Mapping[str, object],
    *,
    call_id: str,
    idempotency_key: str | None,
    model_call_id: str | None,
    timezone: str | None,
    context: Mapping[str, object] | None,
) -> _Request:
    body: dict[str, object] = {"tool": tool, "arguments": _text_of(arguments), "call_id": call_id}
    optional = {"model_call_id": model_call_id, "timezone": timezone, "context": context}
    body.update({k: v for k, v in optional.items() if v is not None})
    key = idempotency_key or f"{call_id}-{uuid.uuid4().hex}"
    return _Request(
        method="POST", path="/v1/proposals", body=body, headers={"Idempotency-Key": key}
    )


def _decide(invocation_id: str, *, digest: str, approve: bool, reason: str | None) -> _Request:
    body: dict[str, object] = {"digest": digest, "decision": "approve" if approve else "deny"}
    if reason is not None:
        body["reason"] = reason
    path = f"/v1/invocations/{_segment(invocation_id)}/decision"
    return _Request(method="POST", path=path, body=body, repeatable=False)


def _edit(
    invocation_id: str, *, digest: str, arguments: str | bytes | Mapping[str, object]
) -> _Request:
    body: dict[str, object] = {
        "digest": digest,
        "decision": "edit",
        "arguments": _text_of(arguments),
    }
    path = f"/v1/invocations/{_segment(invocation_id)}/decision"
    return _Request(method="POST", path=path, body=body, repeatable=False)


def _text_of(arguments: str | bytes | Mapping[str, object]) -> str:
    """Arguments as the JSON text the service parses: text as written, or an object's."""
    if isinstance(arguments, bytes):
        return arguments.decode("utf-8")
    if isinstance(arguments, str):
        return arguments  # the bytes as written: the service parses them strictly (R3)
    return json.dumps(arguments, ensure_ascii=False, allow_nan=False)


def _reconcile(
    invocation_id: str, *, committed: bool | None, evidence: Mapping[str, object] | None
) -> _Request:
    body: dict[str, object] = {}
    if committed is not None:
        body["committed"] = committed
    if evidence:
        body["evidence"] = dict(evidence)
    path = f"/v1/unknown/{_segment(invocation_id)}/reconcile"
    return _Request(method="POST", path=path, body=body, repeatable=False)


def _get(path: str) -> _Request:
    return _Request(method="GET", path=path)


def _segment(invocation_id: str) -> str:
    # An id is one path segment: nothing in it may reach another route.
    return quote(invocation_id, safe="")


def _read(response: httpx.Response) -> Mapping[str, object]:
    """The JSON object a successful answer carries, or :class:`ServiceError`."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code >= 400:  # noqa: PLR2004 - HTTP's own boundary
        problem = body if isinstance(body, dict) else {}
        raise ServiceError(
            response.status_code,
            str(problem.get("code") or f"http_{response.status_code}"),
            str(problem.get("detail") or response.reason_phrase),
            hint=_text(problem.get("hint")),
            problem=problem,
        )
    if not isinstance(body, dict):
        raise ServiceError(
            response.status_code, "bad_response", "the service's answer is not a JSON object"
        )
    return body


def _retry_after(response: httpx.Response | None, attempt: int, backoff: float) -> float | None:
    """Seconds to wait before sending the same request again, or ``None``: do not."""
    delay = min(_MAX_BACKOFF, backoff * 2.0**attempt)
    if response is None:
        return delay  # it never reached the service
    busy = response.status_code == 409 and _code(response) == "request_in_progress"  # noqa: PLR2004
    if response.status_code not in _TRY_LATER and not busy:
        return None
    header = response.headers.get("retry-after", "")
    if header.isdigit():
        return min(float(header), _MAX_BACKOFF * 2)
    return delay


def _code(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return _text(body.get("code")) if isinstance(body, dict) else None


def _wait_path(invocation_id: str) -> str:
    return f"/v1/invocations/{_segment(invocation_id)}"


def _waiting(invocation_id: str, left: float) -> _Request:
    """A read the service answers once the call is settled, or after ``left`` seconds."""
    seconds = max(0.001, min(LONG_POLL, left))
    return _get(f"{_wait_path(invocation_id)}?wait={seconds:.3f}")


# -- the drivers ------------------------------------------------------------------------


class _Settings:
    def __init__(self, base_url: str, api_key: str, retries: int, backoff: float) -> None:
        if retries < 0 or backoff < 0:
            msg = "retries and backoff must not be negative"
            raise ValueError(msg)
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}
        self.retries = retries
        self.backoff = backoff


class Client:
    """The service from a blocking program. Use it as a context manager, or :meth:`close` it.

    ``api_key`` is a principal's key (its role decides what it may do). ``timeout``
    bounds each HTTP request; ``retries`` and ``backoff`` (seconds, doubled each
    time, at most 5) govern the retries the module docstring lists. ``transport`` is
    httpx's, for tests or custom networking.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._settings = _Settings(base_url, api_key, retries, backoff)
        self._http = httpx.Client(
            base_url=self._settings.base_url,
            headers=self._settings.headers,
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def submit(
        self,
        tool: str,
        arguments: str | bytes | Mapping[str, object],
        *,
        call_id: str,
        idempotency_key: str | None = None,
        model_call_id: str | None = None,
        timezone: str | None = None,
        context: Mapping[str, object] | None = None,
    ) -> CallAnswer:
        """Run a proposal: ``arguments`` as the model wrote them (text), or an object.

        A call waiting for a person answers ``awaiting_confirmation``; :meth:`wait`
        for the decision. ``idempotency_key`` defaults to one made for this call.
        """
        request = _submit(
            tool,
            arguments,
            call_id=call_id,
            idempotency_key=idempotency_key,
            model_call_id=model_call_id,
            timezone=timezone,
            context=context,
        )
        response = self._send(request)
        replayed = response.headers.get("idempotent-replayed") == "true"
        return CallAnswer.of(_read(response), replayed=replayed)

    def invocation(self, invocation_id: str) -> Invocation:
        """One call as the journal holds it."""
        return Invocation.of(_read(self._send(_get(_wait_path(invocation_id)))))

    def wait(self, invocation_id: str, *, timeout: float = 300.0) -> Invocation:
        """The call once settled: decided and run, or denied, or ended otherwise.

        Raises ``TimeoutError`` when it is still unsettled after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            request = _waiting(invocation_id, left)
            call = Invocation.of(_read(self._send(request, extra=_held_for(request))))
            if call.settled:
                return call
            if deadline - time.monotonic() <= 0:
                msg = f"invocation {invocation_id} is still {call.status} after {timeout} s"
                raise TimeoutError(msg)

    def pending(self) -> list[Invocation]:
        """The calls of the caller's tenant waiting for a person."""
        body = _read(self._send(_get("/v1/confirmations")))
        return [Invocation.of(c) for c in _objects(body.get("confirmations"))]

    def decide(
        self, invocation_id: str, *, digest: str, approve: bool, reason: str | None = None
    ) -> CallAnswer:
        """Approve or deny a parked call, bound to the ``digest`` the person reviewed (R7).

        Needs the approver role. The answer is the call's outcome after the decision. A
        denial's ``reason`` is told to the model. A call another surface holds (the MCP
        gateway, a library program) runs there: the answer is then the call still
        ``awaiting_confirmation``, :attr:`CallAnswer.handed_over` true.
        """
        request = _decide(invocation_id, digest=digest, approve=approve, reason=reason)
        return CallAnswer.of(_read(self._send(request)))

    def edit(
        self,
        invocation_id: str,
        *,
        digest: str,
        arguments: str | bytes | Mapping[str, object],
    ) -> CallAnswer:
        """Correct a parked call's arguments, and approve the corrected call (R7).

        Needs the approver role; ``digest`` is the one the person reviewed. The
        corrected ``arguments`` (JSON text as written, or an object) are a new call in
        the parked one's place, through every gate again: the answer is the new call's
        outcome (its own ``invocation_id`` and digest). A call another surface holds
        (the MCP gateway, a library program) is corrected and run there: the answer is
        then the parked call still ``awaiting_confirmation``,
        :attr:`CallAnswer.handed_over` true. Text that does not parse is refused
        (422, the parse gate's code) and the call still waits. Like a decision, it is
        sent again only when it never reached the service; a repeat that did would be
        refused ``not_pending``, never run twice.
        """
        request = _edit(invocation_id, digest=digest, arguments=arguments)
        return CallAnswer.of(_read(self._send(request)))

    def unknown(self) -> list[Mapping[str, object]]:
        """The tenant's calls whose outcome is unknown (operator role)."""
        body = _read(self._send(_get("/v1/unknown")))
        return _objects(body.get("unknown"))

    def reconcile(
        self,
        invocation_id: str,
        *,
        committed: bool | None = None,
        evidence: Mapping[str, object] | None = None,
    ) -> Mapping[str, object]:
        """Settle an unknown outcome: ask the tool, or record a person's finding with evidence."""
        request = _reconcile(invocation_id, committed=committed, evidence=evidence)
        return _read(self._send(request))

    def trace(self, invocation_id: str) -> list[Mapping[str, object]]:
        """The call's append-only trace, event by event."""
        body = _read(self._send(_get(f"{_wait_path(invocation_id)}/trace")))
        return _objects(body.get("events"))

    def _send(self, request: _Request, *, extra: float = 0.0) -> httpx.Response:
        settings = self._settings
        for attempt in range(settings.retries + 1):
            try:
                response = self._http.request(
                    request.method,
                    request.path,
                    json=request.body,
                    headers=request.headers,
                    timeout=_longer(self._http.timeout, extra),
                )
            except httpx.TransportError as error:
                delay = _transport_retry(error, request, attempt, settings)
                time.sleep(delay)
                continue
            delay_or_none = _retry_after(response, attempt, settings.backoff)
            if delay_or_none is None or attempt == settings.retries:
                return response
            time.sleep(delay_or_none)
        msg = "unreachable: the last attempt returns or raises"
        raise AssertionError(msg)  # pragma: no cover


class AsyncClient:
    """:class:`Client` for asyncio programs: the same methods, as coroutines."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._settings = _Settings(base_url, api_key, retries, backoff)
        self._http = httpx.AsyncClient(
            base_url=self._settings.base_url,
            headers=self._settings.headers,
            timeout=timeout,
            transport=transport,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def submit(
        self,
        tool: str,
        arguments: str | bytes | Mapping[str, object],
        *,
        call_id: str,
        idempotency_key: str | None = None,
        model_call_id: str | None = None,
        timezone: str | None = None,
        context: Mapping[str, object] | None = None,
    ) -> CallAnswer:
        """:meth:`Client.submit`."""
        request = _submit(
            tool,
            arguments,
            call_id=call_id,
            idempotency_key=idempotency_key,
            model_call_id=model_call_id,
            timezone=timezone,
            context=context,
        )
        response = await self._send(request)
        replayed = response.headers.get("idempotent-replayed") == "true"
        return CallAnswer.of(_read(response), replayed=replayed)

    async def invocation(self, invocation_id: str) -> Invocation:
        """:meth:`Client.invocation`."""
        return Invocation.of(_read(await self._send(_get(_wait_path(invocation_id)))))

    async def wait(self, invocation_id: str, *, timeout: float = 300.0) -> Invocation:
        """:meth:`Client.wait`."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            request = _waiting(invocation_id, left)
            response = await self._send(request, extra=_held_for(request))
            call = Invocation.of(_read(response))
            if call.settled:
                return call
            if deadline - time.monotonic() <= 0:
                msg = f"invocation {invocation_id} is still {call.status} after {timeout} s"
                raise TimeoutError(msg)

    async def pending(self) -> list[Invocation]:
        """:meth:`Client.pending`."""
        body = _read(await self._send(_get("/v1/confirmations")))
        return [Invocation.of(c) for c in _objects(body.get("confirmations"))]

    async def decide(
        self, invocation_id: str, *, digest: str, approve: bool, reason: str | None = None
    ) -> CallAnswer:
        """:meth:`Client.decide`."""
        request = _decide(invocation_id, digest=digest, approve=approve, reason=reason)
        return CallAnswer.of(_read(await self._send(request)))

    async def edit(
        self,
        invocation_id: str,
        *,
        digest: str,
        arguments: str | bytes | Mapping[str, object],
    ) -> CallAnswer:
        """:meth:`Client.edit`."""
        request = _edit(invocation_id, digest=digest, arguments=arguments)
        return CallAnswer.of(_read(await self._send(request)))

    async def unknown(self) -> list[Mapping[str, object]]:
        """:meth:`Client.unknown`."""
        body = _read(await self._send(_get("/v1/unknown")))
        return _objects(body.get("unknown"))

    async def reconcile(
        self,
        invocation_id: str,
        *,
        committed: bool | None = None,
        evidence: Mapping[str, object] | None = None,
    ) -> Mapping[str, object]:
        """:meth:`Client.reconcile`."""
        request = _reconcile(invocation_id, committed=committed, evidence=evidence)
        return _read(await self._send(request))

    async def trace(self, invocation_id: str) -> list[Mapping[str, object]]:
        """:meth:`Client.trace`."""
        body = _read(await self._send(_get(f"{_wait_path(invocation_id)}/trace")))
        return _objects(body.get("events"))

    async def _send(self, request: _Request, *, extra: float = 0.0) -> httpx.Response:
        settings = self._settings
        for attempt in range(settings.retries + 1):
            try:
                response = await self._http.request(
                    request.method,
                    request.path,
                    json=request.body,
                    headers=request.headers,
                    timeout=_longer(self._http.timeout, extra),
                )
            except httpx.TransportError as error:
                delay = _transport_retry(error, request, attempt, settings)
                await asyncio.sleep(delay)
                continue
            delay_or_none = _retry_after(response, attempt, settings.backoff)
            if delay_or_none is None or attempt == settings.retries:
                return response
            await asyncio.sleep(delay_or_none)
        msg = "unreachable: the last attempt returns or raises"
        raise AssertionError(msg)  # pragma: no cover


def _transport_retry(
    error: httpx.TransportError, request: _Request, attempt: int, settings: _Settings
) -> float:
    """The wait before trying again after ``error``; raises it when that is not safe."""
    # A request that may have reached the service is sent again only where a repeat
    # is harmless; a refused connection never reached it.
    reached = not isinstance(error, httpx.ConnectError | httpx.ConnectTimeout)
    if attempt == settings.retries or (reached and not request.repeatable):
        msg = f"{request.method} {request.path}: {type(error).__name__}: {error}"
        raise ServiceUnreachableError(msg) from error
    return min(_MAX_BACKOFF, settings.backoff * 2.0**attempt)


# -- small pieces -----------------------------------------------------------------------


def _held_for(request: _Request) -> float:
    """How long the service may hold ``request`` before it answers (its ``wait``)."""
    _, _, query = request.path.partition("?wait=")
    return float(query) if query else 0.0


def _longer(timeout: httpx.Timeout, extra: float) -> httpx.Timeout:
    """``timeout`` with ``extra`` seconds more to read the answer: a held request's wait."""
    if not extra or timeout.read is None:
        return timeout
    return httpx.Timeout(
        connect=timeout.connect, read=timeout.read + extra, write=timeout.write, pool=timeout.pool
    )


def _status(value: object) -> Status:
    known: tuple[Status, ...] = (
        "observed",
        "rejected",
        "awaiting_confirmation",
        "failed",
        "outcome_unknown",
        "cancelled",
    )
    for status in known:
        if value == status:
            return status
    msg = f"the service answered an unknown status {value!r}"
    raise ServiceError(200, "bad_response", msg)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _object(value: object) -> Mapping[str, object] | None:
    return value if isinstance(value, dict) else None


def _objects(value: object) -> list[Mapping[str, object]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []

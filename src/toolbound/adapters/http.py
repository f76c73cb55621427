"""toolbound's own HTTP shapes: outcomes as JSON answers, errors as problem+json (R18).

Every HTTP endpoint toolbound serves answers in these shapes — the service's API and
console, and the confirmation endpoints beside an MCP endpoint — so they live here,
owned by neither surface::

    outcome_json(outcome)      a typed outcome → the JSON object an endpoint answers
    ApiError                   an answer that is an error: status, machine code, hint
    problem_response(error)    an ApiError → an RFC 9457 ``application/problem+json``
    decision_refused(exc)      a confirmation desk's refusal → the ApiError every
                               endpoint that takes decisions answers
    idempotency_key(header)    an Idempotency-Key header → the key, or a 400
    BodyLimit                  ASGI middleware: request bodies over a limit → 413

Like the provider adapters these are pure mappings; Starlette (the ``service`` and
``mcp`` extras) is imported only to build a response. :class:`BodyLimit` is plain
ASGI and imports nothing, so any ASGI endpoint can be wrapped in it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from toolbound._errors import ConfigurationError

if TYPE_CHECKING:
    from starlette.responses import Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from toolbound._errors import ConfirmationMismatch, Problem
    from toolbound._outcome import Outcome

__all__ = [
    "MAX_IDEMPOTENCY_KEY",
    "PROBLEM_JSON",
    "REASON_INPUT_CHARS",
    "ApiError",
    "BodyLimit",
    "BodyTooLarge",
    "decision_refused",
    "idempotency_key",
    "outcome_digest",
    "outcome_json",
    "problem_response",
    "reason_from",
    "send_problem",
]

PROBLEM_JSON = "application/problem+json"
MAX_IDEMPOTENCY_KEY = 255
"""The longest Idempotency-Key accepted, in characters."""


class ApiError(Exception):
    """An answer that is an error: HTTP status and a problem with a machine code."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        hint: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
        self.retry_after = retry_after
        """Seconds, sent as ``Retry-After`` (a 503's: when to try again)."""

    def problem(self) -> dict[str, object]:
        """RFC 9457 problem details, with toolbound's ``code``."""
        body: dict[str, object] = {
            "type": f"https://toolbound.dev/problems/{self.code}",
            "title": self.code.replace("_", " "),
            "status": self.status,
            "code": self.code,
            "detail": self.message,
        }
        if self.hint:
            body["hint"] = self.hint
        return body


def problem_response(error: ApiError) -> Response:
    """An :class:`ApiError` as problem+json."""
    from starlette.responses import JSONResponse  # noqa: PLC0415 - the service and mcp extras

    headers = None if error.retry_after is None else {"Retry-After": str(error.retry_after)}
    return JSONResponse(
        error.problem(), status_code=error.status, media_type=PROBLEM_JSON, headers=headers
    )


async def send_problem(send: Send, error: ApiError, *, close: bool = False) -> None:
    """Answer with ``error`` as problem+json on a raw ASGI ``send``.

    ``close`` asks the client to close the connection (the request body was not read).
    """
    body = json.dumps(error.problem(), separators=(",", ":")).encode()
    headers = [(b"content-type", PROBLEM_JSON.encode()), (b"content-length", b"%d" % len(body))]
    if close:
        headers.append((b"connection", b"close"))
    if error.retry_after is not None:
        headers.append((b"retry-after", str(error.retry_after).encode()))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def idempotency_key(header: str) -> str:
    r"""The key an ``Idempotency-Key`` header carries, or a 400 ``idempotency_key_invalid``.

    The IETF draft makes the header a structured-field string (RFC 8941 sf-string:
    ``"…"`` with ``\"`` and ``\\`` escapes, printable ASCII inside). Most clients send
    the characters bare, so a value without the opening quote is taken as they are.
    Either way the key is 1 to :data:`MAX_IDEMPOTENCY_KEY` printable ASCII characters.
    """
    key = _sf_string(header) if header.startswith('"') else header
    if key is None or not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY or not _printable_ascii(key):
        msg = (
            f"the Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII"
            " characters, bare or as a quoted structured-field string"
        )
        raise ApiError(400, "idempotency_key_invalid", msg, hint="send a UUID, for example")
    return key


def _printable_ascii(text: str) -> bool:
    return all(" " <= ch <= "~" for ch in text)


def _sf_string(value: str) -> str | None:
    """RFC 8941 section 4.2.5: a quoted string, or ``None`` if ``value`` is not exactly one."""
    out: list[str] = []
    chars = iter(value[1:])
    for ch in chars:
        if ch == "\\":
            escaped = next(chars, "")
            if escaped not in {'"', "\\"}:
                return None
            out.append(escaped)
        elif ch == '"':
            # The closing quote must end the value.
            return "".join(out) if next(chars, None) is None else None
        elif not _printable_ascii(ch):
            return None
        else:
            out.append(ch)
    return None  # no closing quote


class BodyTooLarge(Exception):  # noqa: N818 - a signal inside BodyLimit, not an error for users
    """Raised to the wrapped app when it reads past :class:`BodyLimit`'s limit."""


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` is answered 413, problem+json.

    A ``Content-Length`` over the limit is refused before the app runs. Otherwise the
    bytes are counted as the app receives them (chunked or streamed bodies too): the
    receive call that passes the limit raises :class:`BodyTooLarge` inside the app, the
    app's own answer is dropped, and the client gets ``413 request_too_large``. So no
    body larger than the limit (plus one chunk) is ever held in memory.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        if max_bytes < 1:
            msg = f"BodyLimit.max_bytes must be positive, got {max_bytes}"
            raise ConfigurationError(msg)
        self.app = app
        self.max_bytes = max_bytes

    def _refusal(self) -> ApiError:
        msg = f"the request body is larger than {self.max_bytes} bytes"
        return ApiError(413, "request_too_large", msg, hint="send a smaller request")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app with a counting ``receive``; refuse what passes the limit."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await send_problem(send, self._refusal(), close=True)
            return
        exchange = _Exchange(receive, send, self.max_bytes)
        try:
            await self.app(scope, exchange.receive, exchange.send)
        except Exception:
            if not exchange.refused:
                raise
        if exchange.refused:
            await exchange.refuse(self._refusal())


class _Exchange:
    """One request under a :class:`BodyLimit`: the bytes read so far, and the answer."""

    def __init__(self, receive: Receive, send: Send, max_bytes: int) -> None:
        self._receive = receive
        self._send = send
        self._max_bytes = max_bytes
        self.received = 0
        self.refused = self.started = self.finished = False

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self._max_bytes:
                self.refused = True
                raise BodyTooLarge(self._max_bytes)
        return message

    async def send(self, message: Message) -> None:
        if self.refused:
            return  # the app's answer to a body it could not read
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body"):
            self.finished = True
        await self._send(message)

    async def refuse(self, error: ApiError) -> None:
        if not self.started:
            await send_problem(self._send, error, close=True)
        elif not self.finished:
            # The app answered before reading everything: end its answer there.
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


def outcome_json(outcome: Outcome) -> dict[str, object]:
    """The typed outcome as the API answers it."""
    message = outcome.message
    answer: dict[str, object] = {
        "invocation_id": outcome.invocation_id,
        "call_id": outcome.proposal_id,
        "tool": outcome.tool,
        "status": outcome.kind,
        "state": outcome.state.value,
        "path": [s.value for s in outcome.path],
        "digest": outcome_digest(outcome),
        "trace_id": outcome.trace.trace_id,
        "message": {
            "content": message.text,
            "is_error": message.is_error,
            "truncated": message.truncated,
        },
    }
    problem: Problem | None = getattr(outcome, "problem", None)
    if problem is not None:
        answer["problem"] = problem.as_json()
    if outcome.kind == "awaiting_confirmation":
        answer["confirmation"] = {
            "digest": outcome.request.digest,
            "reason": outcome.request.reason,
            "expires_at": outcome.request.expires_at.isoformat(),
        }
    return answer


def outcome_digest(outcome: Outcome) -> str | None:
    """The digest of the outcome's invocation, if the call got that far."""
    invocation = getattr(outcome, "invocation", None)
    return None if invocation is None else str(invocation.digest)


_REFUSED: dict[str, tuple[int, str | None]] = {
    "not_pending": (409, None),
    "digest_mismatch": (409, "reload the call and review it again"),
    "four_eyes": (403, "ask another approver"),
    "holder_gone": (409, "the process that parked the call has stopped; it cannot run"),
    "confirmation_expired": (409, "the call can no longer run; the model must propose it again"),
}


REASON_INPUT_CHARS = 1000
"""The longest reason for a denial a person may send (the model is told the first
:data:`~toolbound.gates.confirm.REASON_CHARS` characters of it)."""


def reason_from(value: object, *, code: str = "bad_request_body") -> str | None:
    """A denial's reason as a request gives it: a string of bounded length, or none.

    Blank is none; anything but a string, or a longer one, is refused with ``code``.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, code, "reason must be a string")
    reason = value.strip()
    if len(reason) > REASON_INPUT_CHARS:
        raise ApiError(400, code, f"a reason is at most {REASON_INPUT_CHARS} characters")
    return reason or None


def decision_refused(exc: ConfirmationMismatch) -> ApiError:
    """The answer to a decision the confirmation desk refused; the call stays parked (R7)."""
    status, hint = _REFUSED.get(exc.code, (409, None))
    return ApiError(status, exc.code, str(exc), hint=hint)

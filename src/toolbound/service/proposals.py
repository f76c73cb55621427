"""``POST /v1/proposals``: a proposal in, its outcome or a refusal out (R8, R18).

The API's busiest route, answered the same way whichever way it is reached: through
the router like every other route, or — for a request that carries no cookie —
straight from the middleware in front of the router (:class:`ProposalsRoute`). That
request has nothing for the console's sessions, the router or Starlette's request
object to do, and the route's answer is the same either way: its headers, statuses,
problem documents, body limit (the middleware sits inside :class:`BodyLimit`) and
failures (inside Starlette's server-error handling) are those of the router's route.

The Idempotency-Key rules (IETF draft): 400 without one; the same key with another
body is 422; while the first request is still running, 409; after it, its answer
again with ``Idempotent-Replayed: true``. Only what began executing is kept under a
key, as Stripe and the draft do: a refusal before execution — a 400 body, a 401, a
403 — and a 503 keep nothing, so the request sent again once its cause is fixed runs.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from starlette.requests import ClientDisconnect
from starlette.responses import Response

from toolbound.access_log import note_principal
from toolbound.adapters.http import PROBLEM_JSON, ApiError, idempotency_key, problem_response
from toolbound.identity import TokenRefused
from toolbound.otel import propagation_scope
from toolbound.service.core import Submission, fingerprint
from toolbound.service.failures import RETRY_AFTER, unavailable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from starlette.types import ASGIApp, Receive, Scope, Send

    from toolbound.config import Principal
    from toolbound.journal import ClaimedRequest
    from toolbound.service.core import Service

__all__ = ["PATH", "Proposals", "ProposalsRoute", "principal_of", "request_headers"]

PATH = "/v1/proposals"
_STALE_REQUEST = 300.0  # seconds after which an unfinished Idempotency-Key is taken over


async def principal_of(service: Service, headers: Mapping[str, str]) -> Principal:
    """The principal behind the request's API key or bearer JWT, or a 401 saying why.

    ``headers``: the request's, looked up by lower-case name. An API key is looked up
    on the loop (a hash); a JWT is verified on the service's I/O pool, since its
    issuer's keys may have to be fetched.
    """
    header = headers.get("authorization", "")
    key = header[7:].strip() if header[:7].lower() == "bearer " else ""
    key = key or headers.get("x-api-key", "")
    if not key:
        # The API takes keys only; the console's session cookie never reaches /v1.
        raise ApiError(401, "unauthenticated", "send an API key: Authorization: Bearer KEY")
    principal = service.keys.principal(key)
    if principal is None:
        try:
            # A bearer JWT, or a key nobody has: the configuration says which and why.
            principal = await service.io(service.config.authenticate, key)
        except TokenRefused as refused:
            later = RETRY_AFTER if refused.status == 503 else None  # noqa: PLR2004
            raise ApiError(refused.status, refused.code, str(refused), retry_after=later) from None
    note_principal(principal)  # the access log names who called, never with what key
    return principal


def request_headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """An ASGI request's headers by name, decoded once.

    ASGI names are lower-case already; of a repeated header the first counts, as in
    Starlette's ``Headers.get``. The same mapping is the trace propagators' carrier.
    """
    headers: dict[str, str] = {}
    for name, value in raw:
        headers.setdefault(name.decode("latin-1"), value.decode("latin-1"))
    return headers


class Proposals:
    """The route's work, given the request's headers and a way to read its body."""

    def __init__(self, service: Service) -> None:
        self.service = service

    async def answer(
        self, headers: Mapping[str, str], body_of: Callable[[], Awaitable[bytes]]
    ) -> Response:
        """The response to one request; a refusal is a problem document.

        A store that cannot answer now is a 503 with ``Retry-After`` (:mod:`failures`).
        """
        try:
            return await self._submit(headers, body_of)
        except ApiError as error:
            return problem_response(error)
        except Exception as exc:
            down = unavailable(exc)
            if down is None:
                raise
            return problem_response(down)

    async def _submit(
        self, headers: Mapping[str, str], body_of: Callable[[], Awaitable[bytes]]
    ) -> Response:
        principal = await principal_of(self.service, headers)
        header = headers.get("idempotency-key")
        if header is None:
            raise ApiError(
                400,
                "idempotency_key_missing",
                "POST /v1/proposals needs an Idempotency-Key header",
                hint="send a unique key per request and the same key when you retry it",
            )
        key = idempotency_key(header)
        body = await body_of()
        print_ = fingerprint(body)
        try:
            submission = Submission.from_body(body)
        except ApiError:
            # Refused before it began executing: nothing is kept under the key (R8,
            # the IETF draft, Stripe). An earlier use of the key still answers.
            earlier = await self.service.io(
                self.service.journal.peek_request, principal.tenant, key, print_
            )
            if earlier is not None:
                return _answer_earlier(earlier)
            raise
        with propagation_scope(headers) as trace_id:
            if self.service.is_read(submission):
                return await self._read(principal, submission, key, print_, trace_id)
            return await self._write(principal, submission, key, print_, trace_id)

    async def _read(
        self,
        principal: Principal,
        submission: Submission,
        key: str,
        print_: str,
        trace_id: str | None,
    ) -> Response:
        """A read may run twice harmlessly: the key is claimed with its answer.

        In one transaction; a request that loses that race answers the winner's answer.
        The earlier answer's look-up and the run are one hop on the I/O pool.
        """

        def run() -> ClaimedRequest | tuple[int, str, ClaimedRequest | None]:
            earlier = self.service.journal.peek_request(principal.tenant, key, print_)
            if earlier is not None:
                return earlier
            return self.service.run_submission(
                principal, submission, trace_id=trace_id, request_key=key, fingerprint=print_
            )

        ran = await self.service.io(run)
        if not isinstance(ran, tuple):
            return _answer_earlier(ran)
        status, text, lost = ran
        if lost is not None:
            return _answer_earlier(lost)
        return Response(text, status_code=status, media_type="application/json")

    async def _write(
        self,
        principal: Principal,
        submission: Submission,
        key: str,
        print_: str,
        trace_id: str | None,
    ) -> Response:
        """A write claims its key first; the key keeps only what began executing."""
        io = self.service.io
        claim = await io(self._claim, principal, key, print_)
        if claim.kind != "new":
            return _answer_earlier(claim)
        try:
            status, text, _ = await self.service.submit(
                principal, submission, trace_id=trace_id, request_key=key
            )
        except BaseException:
            # A refusal before execution (a 403, a 400) or a failure: the key is freed,
            # so the request, sent again once its cause is fixed, runs (IETF draft). A
            # call that began executing keeps its ledger record, which keeps it from
            # running twice (R8).
            await asyncio.shield(io(self.service.journal.release_request, principal.tenant, key))
            raise
        return Response(text, status_code=status, media_type="application/json")

    def _claim(self, principal: Principal, key: str, print_: str) -> ClaimedRequest:
        """Claim ``key`` for this request (on the I/O pool: every step is a round trip)."""
        journal = self.service.journal
        claim = journal.claim_request(
            principal.tenant, key, print_, now=self.service.clock.now(), stale_after=_STALE_REQUEST
        )
        if claim.kind != "in_progress":
            return claim
        if self.service.settle_request(principal.tenant, key):
            # Its owner died: the call was settled just now, and the key has its answer.
            return journal.peek_request(principal.tenant, key, print_) or claim
        if journal.call_for_request(principal.tenant, key) is None:
            # Claimed, and no call recorded: a live claimant records its call right after
            # claiming, so one silent for a whole lease died between the two. Nothing
            # ran; this request takes the key over rather than wait out _STALE_REQUEST.
            claim = journal.claim_request(
                principal.tenant,
                key,
                print_,
                now=self.service.clock.now(),
                stale_after=self.service.lease.total_seconds(),
            )
        return claim


def _answer_earlier(claim: ClaimedRequest) -> Response:
    """What a request whose Idempotency-Key was used before gets (IETF draft)."""
    if claim.kind == "mismatch":
        msg = "this Idempotency-Key was used with another request body"
        raise ApiError(422, "idempotency_key_reused", msg)
    if claim.kind == "in_progress":
        msg = "a request with this Idempotency-Key is still being processed"
        raise ApiError(409, "request_in_progress", msg, hint="retry later")
    status = claim.status_code or 200
    return Response(
        claim.response,
        status_code=status,
        # A refusal is replayed as what it was: a problem document.
        media_type=PROBLEM_JSON if status >= 400 else "application/json",  # noqa: PLR2004
        headers={"Idempotent-Replayed": "true"},
    )


class ProposalsRoute:
    """ASGI middleware: ``POST /v1/proposals`` without a cookie, answered before the router.

    Everything else — other paths and methods, a mounted application (a root path),
    a request carrying a cookie, which the console's session middleware would read
    and renew — goes on to ``app``.
    """

    def __init__(self, app: ASGIApp, *, proposals: Proposals) -> None:
        self.app = app
        self.proposals = proposals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer the route, or hand the request on."""
        if (
            scope["type"] != "http"
            or scope["path"] != PATH
            or scope["method"] != "POST"
            or scope.get("root_path")
        ):
            await self.app(scope, receive, send)
            return
        headers = request_headers(scope["headers"])
        if "cookie" in headers:
            await self.app(scope, receive, send)
            return

        async def body() -> bytes:
            return await _read_body(receive)

        response = await self.proposals.answer(headers, body)
        await response(scope, receive, send)


async def _read_body(receive: Receive) -> bytes:
    """The whole request body, as Starlette's ``Request.body`` reads it."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
        elif message["type"] == "http.disconnect":
            raise ClientDisconnect

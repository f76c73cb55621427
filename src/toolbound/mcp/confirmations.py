"""Parked MCP calls, seen and decided over HTTP by a person with the approver role (R7, R18).

When the MCP client cannot ask a person (no elicitation, or ``confirm = "console"``),
a call that needs confirmation waits in the server's :class:`~toolbound.Runtime`.
:class:`ConfirmationEndpoint` lets approvers see and decide those calls from outside the
process, beside the MCP endpoint and with the same bearer tokens::

    GET  /confirmations                   {"confirmations": [request, …]}
    POST /confirmations/{invocation_id}   {"digest": "sha256:…", "decision": "approve" | "deny",
                                           "reason": "…"}   (a denial's, optional)
                                          → the outcome: status, state, message, problem

A denial's ``reason`` is told to the model as the approver's words (``denied_by_person``).

Who may decide: a ``[[principal]]`` with the ``approver`` role, only calls of its own
tenant (another tenant's calls are neither listed nor found), and — with
``[service] four_eyes = true`` — never a call made for its own subject. The decision
names the digest the person reviewed: another digest is refused and the call stays
parked; a decision consumes the parked call, so one confirmation approves one digest
once. Errors are ``application/problem+json`` with a machine ``code``:

=====================  ======  ==========================================================
``unauthenticated``    401     no bearer token, or one no principal holds
``token_*``            401     a JWT refused, and why (``toolbound.identity``)
``forbidden``          403     the principal lacks the approver role
``four_eyes``          403     the call was made for the approver's own subject
``not_pending``        404     no call of this tenant waits under that id (decided, or none)
``digest_mismatch``    409     the digest is not the call's: it stays parked
``not_pending``        409     decided by someone else while this decision was on its way
``bad_request_body``   400     the body is not strict JSON of the shape above
=====================  ======  ==========================================================
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Literal

from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from toolbound._errors import ConfirmationMismatch, Rejection
from toolbound.access_log import note_principal
from toolbound.adapters.http import (
    ApiError,
    decision_refused,
    outcome_json,
    problem_response,
    reason_from,
)
from toolbound.gates.parse import ParseLimits, parse_arguments
from toolbound.identity import TokenRefused
from toolbound.mcp.tokens import off_loop_if_fetching
from toolbound.pipeline.confirm import Approver, ConfirmationDesk

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request

    from toolbound._outcome import Outcome
    from toolbound.config import Principal, ServiceConfig
    from toolbound.gates.confirm import ConfirmationRequest
    from toolbound.pipeline.runtime import Runtime

__all__ = ["ConfirmationEndpoint", "Decision"]

Decision = Literal["approve", "deny"]

_BODY_LIMITS = ParseLimits(max_bytes=64 * 1024, max_depth=4)


class ConfirmationEndpoint:
    """The calls ``runtime`` holds for a person, as the approvers of each tenant decide them.

    The rules are the one :class:`~toolbound.pipeline.confirm.ConfirmationDesk`'s,
    over the calls the runtime holds; this class adds who may ask (bearer tokens,
    the approver role) and HTTP.

    ``principal_for`` maps a bearer token to its principal (the configuration's
    ``[[principal]]``, or a JWT ``[[identity.jwt]]`` trusts), returning ``None`` or
    raising :class:`~toolbound.identity.TokenRefused` for a token that names nobody. ``four_eyes``
    refuses a decision on a call made for the
    approver's own subject. ``timeout`` bounds an approved call from the moment it
    is approved. :meth:`pending` and :meth:`decide` are the operations; :meth:`routes`
    serves them over HTTP.
    """

    def __init__(
        self,
        runtime: Runtime,
        principal_for: Callable[[str], Principal | None],
        *,
        four_eyes: bool = False,
        timeout: float | None = None,
    ) -> None:
        self.runtime = runtime
        self.desk = ConfirmationDesk(runtime.desk.calls, four_eyes=four_eyes, clock=runtime.clock)
        self.timeout = timeout
        self._principal_for = principal_for

    @classmethod
    def for_service(cls, runtime: Runtime, service: ServiceConfig) -> ConfirmationEndpoint:
        """The endpoint a configuration describes: its principals, ``four_eyes`` and ``timeout``."""
        return cls(
            runtime,
            service.authenticate,
            four_eyes=service.four_eyes,
            timeout=service.timeout,
        )

    def pending(self, principal: Principal) -> list[ConfirmationRequest]:
        """The calls of ``principal``'s tenant waiting for a person, oldest first."""
        _require_approver(principal)
        self.runtime.pending()  # calls whose window closed end first
        return self.desk.pending(_approver(principal))

    async def decide(
        self,
        principal: Principal,
        invocation_id: str,
        *,
        digest: str,
        decision: Decision,
        reason: str | None = None,
    ) -> Outcome:
        """Approve (the call runs now, once) or deny the parked call shown by ``digest``.

        Raises :class:`~toolbound.adapters.http.ApiError` with the codes in the module
        docstring; a refused decision leaves the call parked.
        """
        _require_approver(principal)
        if all(p.invocation_id != invocation_id for p in self.pending(principal)):
            msg = f"no call {invocation_id} of tenant {principal.tenant} is waiting for a person"
            raise ApiError(404, "not_pending", msg)
        decide = functools.partial(
            self.desk.decide,
            invocation_id,
            digest=digest,
            approver=_approver(principal),
            approve=decision == "approve",
            at=self.runtime.clock.now(),
            ttl=self.runtime.confirmation_ttl,
            reason=reason,
        )
        try:
            # With a journal the decision is a compare-and-set there: off the loop.
            inline = self.runtime.inbox is None
            confirmation = decide() if inline else await self.runtime.off_loop(decide)
            # Decided elsewhere (another approver, the client's own elicitation)
            # meanwhile: the desk or the runtime refuses, and the call stays as it is.
            return await self.runtime.aconfirm(confirmation, timeout=self.timeout)
        except ConfirmationMismatch as exc:
            raise decision_refused(exc) from None

    # -- HTTP -----------------------------------------------------------------------------

    def routes(self) -> list[Route]:
        """``GET /confirmations`` and ``POST /confirmations/{invocation_id}``."""
        return [
            Route("/confirmations", self._answering(self._list), methods=["GET"]),
            Route(
                "/confirmations/{invocation_id}",
                self._answering(self._decide),
                methods=["POST"],
            ),
        ]

    def _answering(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except ApiError as error:
                response = problem_response(error)
                if error.code == "unauthenticated":
                    response.headers["www-authenticate"] = 'Bearer realm="toolbound"'
                return response

        return answer

    async def _list(self, request: Request) -> Response:
        principal = await self._authenticate(request)
        return JSONResponse({"confirmations": [p.as_json() for p in self.pending(principal)]})

    async def _decide(self, request: Request) -> Response:
        principal = await self._authenticate(request)
        _require_approver(principal)  # before the body is read: no probing without the role
        try:
            body = parse_arguments(await request.body(), _BODY_LIMITS)
        except Rejection as r:
            raise ApiError(400, "bad_request_body", r.problem.message) from None
        digest, decision = body.get("digest"), body.get("decision")
        if (
            not {"digest", "decision"} <= set(body) <= {"digest", "decision", "reason"}
            or not isinstance(digest, str)
            or decision not in {"approve", "deny"}
        ):
            msg = 'send {"digest": "<the digest you reviewed>", "decision": "approve" | "deny"}'
            raise ApiError(400, "bad_request_body", msg)
        # A reason sent with an approval is not a denial's: it is not kept.
        reason = reason_from(body.get("reason"))
        outcome = await self.decide(
            principal,
            request.path_params["invocation_id"],
            digest=digest,
            decision="approve" if decision == "approve" else "deny",
            reason=reason if decision == "deny" else None,
        )
        return JSONResponse(outcome_json(outcome))

    async def _authenticate(self, request: Request) -> Principal:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "unauthenticated", "send a token: Authorization: Bearer TOKEN")
        try:
            # A JWT's issuer may be slow: its wait is this request's, not the loop's.
            principal = await off_loop_if_fetching(self.runtime, self._principal_for, token.strip())
        except TokenRefused as refused:
            raise ApiError(refused.status, refused.code, str(refused)) from None
        if principal is None:
            raise ApiError(401, "unauthenticated", "unknown token")
        note_principal(principal)  # the access log names who called
        return principal


def _require_approver(principal: Principal) -> None:
    if "approver" not in principal.roles:
        msg = f"{principal.name} lacks the approver role"
        raise ApiError(403, "forbidden", msg)


def _approver(principal: Principal) -> Approver:
    return Approver(name=principal.name, subject=principal.subject, tenant=principal.tenant)

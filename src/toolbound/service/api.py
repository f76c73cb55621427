"""The HTTP API (Starlette): proposals in, typed outcomes out (R18).

Every request is authenticated by an API key (``Authorization: Bearer KEY`` or
``X-API-Key: KEY``, stored hashed in the configuration) or, when ``[[identity.jwt]]``
trusts an issuer, a bearer JWT it signed (:mod:`toolbound.identity`); either maps to
a subject, tenant and roles, and a refused token is a 401 naming why (``token_expired``,
``token_audience_invalid``...). ``POST /v1/proposals`` requires an ``Idempotency-Key`` (400
without one; the same key with another body is 422; while the first request is
still running, 409; after it, its answer again with ``Idempotent-Replayed: true``).
Every error is ``application/problem+json`` carrying toolbound's machine-readable
``code``: refusals of the handlers, a replayed refusal, a path or method the routes
do not know (404, 405), a body over ``[service] max_body_bytes`` (413, refused while
it is read) and an unexpected failure (500, naming no internals). ``GET
/openapi.json`` describes it all. ``POST /v1/proposals`` itself is
:mod:`toolbound.service.proposals`.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from toolbound._errors import Rejection
from toolbound.access_log import AccessLog
from toolbound.adapters.http import ApiError, BodyLimit, problem_response, reason_from
from toolbound.gates.parse import ParseLimits, parse_arguments
from toolbound.service import edits, waiting
from toolbound.service.decisions import decidable
from toolbound.service.failures import RETRY_AFTER, unavailable
from toolbound.service.openapi import METRICS_TYPE, OPENAPI
from toolbound.service.proposals import (
    PATH,
    Proposals,
    ProposalsRoute,
    principal_of,
    request_headers,
)
from toolbound.service.server import BodyTimeout

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from contextlib import AbstractAsyncContextManager

    from starlette.requests import Request
    from starlette.routing import BaseRoute

    from toolbound.config import Principal
    from toolbound.journal import Delivery, DeliveryAttempt, StoredCall
    from toolbound.ledger.store import LedgerRecord
    from toolbound.service.core import Service

__all__ = ["authenticate", "create_app"]

_log = logging.getLogger(__name__)
# Request bodies are bounded in bytes by BodyLimit; the parser bounds their nesting.
_BODY_LIMITS = ParseLimits(max_bytes=1 << 62)
# The members each body takes.
_DECISION_MEMBERS = frozenset({"digest", "decision", "reason", "arguments"})
_RECONCILE_MEMBERS = frozenset({"committed", "evidence"})
# What the router's own refusals are called.
_ROUTING_CODES = {404: "not_found", 405: "method_not_allowed"}


async def authenticate(service: Service, request: Request) -> Principal:
    """The principal behind the request's API key or bearer JWT, or a 401 saying why."""
    return await principal_of(service, request.headers)


def create_app(
    service: Service, *, extra_routes: list[Route] | None = None, console: bool = True
) -> Starlette:
    """The Starlette application for ``service``: the API, and the web console.

    The console (under ``/console``, :mod:`toolbound.service.console`) is mounted unless
    ``console=False``; its sessions are signed with the secret named by ``[service]
    console_secret_env``, or with a random one per process.
    """
    api = _Api(service)
    routes: list[BaseRoute] = [
        Route("/healthz", api.health, methods=["GET"]),
        Route("/readyz", api.ready, methods=["GET"]),
        Route("/openapi.json", api.openapi, methods=["GET"]),
        Route(PATH, api.submit, methods=["POST"]),
        Route("/v1/invocations", api.guarded(api.list_calls), methods=["GET"]),
        Route("/v1/invocations/{invocation_id}", api.guarded(api.get_call), methods=["GET"]),
        Route("/v1/invocations/{invocation_id}/trace", api.guarded(api.trace), methods=["GET"]),
        Route(
            "/v1/invocations/{invocation_id}/decision",
            api.guarded(api.decide),
            methods=["POST"],
        ),
        Route("/v1/confirmations", api.guarded(api.pending), methods=["GET"]),
        Route("/v1/events", api.guarded(api.events), methods=["GET"]),
        Route("/v1/webhooks/deliveries", api.guarded(api.deliveries), methods=["GET"]),
        Route("/v1/unknown", api.guarded(api.unknown), methods=["GET"]),
        Route("/metrics", api.guarded(api.metrics), methods=["GET"]),
        Route(
            "/v1/unknown/{invocation_id}/reconcile",
            api.guarded(api.reconcile),
            methods=["POST"],
        ),
        *(extra_routes or []),
    ]
    # Outermost: a body over the limit is refused before anything reads it. Then the
    # API's busiest route, which needs nothing of what follows (see ProposalsRoute).
    middleware = [
        Middleware(AccessLog),  # outermost of all: every request is logged, refused or not
        Middleware(BodyTimeout, seconds=service.config.body_timeout),
        Middleware(BodyLimit, max_bytes=service.config.max_body_bytes),
        Middleware(ProposalsRoute, proposals=api.proposals),
    ]
    if console:
        # Imported here: the console needs jinja2, the API alone does not.
        from toolbound.service.console import console_middleware, console_routes  # noqa: PLC0415
        from toolbound.service.console_tools import tool_review_routes  # noqa: PLC0415

        # The front door is the console, where people sign in.
        routes += [Route("/", _to_console, methods=["GET"]), *console_routes(service)]
        routes += tool_review_routes(service)
        middleware += console_middleware(
            service.config.console_secret(), https_only=service.config.cookie_secure
        )
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=_lifespan(service),
        exception_handlers={HTTPException: _routing_problem, Exception: _internal_problem},
    )
    app.state.service = service
    return app


async def _to_console(_request: Request) -> Response:
    return RedirectResponse("/console", status_code=303)


async def _routing_problem(_request: Request, exc: Exception) -> Response:
    """The router's 404 and 405 (and Starlette's own 400s) as problem+json."""
    assert isinstance(exc, HTTPException)  # noqa: S101 - registered for HTTPException
    code = _ROUTING_CODES.get(exc.status_code, "bad_request_body")
    error = ApiError(exc.status_code, code, exc.detail)
    response = problem_response(error)
    # Allow, on a 405.
    response.headers.update(exc.headers or {})
    return response


async def _internal_problem(_request: Request, exc: Exception) -> Response:
    """An unexpected failure: a 500 problem naming no internals (the server logs them).

    A store that cannot answer now is no such failure: it is a 503 with Retry-After.
    """
    error = unavailable(exc)
    if error is not None:
        return problem_response(error)
    msg = "the service failed to answer this request; it has been logged"
    return problem_response(ApiError(500, "internal_error", msg, hint="retry later"))


_PURGE_EVERY = 3600.0  # seconds between applications of the retention period
_WEBHOOK_EVERY = 1.0  # seconds between rounds of webhook deliveries
_READY_WAIT = 1.0  # seconds /readyz waits for the store


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _lifespan(service: Service) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        retention = asyncio.create_task(_retention(service))
        leases = asyncio.create_task(_leases(service))
        webhooks = asyncio.create_task(_webhook_rounds(service))
        try:
            yield
        finally:
            webhooks.cancel()
            leases.cancel()
            retention.cancel()
            # Off the loop: closing waits for the I/O pool's work, then closes the stores.
            await asyncio.to_thread(service.close)

    return lifespan


async def _retention(service: Service) -> None:
    """Apply ``[retention]`` at start and then hourly (never to parked or unknown calls).

    On the I/O pool, awaited: never running while the lifespan closes the store
    under it (the pool finishes its work before the stores close). A purge that
    fails (the store unreachable for a moment) is logged and tried next time.
    """
    while True:
        try:
            await service.io(service.purge)
        except Exception:  # noqa: BLE001 - the loop must outlive any one failure
            _log.exception("applying the retention period failed; trying again later")
        await asyncio.sleep(_PURGE_EVERY)


async def _webhook_rounds(service: Service) -> None:
    """Send ``[[webhook]]`` deliveries about once a second, on the I/O pool, if any."""
    webhooks = service.webhooks
    if webhooks is None:
        return
    while True:
        try:
            await service.io(webhooks.round)
        except Exception:  # noqa: BLE001 - the loop must outlive any one failure
            _log.exception("sending webhook deliveries failed; trying again")
        await asyncio.sleep(_WEBHOOK_EVERY)


async def _leases(service: Service) -> None:
    """Renew this process's leases, and take over calls whose owner's lease passed.

    Renewal every third of the lease, so two missed renewals still leave the calls
    this process's; a sweep every lease period (and at start, in ``Service``). The
    sweep runs beside the renewals, never in their way: a takeover may run a decided
    call's tool, for longer than a lease, and a process that stops renewing meanwhile
    loses the calls it still runs to another process. A renewal or sweep that fails
    (the store unreachable for a moment) is logged and tried again next period.
    """
    period = service.lease.total_seconds() / 3
    beat = 0
    sweep: asyncio.Future[None] | None = None
    while True:
        await asyncio.sleep(period)
        try:
            await service.io(service.renew)
        except Exception:  # noqa: BLE001 - the loop must outlive any one failure
            _log.exception("renewing this process's leases failed; trying again")
        beat += 1
        if beat % 3 == 0 and (sweep is None or sweep.done()):
            # Off the event loop, and not awaited here.
            sweep = asyncio.ensure_future(service.io(_sweep, service))


def _sweep(service: Service) -> None:
    try:
        service.recover()
    except Exception:  # noqa: BLE001 - the next sweep tries again
        _log.exception("taking over calls whose owner's lease passed failed; trying again")


class _Api:
    def __init__(self, service: Service) -> None:
        self.service = service
        self.proposals = Proposals(service)

    def guarded(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except ApiError as error:
                return problem_response(error)
            except Exception as exc:
                down = unavailable(exc)
                if down is None:
                    raise
                return problem_response(down)

        return run

    async def health(self, _request: Request) -> Response:
        # The instance is the owner name this process's calls carry in the journal.
        return JSONResponse({"status": "ok", "instance": self.service.instance_id})

    async def ready(self, _request: Request) -> Response:
        """Readiness: the store answers within a second; each identity provider's keys.

        200 while the store answers (an identity provider without keys makes the
        answer ``degraded``, not unready: API keys still work); 503 with Retry-After
        while it does not, so a balancer sends requests to other replicas. Liveness
        is ``/healthz``, which touches nothing.
        """
        try:
            await asyncio.wait_for(self.service.io(self.service.check_store), _READY_WAIT)
            store: dict[str, object] = {"status": "ok"}
        except TimeoutError:
            store = {"status": "unavailable", "error": f"no answer within {_READY_WAIT} s"}
        except Exception as exc:  # noqa: BLE001 - any failure is the answer here
            store = {"status": "unavailable", "error": _first_line(exc)}
        issuers = self.service.config.identity.status()
        up = store["status"] == "ok"
        keyless = any(i["status"] == "unavailable" for i in issuers)
        body = {
            "status": "unavailable" if not up else "degraded" if keyless else "ready",
            "instance": self.service.instance_id,
            "store": store,
            "identity": issuers,
        }
        if up:
            return JSONResponse(body)
        return JSONResponse(body, status_code=503, headers={"Retry-After": str(RETRY_AFTER)})

    async def openapi(self, _request: Request) -> Response:
        return JSONResponse(OPENAPI)

    async def metrics(self, request: Request) -> Response:
        principal = await authenticate(self.service, request)
        if "operator" not in principal.roles:
            raise ApiError(403, "forbidden", f"{principal.name} lacks the operator role")
        text = await self.service.io(self.service.metrics.exposition)
        return Response(text, media_type=METRICS_TYPE)

    async def submit(self, request: Request) -> Response:
        # A request with a cookie; the others are answered before the router.
        return await self.proposals.answer(request_headers(request.headers.raw), request.body)

    async def list_calls(self, request: Request) -> Response:
        principal = await authenticate(self.service, request)
        q = request.query_params
        try:
            limit = int(q.get("limit", "100"))
        except ValueError:
            raise ApiError(400, "bad_query", "limit must be an integer") from None
        calls = await self.service.io(
            self.service.calls,
            principal,
            status=q.get("status"),
            tool=q.get("tool"),
            subject=q.get("subject"),
            limit=limit,
        )
        return JSONResponse({"invocations": [summary(c) for c in calls]})

    async def get_call(self, request: Request) -> Response:
        principal = await authenticate(self.service, request)
        invocation_id = request.path_params["invocation_id"]
        wait = waiting.seconds(request, "wait", most=waiting.MAX_WAIT, default=None)
        if wait is None:
            call = await self.service.io(self.service.get, principal, invocation_id)
        else:
            call = await waiting.settled_call(self.service, principal, invocation_id, wait, request)
        return JSONResponse(detail(call))

    async def deliveries(self, request: Request) -> Response:
        principal = await authenticate(self.service, request)
        if "operator" not in principal.roles:
            raise ApiError(403, "forbidden", f"{principal.name} lacks the operator role")
        found = await self.service.io(
            self.service.journal.webhook_deliveries, tenant=principal.tenant
        )
        return JSONResponse({"deliveries": [delivery_json(d, a) for d, a in found]})

    async def events(self, request: Request) -> Response:
        principal = await authenticate(self.service, request)
        return await waiting.events(self.service, principal, request)

    async def trace(self, request: Request) -> Response:
        principal = await authenticate(self.service, request)
        invocation_id = request.path_params["invocation_id"]
        events = await self.service.io(self._events, principal, invocation_id)
        return JSONResponse({"invocation_id": invocation_id, "events": events})

    def _events(self, principal: Principal, invocation_id: str) -> list[dict[str, object]]:
        call = self.service.get(principal, invocation_id)
        return self.service.journal.events(call.invocation_id)

    async def decide(self, request: Request) -> Response:
        principal = await authenticate(self.service, request)
        body = await _json(request, _DECISION_MEMBERS)
        digest, decision = body.get("digest"), body.get("decision")
        # A tuple: the decision may be any JSON value, and an object is not hashable.
        if not isinstance(digest, str) or decision not in ("approve", "deny", "edit"):
            msg = (
                'send {"digest": "<the digest you reviewed>", "decision": "approve" | "deny"'
                ' | "edit"} (an edit with "arguments", the corrected JSON text)'
            )
            raise ApiError(400, "bad_request_body", msg)
        arguments = body.get("arguments")
        if (decision == "edit") != isinstance(arguments, str):
            msg = 'an edit, and only an edit, carries "arguments": the corrected JSON text'
            raise ApiError(400, "bad_request_body", msg)
        if decision == "edit":
            answer = await edits.edit(
                self.service,
                principal,
                request.path_params["invocation_id"],
                digest=digest,
                arguments=str(arguments),
            )
            return JSONResponse(answer, status_code=202 if answer.get("handed_over") else 200)
        # A reason sent with an approval is not a denial's: it is not kept, as in the console.
        reason = reason_from(body.get("reason"), code="bad_request_body")
        answer = await self.service.decide(
            principal,
            request.path_params["invocation_id"],
            digest=digest,
            decision="approve" if decision == "approve" else "deny",
            reason=reason if decision == "deny" else None,
        )
        # Recorded, and handed to the surface holding the call: it runs there.
        return JSONResponse(answer, status_code=202 if answer.get("handed_over") else 200)

    async def pending(self, request: Request) -> Response:
        principal = await authenticate(self.service, request)
        calls = await self.service.io(self.service.pending, principal)
        return JSONResponse({"confirmations": [waiting_json(c) for c in calls]})

    async def unknown(self, request: Request) -> Response:
        principal = await authenticate(self.service, request)
        records = await self.service.io(self.service.unknown, principal)
        return JSONResponse({"unknown": [unknown_json(r) for r in records]})

    async def reconcile(self, request: Request) -> Response:
        principal = await authenticate(self.service, request)
        body = await _json(request, _RECONCILE_MEMBERS) if await request.body() else {}
        committed = body.get("committed")
        evidence = body.get("evidence", {})
        if committed is not None and not isinstance(committed, bool):
            raise ApiError(400, "bad_request_body", "committed must be true or false")
        if not isinstance(evidence, dict):
            raise ApiError(400, "bad_request_body", "evidence must be an object")
        if committed is not None and not evidence:
            msg = "a person's finding needs evidence (what was checked, where)"
            raise ApiError(400, "evidence_missing", msg)
        answer = await self.service.io(
            self.service.reconcile,
            principal,
            request.path_params["invocation_id"],
            committed=committed,
            evidence=evidence,
        )
        return JSONResponse(answer)


async def _json(request: Request, members: frozenset[str]) -> dict[str, object]:
    """The body as one strict JSON object (the parse gate's rules) of ``members``, or a 400.

    A member the operation does not know is refused, never ignored: a misspelt
    ``"decison"`` must not leave a decision to its default.
    """
    try:
        body: dict[str, object] = dict(parse_arguments(await request.body(), _BODY_LIMITS))
    except Rejection as r:
        msg = f"the body must be a JSON object: {r.problem.message}"
        raise ApiError(400, "bad_request_body", msg) from None
    unknown = sorted(set(body) - members)
    if unknown:
        msg = f"unknown member(s) {unknown}: this body takes {sorted(members)}"
        raise ApiError(400, "bad_request_body", msg)
    return body


def summary(call: StoredCall) -> dict[str, object]:
    """One line of the invocation list."""
    return {
        "invocation_id": call.invocation_id,
        "tool": call.tool,
        "subject": call.subject,
        "status": call.status,
        "state": call.state,
        "digest": call.digest,
        "decision": call.decision,
        "approver": call.approver,
        "owner": call.owner,
        "surface": call.surface,
        "created_at": call.created_at.isoformat(),
        "updated_at": call.updated_at.isoformat(),
    }


def detail(call: StoredCall) -> dict[str, object]:
    """One invocation in full: request, answer, human evidence, confirmation."""
    body = {k: v for k, v in call.body.items() if k != "trace"}
    return {**summary(call), **body}


def waiting_json(call: StoredCall) -> dict[str, object]:
    """A parked call as the inbox lists it: in full, and whether a decision can land."""
    why = decidable(call)
    return {**detail(call), "decidable": why is None, **({} if why is None else {"why": why})}


def unknown_json(record: LedgerRecord) -> dict[str, object]:
    """A ledger record whose outcome is unknown."""
    return {
        "invocation_id": record.invocation_id,
        "tool": record.tool,
        "digest": record.digest,
        "subject": dict(record.subject),
        "phase": record.phase,
        "deadline": record.deadline.isoformat(),
        "updated_at": record.updated_at.isoformat(),
        "evidence": [dict(e) for e in record.evidence],
    }


def delivery_json(delivery: Delivery, attempts: list[DeliveryAttempt]) -> dict[str, object]:
    """One webhook delivery and every try of it, for operators."""
    return {
        "webhook": delivery.webhook,
        "webhook_id": delivery.message_id,
        "invocation_id": delivery.invocation_id,
        "kind": delivery.kind,
        "created_at": delivery.created_at.isoformat(),
        "delivered_at": None
        if delivery.delivered_at is None
        else delivery.delivered_at.isoformat(),
        "gave_up_at": None if delivery.gave_up_at is None else delivery.gave_up_at.isoformat(),
        "attempts": [
            {"n": a.n, "at": a.at.isoformat(), "status": a.status, "error": a.error}
            for a in attempts
        ],
    }

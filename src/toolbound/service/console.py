r"""The web console (R18): people confirm parked calls, read traces, settle unknowns.

Server-rendered pages under ``/console`` — Jinja2 templates shipped in the package,
one stylesheet and one small script, no build step — over the same
:class:`~toolbound.service.core.Service` the HTTP API calls, so the rules are the
API's: roles, tenant isolation, the digest a person saw (R7), the four-eyes rule::

    GET  /console/login                        an API key → a session for its principal
    POST /console/logout
    GET  /console/pending                      calls waiting for a person (refreshes itself)
    POST /console/invocations/{id}/decision    approve / deny the digest shown
    GET  /console/invocations                  filters, time range, search, pages
    GET  /console/invocations/{id}             evidence, request, trace timeline
    GET  /console/unknown                      outcome unknown: ask the tool, or record a finding
    POST /console/unknown/{id}/reconcile

An :class:`~toolbound.adapters.http.ApiError` renders as a page with its status and
machine-readable ``code``.

**Sessions.** Logging in records a session in the service's journal (the store every
replica shares; only a hash of its id) for 8 hours, and puts its random id and a
fingerprint of the principal's key in a cookie signed by Starlette's
``SessionMiddleware``: ``HttpOnly``, ``SameSite=Strict``, ``Path=/console`` (browsers
never send it to the API). Every request looks the session up, so logging out ends it
for good (a copy of the cookie is worth nothing after), ``toolbound revoke-sessions
NAME`` ends every session of a principal, and rotating or removing a principal's key
ends them too. The signing secret is random per process unless one is given, so a
restart logs everyone out, and **several replicas behind one address need the same
secret** (``console_middleware(secret=...)``) or sticky sessions.

**Forms.** Every POST, the login included, must carry the session's CSRF token.

**Untrusted text.** Arguments and results are written by a model or a remote system.
Everything is autoescaped, pages send a Content-Security-Policy that allows no inline
script, and invisible or direction-changing characters (bidi overrides, zero-width
characters, controls) are shown as ``\uXXXX`` escapes so text cannot disguise what a
person is asked to approve.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import secrets
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote, urlencode

import jinja2
from markupsafe import Markup, escape
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from toolbound._errors import ConfigurationError
from toolbound.access_log import note_principal
from toolbound.adapters.http import ApiError, reason_from
from toolbound.provenance.labels import Label, Source
from toolbound.service import edits
from toolbound.service.decisions import decidable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from typing import TypeAlias

    from starlette.datastructures import FormData
    from starlette.requests import Request

    from toolbound._model import ToolSpec
    from toolbound.config import Principal
    from toolbound.journal import StoredCall
    from toolbound.ledger.store import LedgerRecord
    from toolbound.service.core import Service

    _Handler: TypeAlias = Callable[[Request, Principal], Awaitable[Response]]

__all__ = ["CONSOLE_PATH", "console_middleware", "console_routes", "reveal"]

CONSOLE_PATH = "/console"
"""Where the console's pages live; the session cookie is scoped to it."""

_COOKIE = "toolbound_console"
_SESSION_SECONDS = 8 * 60 * 60
_MIN_SECRET = 16
# The invocation list: page sizes offered (the last is the bound), and how many of the
# journal's newest matches the time range and the text search look through.
_PAGE_SIZES = (25, 50, 100)
_SEARCHED = 1000
_FILTERS = ("status", "tool", "subject", "since", "until", "q")
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_HOUR_MINUTES = 60
# The statuses a call in the journal can have: the outcome kinds, and the service's own.
_STATUSES = (
    "awaiting_confirmation",
    "running",
    "observed",
    "rejected",
    "failed",
    "cancelled",
    "outcome_unknown",
    "reconciled_committed",
    "reconciled_not_committed",
    "interrupted",
)
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
        " connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# Characters that render as nothing, or reorder what follows them (R12: the human
# projection must show what the call will really do).
_HIDDEN = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})


def console_middleware(
    secret: bytes | None = None, *, https_only: bool = False
) -> list[Middleware]:
    """The session middleware the console needs.

    ``secret`` signs the session cookie; without one a random secret is made for this
    process. Replicas serving one console must share a secret (at least 16 bytes).
    ``https_only`` adds ``Secure`` to the cookie (set it behind TLS).
    """
    if secret is not None and len(secret) < _MIN_SECRET:
        msg = f"the console secret must be at least {_MIN_SECRET} bytes"
        raise ConfigurationError(msg)
    key = secret if secret is not None else secrets.token_bytes(32)
    return [
        Middleware(
            SessionMiddleware,
            secret_key=key.hex(),
            session_cookie=_COOKIE,
            max_age=_SESSION_SECONDS,
            path=CONSOLE_PATH,
            same_site="strict",
            https_only=https_only,
        )
    ]


def console_routes(service: Service, *, trace_url: str | None = None) -> list[BaseRoute]:
    """The console's pages and static files, under :data:`CONSOLE_PATH`.

    ``trace_url`` links each call's trace id to a tracing UI: a ``http(s)://`` URL
    with ``{trace_id}`` where the id goes, e.g.
    ``https://jaeger.example/trace/{trace_id}``. Without it, the service
    configuration's ``console_trace_url`` is used when it has one.
    """
    if trace_url is None:
        trace_url = service.config.console_trace_url
    console = _Console(service, _checked_trace_url(trace_url))
    at = CONSOLE_PATH
    return [
        Route(at, console.home, methods=["GET"]),
        Route(f"{at}/login", console.login_page, methods=["GET"]),
        Route(f"{at}/login", console.login, methods=["POST"]),
        Route(f"{at}/logout", console.guarded(console.logout, post=True), methods=["POST"]),
        Route(f"{at}/pending", console.guarded(console.pending), methods=["GET"]),
        Route(f"{at}/pending/list", console.guarded(console.pending_list), methods=["GET"]),
        Route(f"{at}/invocations", console.guarded(console.invocations), methods=["GET"]),
        Route(
            f"{at}/invocations/{{invocation_id}}",
            console.guarded(console.invocation),
            methods=["GET"],
        ),
        Route(
            f"{at}/invocations/{{invocation_id}}/decision",
            console.guarded(console.decide, post=True),
            methods=["POST"],
        ),
        Route(f"{at}/unknown", console.guarded(console.unknown), methods=["GET"]),
        Route(
            f"{at}/unknown/{{invocation_id}}/reconcile",
            console.guarded(console.reconcile, post=True),
            methods=["POST"],
        ),
        Mount(
            f"{at}/static",
            app=StaticFiles(packages=[("toolbound.service", "static")]),
            name="console-static",
        ),
    ]


def reveal(text: object) -> Markup:
    r"""``text`` escaped for HTML, with invisible and direction-changing characters shown.

    Each such character becomes its JSON escape (``\u202e``) in a ``<mark>``, so a
    person sees it; newlines and tabs stay as they are.
    """
    value = str(text)
    if value.replace("\n", "").replace("\t", "").isprintable():
        return escape(value)
    out: list[str] = []
    for ch in value:
        if ch in "\n\t" or unicodedata.category(ch) not in _HIDDEN:
            out.append(str(escape(ch)))
        else:
            code = json.dumps(ch)[1:-1]  # \uXXXX, or a surrogate pair beyond the BMP
            out.append(f'<mark class="hidden-char" title="U+{ord(ch):04X}">{code}</mark>')
    return Markup("".join(out))  # noqa: S704 - every piece was escaped above


def editable(value: object) -> str:
    r"""``value`` as JSON text for a person to edit, invisible characters written out.

    Invisible and direction-changing characters inside strings become their JSON
    escapes (``\u202e``): the text means the same value, and nothing in it is hidden
    from the person editing it (see :func:`reveal`).
    """
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return "".join(
        json.dumps(ch)[1:-1] if ch not in "\n\t" and unicodedata.category(ch) in _HIDDEN else ch
        for ch in text
    )


async def _edit(
    service: Service,
    request: Request,
    principal: Principal,
    invocation_id: str,
    *,
    digest: str,
    form: FormData,
) -> Response:
    """Edit, then approve: the corrected call runs in the shown one's place (R7)."""
    arguments = form.get("arguments")
    if not isinstance(arguments, str) or not arguments.strip():
        raise ApiError(400, "bad_form", "send the corrected arguments as JSON")
    answer = await edits.edit(service, principal, invocation_id, digest=digest, arguments=arguments)
    if answer.get("handed_over"):
        where = f"the {answer['surface']} process holding the call"
        _flash(request, "ok", f"Edited and approved. The edit was passed to {where}.")
        return _redirect(f"{CONSOLE_PATH}/invocations/{quote(invocation_id, safe='')}")
    message = f"Edited and approved. The corrected call ended {answer['status']}."
    _flash(request, "ok", message)
    replacement = str(answer["invocation_id"])
    return _redirect(f"{CONSOLE_PATH}/invocations/{quote(replacement, safe='')}")


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("toolbound.service", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["reveal"] = reveal
    return Jinja2Templates(env=env)


def _checked_trace_url(template: str | None) -> str | None:
    if template is None:
        return None
    if not template.startswith(("https://", "http://")) or "{trace_id}" not in template:
        msg = (
            "the console's trace URL must be an http(s) URL with {trace_id} where the id"
            f" goes, e.g. https://jaeger.example/trace/{{trace_id}}; got {template!r}"
        )
        raise ConfigurationError(msg)
    return template


class _Console:
    def __init__(self, service: Service, trace_url: str | None) -> None:
        self.service = service
        self.trace_url = trace_url
        self.templates = _templates()

    # -- plumbing -----------------------------------------------------------------

    def guarded(
        self, handler: _Handler, *, post: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        """Log-in, CSRF (on POST) and error pages around one page handler."""

        async def run(request: Request) -> Response:
            try:
                if post:
                    await _check_csrf(request)
                principal = await self.service.io(self.principal, request)
                if principal is None:
                    back = (
                        request.url.path if request.method == "GET" else f"{CONSOLE_PATH}/pending"
                    )
                    return _redirect(f"{CONSOLE_PATH}/login?{urlencode({'next': back})}")
                return await handler(request, principal)
            except ApiError as error:
                return await self.error(request, error)

        return run

    def principal(self, request: Request) -> Principal | None:
        """The principal this session logged in as, while the session lives and its key holds.

        The session is looked up in the journal on every request: one that was logged
        out or revoked (in any replica) is over, whatever cookie comes with it.
        """
        session = request.session
        sid, binding = session.get("sid"), session.get("key")
        if not isinstance(sid, str) or not isinstance(binding, str):
            return None
        name = self.service.journal.session_principal(sid, now=self.service.clock.now())
        found = next((p for p in self.service.config.principals if p.name == name), None)
        if found is None or not hmac.compare_digest(binding, _key_binding(found)):
            return None
        note_principal(found)  # the access log names who called
        return found

    def render(
        self,
        request: Request,
        template: str,
        principal: Principal | None,
        *,
        status: int = 200,
        fragment: bool = False,
        **context: object,
    ) -> Response:
        # A fragment (the refreshing list) must not consume a notice meant for a page.
        flash = None if fragment or "flash" not in request.session else request.session.pop("flash")
        base: dict[str, object] = {
            "base": CONSOLE_PATH,
            "principal": principal,
            "roles": ", ".join(sorted(principal.roles)) if principal else "",
            "csrf": _csrf_token(request),
            "flash": flash,
            "section": "",
            # The gateway's quarantined tools, for operators when the file is named.
            "reviews_tools": principal is not None
            and "operator" in principal.roles
            and self.service.config.tool_approvals is not None,
        }
        response = self.templates.TemplateResponse(
            request, template, {**base, **context}, status_code=status
        )
        response.headers.update(_HEADERS)
        return response

    async def error(self, request: Request, error: ApiError) -> Response:
        principal = await self.service.io(self.principal, request)
        invocation_id = request.path_params.get("invocation_id")
        return self.render(
            request,
            "error.html",
            principal,
            status=error.status,
            error=error,
            back=(
                f"{CONSOLE_PATH}/invocations/{quote(invocation_id, safe='')}"
                if isinstance(invocation_id, str) and error.code != "not_found"
                else None
            ),
        )

    # -- log in and out -------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        if await self.service.io(self.principal, request) is None:
            return _redirect(f"{CONSOLE_PATH}/login")
        return _redirect(f"{CONSOLE_PATH}/pending")

    async def login_page(self, request: Request) -> Response:
        return self.render(
            request, "login.html", None, next=_safe_next(request.query_params.get("next"))
        )

    async def login(self, request: Request) -> Response:
        try:
            await _check_csrf(request)
        except ApiError as error:
            return await self.error(request, error)
        form = await request.form()
        key, target = form.get("key"), _safe_next(form.get("next"))
        principal = self.service.config.principal_for(key) if isinstance(key, str) else None
        if principal is None:
            return self.render(
                request,
                "login.html",
                None,
                status=401,
                next=target,
                failed="unknown API key",
            )
        # A fresh session on every log-in: nothing from before it (token included) survives.
        await self.service.io(self._end_session, request)
        sid = secrets.token_urlsafe(32)
        now = self.service.clock.now()
        await self.service.io(
            self.service.journal.open_session,
            sid,
            principal.name,
            now=now,
            expires_at=now + timedelta(seconds=_SESSION_SECONDS),
        )
        request.session.update(
            {"sid": sid, "key": _key_binding(principal), "csrf": secrets.token_urlsafe(32)}
        )
        return _redirect(target)

    async def logout(self, request: Request, _principal: Principal) -> Response:
        await self.service.io(self._end_session, request)
        return _redirect(f"{CONSOLE_PATH}/login")

    def _end_session(self, request: Request) -> None:
        """End the session on the server (a kept copy of the cookie dies too), then clear it."""
        sid = request.session.get("sid")
        if isinstance(sid, str):
            self.service.journal.end_session(sid)
        request.session.clear()

    # -- confirmations --------------------------------------------------------------

    async def pending(self, request: Request, principal: Principal) -> Response:
        calls = await self.service.io(self._pending, principal)
        return self.render(
            request,
            "pending.html",
            principal,
            section="pending",
            calls=calls,
            ids=" ".join(str(c["id"]) for c in calls),
        )

    async def pending_list(self, request: Request, principal: Principal) -> Response:
        calls = await self.service.io(self._pending, principal)
        return self.render(
            request,
            "_pending_list.html",
            principal,
            fragment=True,
            calls=calls,
            ids=" ".join(str(c["id"]) for c in calls),
        )

    def _pending(self, principal: Principal) -> list[dict[str, object]]:
        return [self._confirmation_view(principal, c) for c in self.service.pending(principal)]

    async def decide(self, request: Request, principal: Principal) -> Response:
        form = await request.form()
        digest, choice = form.get("digest"), form.get("decision")
        if not isinstance(digest, str) or not digest or choice not in {"approve", "deny", "edit"}:
            msg = "send the digest you reviewed and a decision, approve, deny or edit"
            raise ApiError(400, "bad_form", msg)
        invocation_id = request.path_params["invocation_id"]
        if choice == "edit":
            return await _edit(
                self.service, request, principal, invocation_id, digest=digest, form=form
            )
        decision: Literal["approve", "deny"] = "approve" if choice == "approve" else "deny"
        # A reason typed before an approval is not a denial's.
        given = reason_from(form.get("reason"), code="bad_form")
        answer = await self.service.decide(
            principal,
            invocation_id,
            digest=digest,
            decision=decision,
            reason=given if decision == "deny" else None,
        )
        verb = "Approved" if decision == "approve" else "Denied"
        if answer.get("handed_over"):
            where = f"the {answer['surface']} process holding the call"
            _flash(request, "ok", f"{verb}. The decision was passed to {where}.")
        else:
            ended = f"{answer['status']} ({answer['state']})"
            _flash(request, "ok", f"{verb}. The call ended {ended}.")
        return _redirect(f"{CONSOLE_PATH}/invocations/{quote(invocation_id, safe='')}")

    # -- invocations --------------------------------------------------------------

    async def invocations(self, request: Request, principal: Principal) -> Response:
        q = request.query_params
        filters = {k: (q.get(k) or "").strip() for k in _FILTERS}
        since, until = _instant(filters, "since"), _instant(filters, "until")
        per = _whole(q.get("per"), default=_PAGE_SIZES[0], low=1, high=_PAGE_SIZES[-1])
        # The journal filters status, tool and subject; the time range and the text
        # search run here, over its newest matches (the journal bounds one listing).
        calls = await self.service.io(
            self.service.calls,
            principal,
            status=filters["status"] or None,
            tool=filters["tool"] or None,
            subject=filters["subject"] or None,
            limit=_SEARCHED,
        )
        needle = filters["q"].casefold()
        matched = [
            c
            for c in calls
            if (since is None or c.created_at >= since)
            and (until is None or c.created_at < until)
            and (not needle or needle in _argument_text(c))
        ]
        pages = max(1, math.ceil(len(matched) / per))
        page = _whole(q.get("page"), default=1, low=1, high=pages)
        shown = matched[(page - 1) * per : page * per]
        kept = {k: v for k, v in filters.items() if v}
        if per != _PAGE_SIZES[0]:
            kept["per"] = str(per)

        def at(number: int) -> str:
            return f"{CONSOLE_PATH}/invocations?{urlencode({**kept, 'page': number})}"

        return self.render(
            request,
            "invocations.html",
            principal,
            section="invocations",
            calls=[_summary(c) for c in shown],
            filters=filters,
            statuses=_STATUSES,
            tools=sorted(t.spec.ref for t in self.service.registry),
            per=per,
            page_sizes=_PAGE_SIZES,
            page=page,
            pages=pages,
            matched=len(matched),
            first=(page - 1) * per + 1 if shown else 0,
            last=(page - 1) * per + len(shown),
            truncated=len(calls) >= _SEARCHED,
            searched=_SEARCHED,
            previous=at(page - 1) if page > 1 else None,
            next=at(page + 1) if page < pages else None,
        )

    async def invocation(self, request: Request, principal: Principal) -> Response:
        call, events = await self.service.io(
            self._call_and_events, principal, request.path_params["invocation_id"]
        )
        pending = call.status == "awaiting_confirmation" and call.decision is None
        human = _mapping(call.body.get("human"))
        asked = _mapping(call.body.get("confirmation"))
        arguments = human.get("arguments") or asked.get("arguments")
        if arguments is None:
            arguments = _loads(
                str(_mapping(call.body.get("request")).get("arguments", "")).encode()
            )
        return self.render(
            request,
            "invocation.html",
            principal,
            section="invocations",
            call=_detail(call, events, shown_arguments=arguments),
            trace=self._trace_link(call),
            parameters=self._parameters(
                call.tool, arguments, human.get("evidence") or asked.get("evidence")
            ),
            pending=self._confirmation_view(principal, call) if pending else None,
        )

    def _call_and_events(
        self, principal: Principal, invocation_id: str
    ) -> tuple[StoredCall, list[dict[str, object]]]:
        call = self.service.get(principal, invocation_id)
        return call, self.service.journal.events(call.invocation_id)

    def _confirmation_view(self, principal: Principal, call: StoredCall) -> dict[str, object]:
        asked = _mapping(call.body.get("confirmation"))
        request = _mapping(call.body.get("request"))
        subject = _mapping(asked.get("subject"))
        expires = asked.get("expires_at")
        now = self.service.clock.now()
        left = datetime.fromisoformat(expires) - now if isinstance(expires, str) else None
        expired = left is not None and left <= timedelta(0)
        # Shown before anyone clicks; the Service enforces the same rule on the POST.
        approver = "approver" in principal.roles
        own = approver and self.service.config.four_eyes and principal.subject == call.subject
        why = decidable(call)
        return {
            "id": call.invocation_id,
            "tool": str(asked.get("tool", call.tool)),
            "subject": str(subject.get("id", call.subject)),
            "tenant": str(subject.get("tenant", call.tenant)),
            "submitted_by": call.principal,
            "reason": str(asked.get("reason", "")),
            "digest": call.digest or "",
            "requested_at": str(asked.get("requested_at", "")),
            "expires_at": str(expires or ""),
            "expires_in": _expires_in(left) if left is not None else "",
            "now": now.isoformat(),
            "expired": expired,
            "arguments": _pretty(asked.get("arguments")),
            "parameters": self._parameters(
                str(asked.get("tool", call.tool)),
                asked.get("arguments"),
                asked.get("evidence") or _mapping(call.body.get("human")).get("evidence"),
            ),
            "raw_arguments": str(request.get("arguments", "")),
            # What an editor starts from: the normalized arguments, as JSON text.
            "edit_text": editable(asked.get("arguments")),
            "human": _evidence(
                _mapping(call.body.get("human")), shown_arguments=asked.get("arguments")
            ),
            "four_eyes": own,
            "can_decide": approver and not own and why is None,
            "surface": call.surface,
            "why": why,
        }

    def _parameters(self, ref: str, arguments: object, evidence: object) -> dict[str, object]:
        """Each argument beside what the tool's spec says of it, and where its value came from.

        The spec is the registry's, never the model's: descriptions and units are the
        deployment's words. Findings whose pointer names no argument (the whole call)
        are kept apart.
        """
        spec = self._spec(ref)
        schema = _mapping(spec.input_schema) if spec is not None else {}
        properties = _mapping(schema.get("properties"))
        required = {str(r) for r in _list(schema.get("required"))}
        findings = [_finding(_mapping(f)) for f in _list(evidence)]
        values = _mapping(arguments)
        names = [n for n in properties if n in values] + [n for n in values if n not in properties]
        rows = []
        for name in names:
            declared = _mapping(properties.get(name))
            rows.append(
                {
                    "name": name,
                    "value": _pretty(values[name]),
                    "description": str(declared.get("description", "")),
                    "constraints": _constraints(declared),
                    "required": name in required,
                    "declared": name in properties,
                    "findings": [f for f in findings if f["parameter"] == name],
                }
            )
        return {
            "description": spec.description if spec is not None else "",
            "known": spec is not None,
            "rows": rows,
            "call_findings": [f for f in findings if f["parameter"] not in names],
        }

    def _trace_link(self, call: StoredCall) -> dict[str, str] | None:
        """The call's trace id, and where a tracing UI shows it (when one is configured)."""
        trace_id = _mapping(call.body.get("response")).get("trace_id")
        if not isinstance(trace_id, str) or not trace_id:
            return None
        # Only a W3C trace id goes into the link: 32 lower-case hex digits, nothing else.
        linkable = self.trace_url is not None and _TRACE_ID.fullmatch(trace_id) is not None
        url = self.trace_url.replace("{trace_id}", trace_id) if self.trace_url and linkable else ""
        return {"id": trace_id, "url": url}

    def _spec(self, ref: str) -> ToolSpec | None:
        name, _, version = ref.partition("@")
        if not version:
            versions = self.service.registry.versions(name)
            if len(versions) != 1:
                return None
            version = versions[0]
        tool = self.service.registry.get(name, version)
        return tool.spec if tool is not None else None

    # -- outcome unknown ------------------------------------------------------------

    async def unknown(self, request: Request, principal: Principal) -> Response:
        records = await self.service.io(self.service.unknown, principal)
        return self.render(
            request,
            "unknown.html",
            principal,
            section="unknown",
            records=[self._unknown_view(r) for r in records],
            can_reconcile="operator" in principal.roles,
        )

    def _unknown_view(self, record: LedgerRecord) -> dict[str, object]:
        name, _, version = record.tool.partition("@")
        tool = self.service.registry.get(name, version)
        return {
            "id": record.invocation_id,
            "tool": record.tool,
            "digest": record.digest,
            "key": record.key.key,
            "subject": str(record.subject.get("id", "")),
            "deadline": record.deadline.isoformat(),
            "updated_at": record.updated_at.isoformat(),
            "arguments": _pretty(_loads(record.canonical)),
            "evidence": [_pretty(dict(e)) for e in record.evidence],
            "can_ask": tool is not None and tool.spec.query is not None,
        }

    async def reconcile(self, request: Request, principal: Principal) -> Response:
        form = await request.form()
        action, finding = form.get("action"), form.get("evidence")
        invocation_id = request.path_params["invocation_id"]
        if action == "ask":
            answer = await self.service.io(self.service.reconcile, principal, invocation_id)
        elif action in {"committed", "not_committed"}:
            text = finding.strip() if isinstance(finding, str) else ""
            if not text:
                msg = "a person's finding needs evidence (what was checked, where)"
                raise ApiError(400, "evidence_missing", msg)
            answer = await self.service.io(
                self.service.reconcile,
                principal,
                invocation_id,
                committed=action == "committed",
                evidence={"finding": text},
            )
        else:
            msg = "action must be ask, committed or not_committed"
            raise ApiError(400, "bad_form", msg)
        status = str(answer["status"])
        _flash(request, "ok" if status in {"committed", "failed"} else "warn", _settled(status))
        return _redirect(f"{CONSOLE_PATH}/unknown")


# ---------------------------------------------------------------------------
# Sessions and forms


def _key_binding(principal: Principal) -> str:
    # The cookie is signed, not encrypted: keep a fingerprint of the key hash, not the hash.
    return hashlib.sha256(b"toolbound-console:" + principal.key_sha256.encode()).hexdigest()[:32]


def _csrf_token(request: Request) -> str:
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


async def _check_csrf(request: Request) -> None:
    form = await request.form()
    sent, expected = form.get("csrf"), request.session.get("csrf")
    if not (
        isinstance(sent, str)
        and isinstance(expected, str)
        and hmac.compare_digest(sent.encode(), expected.encode())
    ):
        msg = "the form's security token is missing or stale"
        raise ApiError(403, "csrf_failed", msg, hint="reload the page and submit it again")


def _safe_next(target: object) -> str:
    """Only a path inside the console: never another site (no open redirect)."""
    if (
        isinstance(target, str)
        and target.startswith(f"{CONSOLE_PATH}/")
        and "//" not in target
        and "\\" not in target
    ):
        return target
    return f"{CONSOLE_PATH}/pending"


def _flash(request: Request, kind: str, text: str) -> None:
    request.session["flash"] = {"kind": kind, "text": text}


def _redirect(url: str) -> Response:
    response = RedirectResponse(url, status_code=303)
    response.headers.update(_HEADERS)
    return response


def _settled(status: str) -> str:
    return {
        "committed": "Recorded as committed.",
        "failed": "Recorded as not committed (failed before commit).",
        "unknown": "The tool could not say; the outcome is still unknown.",
        "needs_person": "The tool cannot be asked; record what you found instead.",
    }.get(status, f"Reconciliation answered {status}.")


# ---------------------------------------------------------------------------
# Views: the journal's JSON shaped for templates


def _summary(call: StoredCall) -> dict[str, object]:
    return {
        "id": call.invocation_id,
        "tool": call.tool,
        "subject": call.subject,
        "principal": call.principal,
        "surface": call.surface,
        "status": call.status,
        "state": call.state,
        "digest": call.digest or "",
        "decision": call.decision or "",
        "approver": call.approver or "",
        "created_at": call.created_at.isoformat(timespec="seconds"),
        "updated_at": call.updated_at.isoformat(timespec="seconds"),
    }


def _detail(
    call: StoredCall, events: list[dict[str, object]], *, shown_arguments: object = None
) -> dict[str, object]:
    request = _mapping(call.body.get("request"))
    response = _mapping(call.body.get("response"))
    message = _mapping(response.get("message"))
    timeline = _timeline(events)
    content = str(message.get("content", ""))
    human = _mapping(call.body.get("human"))
    denial = _mapping(call.body.get("denial"))
    reason = str(denial.get("reason", ""))
    for row in timeline:
        if reason and row["kind"] == "confirmation" and str(row["summary"]).startswith("denied"):
            row["summary"] = f"{row['summary']}: {reason}"
    return {
        **_summary(call),
        "denial_reason": reason,
        "tenant": call.tenant,
        # Decided here and not yet run: it waits in the process that parked it.
        "handed_over": call.surface != "service"
        and call.status == "awaiting_confirmation"
        and call.decision is not None,
        "path": [str(s) for s in _list(response.get("path"))],
        "request": {
            "call_id": str(request.get("call_id", "")),
            "model_call_id": request.get("model_call_id"),
            "version": request.get("version"),
            "timezone": str(request.get("timezone", "")),
            "locale": str(request.get("locale", "")),
            "reference_time": str(request.get("reference_time", "")),
            "arguments": str(request.get("arguments", "")),
            "arguments_bytes": len(str(request.get("arguments", "")).encode()),
        },
        "message": {
            "content": content,
            "bytes": len(content.encode()),
            "is_error": bool(message.get("is_error")),
            "truncated": bool(message.get("truncated")),
        }
        if message
        else None,
        "problem": _pretty(response["problem"]) if "problem" in response else None,
        "human": _evidence(human, shown_arguments=shown_arguments) if human else None,
        "attempts": [_attempt(_mapping(a)) for a in _list(human.get("attempts"))],
        "note": _pretty(call.body["note"]) if "note" in call.body else None,
        "timeline": timeline,
        "duration_ms": timeline[-1]["offset_ms"] if timeline else None,
    }


def _evidence(human: Mapping[str, object], *, shown_arguments: object = None) -> dict[str, object]:
    """The human evidence projection (R12), each part ready to show.

    Arguments equal to ``shown_arguments`` (already on the page) are not repeated.
    """

    def shown(key: str) -> str | None:
        value = human.get(key)
        if value in (None, [], {}) or (key == "arguments" and value == shown_arguments):
            return None
        return _pretty(value)

    return {
        "tool": str(human.get("tool", "")),
        "state": str(human.get("state", "")),
        "commit_status": str(human.get("commit_status") or "—"),
        "digest": str(human.get("digest") or ""),
        "external_resource_id": str(human.get("external_resource_id") or ""),
        "arguments": shown("arguments"),
        "value": shown("value"),
        "problem": shown("problem"),
        "cuts": shown("cuts"),
        "attempts": len(_list(human.get("attempts"))),
        "json": _pretty(dict(human)),
    }


def _finding(finding: Mapping[str, object]) -> dict[str, object]:
    """One provenance finding (R6, R12) as a person reads it, placed on its parameter."""
    pointer = str(finding.get("pointer", ""))
    sources: list[str] = []
    for match in _list(finding.get("matches")):
        for source in _list(_mapping(match).get("sources")):
            phrase = _source_phrase(_mapping(source))
            if phrase not in sources:
                sources.append(phrase)
    return {
        "concern": str(finding.get("concern", "")),
        "pointer": pointer or "/",
        "parameter": _parameter_of(pointer),
        "value": str(finding.get("value", "")),
        "description": str(finding.get("description", "")),
        "rule": str(finding.get("rule") or ""),
        "sources": sources,
    }


def _source_phrase(source: Mapping[str, object]) -> str:
    """``email.list@v1 (call 3f2a…, at /2/body)``: the library's own phrase for a source."""

    def text(key: str) -> str | None:
        value = source.get(key)
        return None if value is None else str(value)

    origin = source.get("origin")
    label = Label(
        origin=origin if origin in {"user", "runtime"} else "tool",
        tool=text("tool"),
        version=text("version"),
        invocation_id=text("invocation_id"),
        untrusted=bool(source.get("untrusted")),
        private=bool(source.get("private")),
        note=text("note"),
    )
    return Source(label=label, at=str(source.get("at", ""))).describe()


def _parameter_of(pointer: str) -> str | None:
    """The top-level argument a JSON Pointer (RFC 6901) points into; ``None`` for the whole."""
    if not pointer.startswith("/"):
        return None
    token = pointer[1:].split("/", 1)[0]
    return token.replace("~1", "/").replace("~0", "~")


_SHOWN_KEYWORDS = (
    "type",
    "format",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
)


def _constraints(schema: Mapping[str, object]) -> str:
    """The schema keywords a person can check a value against, in one line."""
    parts: list[str] = []
    for key in _SHOWN_KEYWORDS:
        if key not in schema:
            continue
        value = schema[key]
        if key == "type":
            parts.append(
                " | ".join(str(t) for t in value) if isinstance(value, list) else str(value)
            )
        else:
            parts.append(f"{key} {json.dumps(value, ensure_ascii=False)}")
    return " · ".join(parts)


def _attempt(attempt: Mapping[str, object]) -> dict[str, object]:
    started, ended = attempt.get("started_at"), attempt.get("ended_at")
    took = (
        _ms(datetime.fromisoformat(ended) - datetime.fromisoformat(started))
        if isinstance(started, str) and isinstance(ended, str)
        else None
    )
    return {
        "number": attempt.get("number"),
        "id": str(attempt.get("attempt_id", "")),
        "outcome": str(attempt.get("outcome", "")),
        "started_at": str(started or ""),
        "took_ms": took,
        "detail": _pretty(attempt["detail"]) if attempt.get("detail") is not None else None,
    }


def _timeline(events: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """Each trace event with its offset from the first, what it says, and its bytes."""
    rows: list[dict[str, object]] = []
    first: datetime | None = None
    previous: datetime | None = None
    for event in events:
        stamp = event.get("at")
        at = datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
        first = first or at
        data = _mapping(event.get("data"))
        text, size = _bytes_of(data.get("content") if event.get("kind") == "tool_message" else None)
        rows.append(
            {
                "seq": event.get("seq"),
                "at": str(stamp or ""),
                "offset_ms": _ms(at - first) if at and first else None,
                "delta_ms": _ms(at - previous) if at and previous else None,
                "kind": str(event.get("kind", "")),
                "state": str(event.get("state") or ""),
                "summary": _event_summary(str(event.get("kind", "")), event.get("state"), data),
                "message": text,
                "message_bytes": size,
                "data": _pretty(dict(data)),
            }
        )
        previous = at or previous
    return rows


def _event_summary(kind: str, state: object, data: Mapping[str, object]) -> str:  # noqa: C901, PLR0911 - one line per kind
    if kind == "proposal":
        _, size = _bytes_of(data.get("arguments"))
        return f"{data.get('name')}: {size} argument bytes from the model"
    if kind == "transition":
        step = f"{data.get('previous')} → {state}"
        for key, label in (("decision", "decision"), ("external_resource_id", "external id")):
            if data.get(key):
                return f"{step} ({label}: {data[key]})"
        return step
    if kind == "attempt":
        attempt = _attempt(_mapping(data.get("attempt")))
        took = "" if attempt["took_ms"] is None else f" in {attempt['took_ms']:.3f} ms"
        return f"attempt {attempt['number']}: {attempt['outcome']}{took}"
    if kind == "confirmation":
        record = _mapping(data.get("record"))
        verdict = "approved" if record.get("approved") else "denied"
        return f"{verdict} by {record.get('approver')}"
    if kind == "decision":
        return f"{data.get('decision')} by {data.get('approver')}, digest {data.get('digest')}"
    if kind == "recovery":
        return f"taken over from {data.get('taken_over_from')}: {data.get('reason')}"
    if kind == "tool_message":
        _, size = _bytes_of(data.get("content"))
        return f"{size} bytes sent back to the model"
    if kind == "reconcile":
        return f"reconciled: {_mapping(data.get('evidence')).get('answer', '')}"
    return kind


def _bytes_of(value: object) -> tuple[str | None, int]:
    """Trace bytes (``{"utf8": …}`` or ``{"hex": …}``) as text and their length."""
    if isinstance(value, Mapping):
        if isinstance(value.get("utf8"), str):
            text = str(value["utf8"])
            return text, len(text.encode())
        if isinstance(value.get("hex"), str):
            text = str(value["hex"])
            return text, len(text) // 2
    if isinstance(value, str):
        return value, len(value.encode())
    return None, 0


def _argument_text(call: StoredCall) -> str:
    """What the search looks in: the model's argument text and the normalized arguments."""
    raw = str(_mapping(call.body.get("request")).get("arguments", ""))
    normalized = _mapping(call.body.get("human")).get("arguments")
    shown = "" if normalized is None else json.dumps(normalized, ensure_ascii=False)
    return f"{raw}\n{shown}".casefold()


def _instant(filters: Mapping[str, str], key: Literal["since", "until"]) -> datetime | None:
    """A filter's time as an aware instant: UTC unless it says otherwise.

    A date alone means the start of that day for ``since`` and the end of it for
    ``until`` (both bounds are meant inclusively by a person typing a day).
    """
    text = filters[key]
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        msg = f"{key} must be a date or a time in ISO 8601, e.g. 2026-07-19 or 2026-07-19T06:00"
        raise ApiError(400, "bad_form", msg) from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    if key == "until" and "T" not in text and " " not in text:
        at += timedelta(days=1)
    return at


def _whole(text: str | None, *, default: int, low: int, high: int) -> int:
    """A whole number from a query, kept within ``low``..``high``."""
    try:
        value = int(text) if text else default
    except ValueError:
        value = default
    return max(low, min(value, high))


def _expires_in(left: timedelta) -> str:
    """``expires in 12 min``, rounded down: a person never has less time than shown."""
    if left <= timedelta(0):
        return "expired"
    minutes = math.floor(left.total_seconds() / 60)
    if minutes == 0:
        return "expires in under 1 min"
    if minutes < _HOUR_MINUTES:
        return f"expires in {minutes} min"
    hours, rest = divmod(minutes, _HOUR_MINUTES)
    return f"expires in {hours} h {rest} min" if rest else f"expires in {hours} h"


def _ms(delta: timedelta) -> float:
    return round(delta.total_seconds() * 1000, 3)


def _pretty(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _loads(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []

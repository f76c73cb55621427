"""The console's review of the MCP gateway's quarantined tools (R18).

When an upstream changes a tool's definition, the gateway stops serving it until a
person approves the new one (:mod:`toolbound.approvals`). These pages show an
operator each quarantined tool — the approved definition, the one the upstream
lists now, and the diff between them (:mod:`toolbound.tool_review`) — and approve it::

    GET  /console/tools             quarantined tools: both definitions and the diff
    POST /console/tools/approve     approve the definition shown, by its digest (CSRF)

They exist when the configuration names the gateway's approvals file
(``[service] tool_approvals``); the console reads that file and never talks to the
upstreams, so it serves beside a gateway in another process. An approval binds to
the digest the page showed: when the gateway has seen another definition since, the
approval is refused (``version_mismatch``) and the page shows the new diff. A running
gateway rereads the file and serves the tool from its next listing on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.routing import BaseRoute, Route

from toolbound.adapters.http import ApiError
from toolbound.approvals import ApprovalStore, ToolVersionMismatch
from toolbound.service.console import CONSOLE_PATH, _Console, _flash, _redirect
from toolbound.tool_review import Review, review

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from toolbound.config import Principal
    from toolbound.service.core import Service

__all__ = ["tool_review_routes"]

_OPERATOR = "operator"


def tool_review_routes(service: Service) -> list[BaseRoute]:
    """The tool review pages, when the configuration names the approvals file (else none)."""
    approvals = service.config.tool_approvals
    if approvals is None:
        return []
    console = _Console(service, trace_url=None)
    pages = _ToolReview(console, ApprovalStore(approvals))
    return [
        Route(f"{CONSOLE_PATH}/tools", console.guarded(pages.show), methods=["GET"]),
        Route(
            f"{CONSOLE_PATH}/tools/approve",
            console.guarded(pages.approve, post=True),
            methods=["POST"],
        ),
    ]


class _ToolReview:
    def __init__(self, console: _Console, store: ApprovalStore) -> None:
        self.console = console
        self.store = store

    async def show(self, request: Request, principal: Principal) -> Response:
        _operator(principal)
        reviews = await self.console.service.io(self._reviews)
        return self.console.render(
            request, "tools.html", principal, section="tools", reviews=reviews
        )

    async def approve(self, request: Request, principal: Principal) -> Response:
        _operator(principal)
        form = await request.form()
        name, digest = form.get("name"), form.get("digest")
        if not isinstance(name, str) or not name or not isinstance(digest, str) or not digest:
            msg = "send the tool's name and the digest of the definition you reviewed"
            raise ApiError(400, "bad_form", msg)
        try:
            await self.console.service.io(
                self.store.approve_quarantined, name, digest=digest, approver=principal.name
            )
        except ToolVersionMismatch as exc:
            _flash(request, "error", f"{exc.code}: {exc} — review the definition shown now.")
            return _redirect(f"{CONSOLE_PATH}/tools")
        _flash(request, "ok", f"Approved {name} at {digest}: the gateway serves it again.")
        return _redirect(f"{CONSOLE_PATH}/tools")

    def _reviews(self) -> list[Review]:
        return review(self.store.quarantined(), self.store.all())


def _operator(principal: Principal) -> None:
    if _OPERATOR not in principal.roles:
        msg = f"{principal.name} lacks the operator role: only operators review tools"
        raise ApiError(403, "forbidden", msg)

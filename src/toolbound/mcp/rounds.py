"""An upstream's input requests, relayed to a 2026-07-28 caller (SEP-2322) (R18).

On a 2026-07-28 connection a server asks the client for input by answering a
request with an ``InputRequiredResult`` (``inputRequests``: elicitation, sampling,
``roots/list``; an opaque ``requestState``) and the client retries the same request
with its ``inputResponses`` and that state. For an upstream configured
``relay_input_requests = true``, the gateway sends a 2026-07-28 caller's
``tools/call`` over a 2026-07-28 connection of its own to the upstream, and::

    upstream answers input_required     the caller gets the same inputRequests (an
                                        elicitation only with allow_elicitation, a
                                        sampling request only with allow_sampling),
                                        and a requestState the gateway sealed: the
                                        upstream's state, bound to the call's digest
                                        and the caller (tenant, subject, session)
    caller retries with inputResponses  its inputResponses go to the upstream as they
      and that requestState             came, with the upstream's own state, once the
                                        retried call is admitted with the same digest
    an input request the caller's       JSON-RPC -32021 (missing required client
      client does not offer             capability), data.requiredCapabilities naming it
    one the configuration does not      refused (``input_request_refused``)
      allow
    a requestState the gateway did      JSON-RPC -32602, before anything runs
      not seal, or sealed for another
      caller or tool
    the same state, other arguments     refused (``input_state_mismatch``): nothing
                                        is sent to the upstream

Every round is a whole call through the guard (validation, authorization,
confirmation): a retry cannot skip it, and the state cannot carry a call to other
arguments. A round answered ``input_required`` commits nothing and is recorded so
(``input_required``, with an ``input_required`` trace event naming the requests);
each later round's trace has an ``input_round`` event naming the invocation that
first asked (``continues``) and the answers' keys, so the rounds read as one call
and the round that completes is that call's outcome.

:data:`ROUNDS` carries one round between :class:`~toolbound.mcp.server.GuardedServer`
and :class:`~toolbound.mcp.upstream.UpstreamTool`, through the runtime that knows
nothing of MCP.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from toolbound._model import Subject

__all__ = [
    "CAPABILITIES_META_KEY",
    "ROUNDS",
    "Opened",
    "Round",
    "StateSeal",
    "missing_capabilities",
    "refused_requests",
]

CAPABILITIES_META_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
"""Where a 2026-07-28 request declares its client's capabilities (``_meta``)."""

_PREFIX: Final = "tbu1"
# Which configured permission each kind of input request needs.
_NEEDS: Final = {
    "elicitation/create": ("allow_elicitation", "elicitation"),
    "sampling/createMessage": ("allow_sampling", "sampling"),
    "roots/list": (None, "roots"),
}


@dataclass(slots=True, kw_only=True)
class Round:
    """One round of a 2026-07-28 caller's ``tools/call``, as the upstream call sees it.

    ``capabilities`` are the caller's declared client capabilities; ``responses``
    its ``inputResponses`` (JSON, as sent); ``state`` the upstream's own
    ``requestState`` and ``digest`` the digest it was sealed to, from a verified
    seal. ``asked`` is filled by the upstream call when the upstream answers
    ``input_required``: that result, as the upstream sent it.
    """

    capabilities: dict[str, Any] | None = None
    responses: dict[str, Any] | None = None
    state: str | None = None
    digest: str | None = None
    continues: str | None = None
    """The invocation id of the round that first asked, from a verified seal: every
    later round's trace names it, so the rounds read as one call."""
    asked: dict[str, Any] | None = field(default=None)
    missing: dict[str, Any] | None = field(default=None)
    """Set instead when the upstream asks for what the caller's client does not offer:
    those capabilities (``requiredCapabilities`` of the -32021 error the caller gets)."""


ROUNDS: ContextVar[Round | None] = ContextVar("toolbound_mcp_round", default=None)
"""The current 2026-07-28 ``tools/call`` round, if the caller is on such a connection."""


def refused_requests(requests: dict[str, Any], *, allow: dict[str, bool]) -> str | None:
    """Why the gateway may not relay ``requests``, or ``None`` when it may relay each one.

    ``allow`` holds the upstream's ``allow_elicitation`` and ``allow_sampling``.
    """
    for key, request in requests.items():
        method = request.get("method") if isinstance(request, dict) else None
        needs = _NEEDS.get(method) if isinstance(method, str) else None
        if needs is None:
            return f"input request {key!r} asks for {method!r}, which the gateway does not relay"
        setting = needs[0]
        if setting is not None and not allow.get(setting, False):
            return f"input request {key!r} is {method}, and {setting} is not set for it"
    return None


def missing_capabilities(
    requests: dict[str, Any], capabilities: dict[str, Any] | None
) -> dict[str, Any]:
    """The client capabilities ``requests`` need that the caller did not declare."""
    missing: dict[str, Any] = {}
    for request in requests.values():
        method = request.get("method") if isinstance(request, dict) else None
        needs = _NEEDS.get(method) if isinstance(method, str) else None
        if needs is not None and needs[1] not in (capabilities or {}):
            missing[needs[1]] = {}
    return missing


class StateSeal:
    """Seals an upstream's ``requestState`` to one call's digest and caller (HMAC-SHA256)."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def seal(
        self, state: str | None, *, digest: str, subject: Subject, tool: str, call: str = ""
    ) -> str:
        """The ``requestState`` the caller gets: the upstream's state, bound and signed.

        ``call`` is the invocation id of the round that first asked (none for a prompt).
        """
        inner = base64.urlsafe_b64encode((state or "").encode()).decode()
        flag = "s" if state is not None else "n"
        mac = self._mac((flag, inner, digest, call), subject, tool)
        return f"{_PREFIX}.{flag}.{inner}.{digest}.{call}.{mac}"

    @staticmethod
    def is_sealed(text: str) -> bool:
        """Whether ``text`` claims to be one of ours (it may still be forged)."""
        return text.startswith(f"{_PREFIX}.")

    def open(self, text: str, *, subject: Subject, tool: str) -> Opened | None:
        """The upstream's state, its digest and first call; ``None`` if not genuine."""
        parts = text.split(".")
        if len(parts) != 6 or parts[0] != _PREFIX or parts[1] not in {"s", "n"}:  # noqa: PLR2004
            return None
        _, flag, inner, digest, call, mac = parts
        if not hmac.compare_digest(mac, self._mac((flag, inner, digest, call), subject, tool)):
            return None
        try:
            state = base64.urlsafe_b64decode(inner.encode()).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        return Opened(state=state if flag == "s" else None, digest=digest, call=call or None)

    def _mac(self, parts: tuple[str, ...], subject: Subject, tool: str) -> str:
        text = "\x1f".join((*parts, tool, subject.tenant, subject.id, subject.session or ""))
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Opened:
    """What a genuine seal holds."""

    state: str | None
    """The upstream's own ``requestState`` (``None``: it sent none)."""
    digest: str
    """The digest of the call (or the prompt's arguments) it was sealed to."""
    call: str | None
    """The invocation id of the round that first asked; ``None`` for a prompt."""

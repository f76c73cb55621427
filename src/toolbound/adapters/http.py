"""toolbound's own HTTP shapes: outcomes as JSON answers, errors as problem+json (R18).

Every HTTP endpoint toolbound serves answers in these shapes — the service's API and
console, and the confirmation endpoints beside an MCP endpoint — so they live here,
owned by neither surface::

    outcome_json(outcome)      a typed outcome → the JSON object an endpoint answers
    ApiError                   an answer that is an error: status, machine code, hint
    problem_response(error)    an ApiError → an RFC 9457 ``application/problem+json``
    decision_refused(exc)      a confirmation desk's refusal → the ApiError every
                               endpoint that takes decisions answers

Like the provider adapters these are pure mappings; Starlette (the ``service`` and
``mcp`` extras) is imported only to build a response.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.responses import Response

    from toolbound._errors import ConfirmationMismatch, Problem
    from toolbound._outcome import Outcome

__all__ = [
    "PROBLEM_JSON",
    "ApiError",
    "decision_refused",
    "outcome_digest",
    "outcome_json",
    "problem_response",
]

PROBLEM_JSON = "application/problem+json"


class ApiError(Exception):
    """An answer that is an error: HTTP status and a problem with a machine code."""

    def __init__(self, status: int, code: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint

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

    return JSONResponse(error.problem(), status_code=error.status, media_type=PROBLEM_JSON)


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
    "confirmation_expired": (409, "the call can no longer run; the model must propose it again"),
}


def decision_refused(exc: ConfirmationMismatch) -> ApiError:
    """The answer to a decision the confirmation desk refused; the call stays parked (R7)."""
    status, hint = _REFUSED.get(exc.code, (409, None))
    return ApiError(status, exc.code, str(exc), hint=hint)

"""Confirmation bound to the digest (R7).

A call the policy marks high-impact is parked with a :class:`ConfirmationRequest`.
A person's answer is a :class:`Confirmation` naming the invocation *and* the
digest they saw. :func:`check_confirmation` accepts it only when both match, it
has not expired, and it approves; whoever holds the parked call consumes it once,
so a confirmation never transfers to another call. Changed arguments give a new
digest, and so need a new confirmation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolbound._confirmation import Confirmation, ConfirmationRequest
from toolbound._errors import Rejection
from toolbound.problems import make_problem

if TYPE_CHECKING:
    from datetime import datetime

__all__ = [
    "REASON_CHARS",
    "Confirmation",
    "ConfirmationRequest",
    "Edit",
    "check_confirmation",
    "denial",
]

REASON_CHARS = 500
"""The most of a person's reason for a denial that the model is told (the rest is cut)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Edit:
    """A person's correction of a parked call: the call they were shown, and who edited it.

    The corrected arguments are a new proposal, which passes every gate again (R3 to R7);
    its trace names the call it replaces, by invocation id and the digest the editor
    was shown, so both digests and the editor stay on record (R14).
    """

    invocation_id: str
    digest: str
    editor: str

    def as_json(self) -> dict[str, object]:
        """The record as the edited call's trace keeps it."""
        return {"invocation_id": self.invocation_id, "digest": self.digest, "editor": self.editor}


def denial(approver: str, reason: str | None) -> str:
    """What the model is told of a person's refusal: who said no and, bounded, why.

    The reason is quoted and attributed, so the model reads it as the approver's
    words about this call, not as the runtime's.
    """
    text = " ".join((reason or "").split())
    if not text:
        return f"{approver} denied the call"
    if len(text) > REASON_CHARS:
        text = text[: REASON_CHARS - 1] + "…"
    return f"denied by a person ({approver}), who said: {json.dumps(text, ensure_ascii=False)}"


def check_confirmation(
    request: ConfirmationRequest, confirmation: Confirmation, *, now: datetime
) -> None:
    """Accept ``confirmation`` for ``request`` or raise :class:`Rejection`."""
    if confirmation.invocation_id != request.invocation_id:
        # R7: a confirmation never transfers to another call.
        raise Rejection(
            make_problem(
                "confirmation_for_other_call",
                "the confirmation was given for another invocation",
            )
        )
    if confirmation.digest != request.digest:
        # R7: changed arguments → new digest → confirm again.
        raise Rejection(
            make_problem(
                "digest_mismatch",
                "the confirmed arguments differ from this call's arguments",
                hint="show the person the current arguments and ask again",
            )
        )
    if not confirmation.approved:
        msg = denial(confirmation.approver, confirmation.reason)
        raise Rejection(make_problem("denied_by_person", msg))
    if now > confirmation.expires_at or now > request.expires_at:
        raise Rejection(
            make_problem(
                "confirmation_expired",
                "the confirmation expired before the call could run",
                hint="ask the person again",
            )
        )

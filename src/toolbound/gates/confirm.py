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
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from toolbound._errors import Rejection
from toolbound._model import Subject
from toolbound.problems import make_problem

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import timedelta

    from toolbound._model import JSONObject
    from toolbound.provenance import Finding

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
class ConfirmationRequest:
    """What a person is asked to approve: one invocation, shown by its digest."""

    invocation_id: str
    digest: str
    tool: str
    subject: Subject
    arguments: JSONObject = field(hash=False)
    reason: str
    requested_at: datetime
    expires_at: datetime
    evidence: tuple[Finding, ...] = field(default=(), hash=False, compare=False)
    """Why the policy asks: its findings on where the values came from (R6, R12)."""

    def approve(self, *, approver: str, at: datetime, ttl: timedelta) -> Confirmation:
        """A person's approval of exactly this request."""
        return Confirmation(
            confirmation_id=secrets.token_hex(8),
            invocation_id=self.invocation_id,
            digest=self.digest,
            approved=True,
            approver=approver,
            at=at,
            expires_at=min(at + ttl, self.expires_at),
        )

    def deny(self, *, approver: str, at: datetime, reason: str | None = None) -> Confirmation:
        """A person's refusal of this request, with the reason they gave, if any."""
        return Confirmation(
            confirmation_id=secrets.token_hex(8),
            invocation_id=self.invocation_id,
            digest=self.digest,
            approved=False,
            approver=approver,
            at=at,
            expires_at=at,
            reason=(reason or "").strip() or None,
        )

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ConfirmationRequest:
        """The request :meth:`as_json` wrote (a store keeps parked calls this way).

        What the desk's rules read comes back; the evidence stays in the stored JSON
        for people to read, and is not rebuilt.
        """
        subject = data["subject"]
        arguments = data["arguments"]
        if not isinstance(subject, dict) or not isinstance(arguments, dict):
            msg = "a stored confirmation request needs a subject and arguments objects"
            raise TypeError(msg)
        return cls(
            invocation_id=str(data["invocation_id"]),
            digest=str(data["digest"]),
            tool=str(data["tool"]),
            subject=Subject(id=str(subject["id"]), tenant=str(subject["tenant"])),
            arguments=arguments,
            reason=str(data["reason"]),
            requested_at=datetime.fromisoformat(str(data["requested_at"])),
            expires_at=datetime.fromisoformat(str(data["expires_at"])),
        )

    def as_json(self) -> dict[str, object]:
        """The request as the human projection and the trace show it."""
        return {
            "invocation_id": self.invocation_id,
            "digest": self.digest,
            "tool": self.tool,
            "subject": {"id": self.subject.id, "tenant": self.subject.tenant},
            "arguments": self.arguments,
            "reason": self.reason,
            "requested_at": self.requested_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "evidence": [f.as_json() for f in self.evidence],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Confirmation:
    """A person's decision on one invocation digest: who, when, until when."""

    confirmation_id: str
    invocation_id: str
    digest: str
    approved: bool
    approver: str
    at: datetime
    expires_at: datetime
    reason: str | None = None
    """Why the person said no, in their words (a denial only); the model is told it."""

    def as_json(self) -> dict[str, object]:
        """The record as the trace keeps it."""
        record: dict[str, object] = {
            "confirmation_id": self.confirmation_id,
            "invocation_id": self.invocation_id,
            "digest": self.digest,
            "approved": self.approved,
            "approver": self.approver,
            "at": self.at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
        }
        if self.reason is not None:
            record["reason"] = self.reason
        return record


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

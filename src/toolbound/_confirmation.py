"""What a person is asked to approve, and their answer, both bound to one digest (R7).

A call the policy marks high-impact is parked with a :class:`ConfirmationRequest`; a
person's answer is a :class:`Confirmation` naming the invocation *and* the digest they
saw. :mod:`toolbound.gates.confirm` checks an answer against its request and exports
both names.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from toolbound._model import Subject

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import timedelta

    from toolbound._findings import Finding
    from toolbound._model import JSONObject

__all__ = ["Confirmation", "ConfirmationRequest"]


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

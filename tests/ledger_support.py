"""What the ledger's statement tests write: an order's intent and its committed answer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from toolbound._model import Result
from toolbound.ledger.store import Intent, LedgerKey

T0 = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)


def intent(
    key: LedgerKey, invocation_id: str = "inv-1", *, who: str = "mira", session: str | None = None
) -> Intent:
    """The intent of one order of tea by ``who``, due 30 s after ``T0``."""
    return Intent(
        key=key,
        digest="digest-a",
        invocation_id=invocation_id,
        tool="orders.create@v1",
        canonical=b'{"item":"tea","qty":1}',
        subject={"id": who, "tenant": "acme", "session": session},
        deadline=T0 + timedelta(seconds=30),
    )


def result(invocation_id: str = "inv-1", value: object = "o-42") -> Result:
    """Its committed answer: the order ``value``."""
    return Result(
        invocation_id=invocation_id,
        status="ok",
        value={"order": value},
        commit_status="committed",
        observed_at=T0,
    )

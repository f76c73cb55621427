"""A payments example: a write whose response can be lost (R8, R9).

``payments.send@v1`` is an irreversible write to a backend that keeps payments by
idempotency key and can be asked what happened to a key (``query_by_key``). With
``lose_next_response`` the backend commits the payment and then the reply is lost,
as on a dropped connection: the runtime records OUTCOME_UNKNOWN, refuses to send the
same payment again blindly, and the reconciler resolves it by asking the backend.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from toolbound._model import Resource, ToolSpec
from toolbound.execution.reconcile import RemoteCommitted, RemoteNotCommitted
from toolbound.execution.retry import ResponseLost
from toolbound.execution.tool import ToolOutput

if TYPE_CHECKING:
    from toolbound._model import JSONObject
    from toolbound.execution.reconcile import QueryAnswer, UnknownCall
    from toolbound.execution.tool import ToolContext
    from toolbound.registry import RegisteredTool, Registry

__all__ = ["PaymentsBackend", "register", "spec"]


@dataclass
class PaymentsBackend:
    """Payments by idempotency key; counts every payment it makes."""

    payments: dict[str, dict[str, object]] = field(default_factory=dict)
    lose_next_response: bool = False
    unreachable_for_queries: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, key: str, amount: int, to: str) -> dict[str, object]:
        """Make a payment once per key (a repeat returns the first)."""
        with self._lock:
            if key not in self.payments:
                self.payments[key] = {
                    "payment_id": f"pay-{len(self.payments) + 1}",
                    "amount": amount,
                    "to": to,
                }
            payment = dict(self.payments[key])
            lost, self.lose_next_response = self.lose_next_response, False
        if lost:
            msg = "the connection dropped after the payment was sent"
            raise ResponseLost(msg)
        return payment

    def lookup(self, key: str) -> dict[str, object] | None:
        """What the backend knows about a key."""
        if self.unreachable_for_queries:
            msg = "the payments backend does not answer"
            raise ConnectionError(msg)
        with self._lock:
            found = self.payments.get(key)
            return None if found is None else dict(found)


def spec(backend: PaymentsBackend) -> ToolSpec:
    """``payments.send@v1``."""

    def query(call: UnknownCall) -> QueryAnswer:
        found = backend.lookup(call.idempotency_key)
        if found is None:
            return RemoteNotCommitted(evidence={"backend": "no payment for this key"})
        return RemoteCommitted(
            value=found,  # type: ignore[arg-type]
            external_resource_id=str(found["payment_id"]),
            evidence={"backend": "payment found", "payment_id": found["payment_id"]},
        )

    return ToolSpec(
        name="payments.send",
        version="v1",
        description="Send an amount (in cents) to a payee.",
        input_schema={
            "type": "object",
            "properties": {
                "amount": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
                "to": {"type": "string", "minLength": 1},
            },
            "required": ["amount", "to"],
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {
                "payment_id": {"type": "string"},
                "amount": {"type": "integer"},
                "to": {"type": "string"},
            },
            "required": ["payment_id", "amount", "to"],
            "additionalProperties": False,
        },
        effect="irreversible_write",
        capabilities=("payments:send",),
        resources=lambda a: [Resource(kind="payee", id=str(a["to"]), action="create")],
        idempotency="query_by_key",
        query=query,
        timeout=2.0,
        reads_untrusted=False,  # the backend's record of the payment just made
        reads_private=True,
    )


def register(registry: Registry, backend: PaymentsBackend) -> RegisteredTool:
    """Register ``payments.send@v1`` over ``backend``."""

    def send(arguments: JSONObject, ctx: ToolContext) -> ToolOutput:
        key = ctx.idempotency_key or ctx.invocation.invocation_id
        payment = backend.send(key, int(str(arguments["amount"])), str(arguments["to"]))
        return ToolOutput(payment, external_resource_id=str(payment["payment_id"]))  # type: ignore[arg-type]

    return registry.register(spec(backend), send)

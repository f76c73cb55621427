"""The example pack the service starts with (``make run``): a read and a write.

``weather.forecast@v1`` is a read anyone granted ``weather:read`` may call;
``payments.send@v1`` is an irreversible write against an in-process payments
backend (kept for the life of the process). With the example configuration's grants
a payment asks a person first, so the console has something to confirm.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolbound.packs import payments, weather

if TYPE_CHECKING:
    from toolbound.registry import Registry

__all__ = ["BACKEND", "register"]

BACKEND = payments.PaymentsBackend()
"""The payments the example service has made, by idempotency key."""


def register(registry: Registry) -> None:
    """Register the example tools into ``registry``."""
    weather.register(registry)
    payments.register(registry, BACKEND)

"""``[[webhook]]``: call events sent to an operator's endpoint, signed, at least once (R18).

Each webhook is told of its tenants' notices (:meth:`toolbound.journal.Journal.notices`)
of the kinds it lists: ``parked``, ``decided``, ``outcome_unknown``, ``reconciled`` by
default, ``finished`` too if asked. A delivery is a POST of one JSON event::

    {"type": "toolbound.call.parked", "timestamp": "2026-12-05T08:00:00+00:00",
     "data": {"invocation_id": "…", "tool": "payments.send@v1", "subject": "…",
              "tenant": "…", "status": "awaiting_confirmation", "digest": "sha256:…", …}}

signed as the Standard Webhooks specification says (the ``standardwebhooks``
library): headers ``webhook-id`` (the same on every try of one delivery, so the
receiver can drop a repeat), ``webhook-timestamp`` and ``webhook-signature``
(``v1,`` and the base64 HMAC-SHA256 of ``id.timestamp.body`` with the secret in
``secret_env``, a ``whsec_…`` value).

Deliveries come from a durable outbox in the journal (:mod:`toolbound.journal._webhooks`):
a crash loses none, and any replica may send any of them (each is claimed with a
lease). A 2xx answer delivers; any other answer, or none within ``timeout``, is tried
again after :data:`BACKOFF` (5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 3 h, 6 h), then
given up. Every try is kept, for operators: ``GET /v1/webhooks/deliveries``. The
destination is checked by the egress rules HTTP tools follow
(:mod:`toolbound.execution.egress`): an internal address is refused unless
``allow_destinations`` lists it.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Final

import httpx
from standardwebhooks import Webhook

from toolbound.execution.egress import EgressPolicy
from toolbound.execution.http import guarded_transport

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from toolbound._clock import Clock
    from toolbound.config import WebhookConfig
    from toolbound.journal import Delivery, Journal, Notice

__all__ = ["BACKOFF", "Webhooks", "event_payload"]

_log = logging.getLogger(__name__)

BACKOFF: Final = (5.0, 30.0, 120.0, 600.0, 1800.0, 3600.0, 3 * 3600.0, 6 * 3600.0)
"""Seconds before each retry of a delivery not acknowledged; after the last, it is given up."""

_LEASE = 120.0  # seconds a process holds the deliveries it is sending
_PAGE = 200  # notices copied per webhook and tenant per round
_ERROR_CHARS = 500


def event_payload(notice: Notice) -> str:
    """The JSON body sent for ``notice``: its type, time and the call as it stood."""
    event = {
        "type": f"toolbound.call.{notice.kind}",
        "timestamp": notice.at.isoformat(),
        "data": dict(notice.body),
    }
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


class Webhooks:
    """The configured webhooks of one service process: copy the feed, send what is due.

    ``tenants`` gives the tenants the service knows (a webhook without ``tenant``
    hears all of them). :meth:`round` is blocking: the service runs it on its I/O
    pool, about once a second. ``backoff`` is the retry schedule (:data:`BACKOFF`);
    ``transport`` replaces the egress-guarded HTTP transport (tests of the schedule).
    """

    def __init__(
        self,
        journal: Journal,
        configs: Sequence[WebhookConfig],
        *,
        tenants: Callable[[], Iterable[str]],
        owner: str,
        clock: Clock,
        backoff: Sequence[float] = BACKOFF,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.journal = journal
        self.configs = {c.name: c for c in configs}
        self._tenants = tenants
        self._owner = owner
        self._clock = clock
        self._backoff = tuple(backoff)
        self._clients = {
            c.name: httpx.Client(
                transport=transport or guarded_transport(EgressPolicy(allow=c.allow_destinations)),
                timeout=c.timeout,
                follow_redirects=False,
            )
            for c in configs
        }

    def round(self) -> int:
        """Copy new notices into the outbox, then send what is due; how many were sent."""
        for config in self.configs.values():
            for tenant in self._scope(config):
                self._copy(config, tenant)
        return self._send_due()

    def close(self) -> None:
        """Close the HTTP clients."""
        for client in self._clients.values():
            client.close()

    def _scope(self, config: WebhookConfig) -> list[str]:
        return [config.tenant] if config.tenant is not None else sorted(self._tenants())

    def _copy(self, config: WebhookConfig, tenant: str) -> None:
        cursor = self.journal.webhook_cursor(config.name, tenant)
        while True:
            notices = self.journal.notices(tenant, after=cursor, limit=_PAGE)
            if not notices:
                return
            wanted = [n for n in notices if n.kind in config.events]
            cursor = notices[-1].cursor
            self.journal.webhook_enqueue(
                config.name,
                tenant,
                wanted,
                cursor=cursor,
                payloads=[event_payload(n) for n in wanted],
                now=self._clock.now(),
            )

    def _send_due(self) -> int:
        sent = 0
        for delivery in self.journal.webhook_claim(self._owner, lease=_LEASE):
            config = self.configs.get(delivery.webhook)
            if config is None:
                continue  # a webhook another replica's configuration has: it sends it
            self._send(config, delivery)
            sent += 1
        return sent

    def _send(self, config: WebhookConfig, delivery: Delivery) -> None:
        status: int | None = None
        error: str | None = None
        try:
            secret = config.signing_secret()
            now = self._clock.now()
            signature = Webhook(secret).sign(delivery.message_id, now, delivery.payload)
            response = self._clients[config.name].post(
                config.url,
                content=delivery.payload.encode(),
                headers={
                    "content-type": "application/json",
                    "webhook-id": delivery.message_id,
                    "webhook-timestamp": str(int(now.timestamp())),
                    "webhook-signature": signature,
                },
            )
            status = response.status_code
            if not response.is_success:
                error = f"answered {status}"
        except Exception as exc:  # noqa: BLE001 - any failure is a try that did not deliver
            error = f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
        delivered = error is None
        n = delivery.attempts  # tries made before this one
        retry_in = None if delivered or n >= len(self._backoff) else self._backoff[n]
        if not delivered:
            _log.warning(
                "webhook %s: delivery of %s %s failed (%s)",
                config.name,
                delivery.kind,
                delivery.invocation_id,
                error,
            )
        self.journal.webhook_attempted(
            delivery,
            owner=self._owner,
            at=self._clock.now(),
            status=status,
            error=error,
            delivered=delivered,
            retry_in=retry_in,
        )

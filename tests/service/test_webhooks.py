"""[[webhook]]: call events delivered at least once, signed (Standard Webhooks), from the outbox."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

import pytest
from service_config import KEYS, config_text
from standardwebhooks import Webhook
from starlette.testclient import TestClient

from toolbound.config import ConfigError, WebhookConfig, parse_config
from toolbound.service.api import create_app
from toolbound.service.core import Service
from toolbound.service.webhooks import Webhooks

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

SECRET = "whsec_" + base64.b64encode(b"a receiver's shared secret!!").decode()


class Receiver:
    """An HTTP endpoint on loopback that keeps what it is sent and answers ``statuses``."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.received: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.statuses.pop(0) if receiver.statuses else 204
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self) -> list[dict[str, object]]:
        """Every body received, verified as the Standard Webhooks library verifies it."""
        verifier = Webhook(SECRET)
        return [verifier.verify(body, headers) for headers, body in self.received]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def webhook_toml(url: str, *, allow: bool = True, events: str = "") -> str:
    allow_line = 'allow_destinations = ["127.0.0.1"]\n' if allow else ""
    return (
        f'\n[[webhook]]\nname = "ops-desk"\nurl = "{url}"\nsecret_env = "HOOK_SECRET"\n'
        f"{allow_line}{events}"
    )


def open_service(tmp_path: Path, extra: str) -> Service:
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db", extra=extra))
    return Service(parse_config(path.read_text(), source=path))


def park(client: TestClient, text: str) -> dict[str, object]:
    body = {"tool": "notes.add", "arguments": json.dumps({"text": text}), "call_id": text}
    headers = {"Authorization": f"Bearer {KEYS['agent']}", "Idempotency-Key": text}
    r = client.post("/v1/proposals", json=body, headers=headers)
    assert r.status_code == 202, r.text
    return r.json()


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_SECRET", SECRET)


def test_a_parked_call_and_its_decision_reach_the_webhook_signed(tmp_path, effects_path, receiver):
    """Parked, then decided: two signed events, each verifiable by the receiver's library."""
    service = open_service(tmp_path, webhook_toml(receiver.url))
    assert service.webhooks is not None
    with TestClient(create_app(service)) as client:
        parked = park(client, "hook me")
        client.post(
            f"/v1/invocations/{parked['invocation_id']}/decision",
            json={"digest": parked["digest"], "decision": "approve"},
            headers={"Authorization": f"Bearer {KEYS['ana']}"},
        )
        service.webhooks.round()
    service.close()
    events = receiver.events()
    assert [e["type"] for e in events] == ["toolbound.call.parked", "toolbound.call.decided"]
    assert {e["data"]["invocation_id"] for e in events} == {parked["invocation_id"]}
    assert events[1]["data"]["decision"] == "approved"
    ids = [headers["webhook-id"] for headers, _ in receiver.received]
    assert len(set(ids)) == 2


def test_no_delivery_is_lost_across_a_restart_and_a_receiver_that_was_down(tmp_path, effects_path):
    """The outbox is in the journal: a delivery that failed before a restart arrives after."""
    down = Receiver(statuses=[503])
    first = open_service(tmp_path, webhook_toml(down.url))
    with TestClient(create_app(first)) as client:
        parked = park(client, "survive a restart")
        assert first.webhooks is not None
        first.webhooks.round()  # answered 503: due again later
    first.close()
    assert len(down.received) == 1

    second = open_service(tmp_path, webhook_toml(down.url))
    assert second.webhooks is not None
    retry = Webhooks(
        second.journal,
        second.config.webhooks,
        tenants=lambda: ["acme"],
        owner="after-restart",
        clock=second.clock,
        backoff=(0.0,),
    )
    # The first try is due again only after the backoff; look at the record of it first.
    (delivery, attempts) = second.journal.webhook_deliveries(tenant="acme")[0]
    assert delivery.delivered_at is None
    assert [(a.n, a.status) for a in attempts] == [(1, 503)]
    # As if the backoff had passed: the next try is due now.
    with second.journal.transaction() as cur:
        cur.execute("UPDATE toolbound_webhook_deliveries SET next_at = 0")
    retry.round()
    retry.close()
    second.close()
    down.close()
    events = down.events()
    assert [e["data"]["invocation_id"] for e in events] == [parked["invocation_id"]] * 2
    assert down.received[0][0]["webhook-id"] == down.received[1][0]["webhook-id"]


def test_operators_see_every_try(tmp_path, effects_path):
    """GET /v1/webhooks/deliveries: each delivery with its tries, statuses and errors."""
    failing = Receiver(statuses=[500])
    service = open_service(tmp_path, webhook_toml(failing.url))
    with TestClient(create_app(service)) as client:
        park(client, "watched")
        assert service.webhooks is not None
        service.webhooks.round()
        r = client.get(
            "/v1/webhooks/deliveries", headers={"Authorization": f"Bearer {KEYS['ops']}"}
        )
    service.close()
    failing.close()
    (delivery,) = r.json()["deliveries"]
    assert delivery["kind"] == "parked"
    assert delivery["delivered_at"] is None
    assert [(a["n"], a["status"], a["error"]) for a in delivery["attempts"]] == [
        (1, 500, "answered 500")
    ]


def test_an_internal_address_not_allowed_is_refused_like_an_http_tool_s(
    tmp_path, effects_path, receiver
):
    """Egress rules: loopback without allow_destinations is never connected to."""
    service = open_service(tmp_path, webhook_toml(receiver.url, allow=False))
    with TestClient(create_app(service)) as client:
        park(client, "nowhere")
        assert service.webhooks is not None
        service.webhooks.round()
    (delivery, attempts) = service.journal.webhook_deliveries(tenant="acme")[0]
    service.close()
    assert receiver.received == []
    assert delivery.delivered_at is None
    assert "DestinationRefused" in str(attempts[0].error)


def test_a_delivery_is_given_up_after_its_last_try(tmp_path, effects_path):
    """Past the retry schedule, the delivery is marked given up and never sent again."""
    failing = Receiver(statuses=[500, 500, 500])
    service = open_service(tmp_path, "")  # no rounds of its own: this test runs them
    hooks = Webhooks(
        service.journal,
        [
            WebhookConfig(
                name="ops-desk",
                url=failing.url,
                secret_env="HOOK_SECRET",  # noqa: S106 - the name of a variable
                allow_destinations=("127.0.0.1",),
            )
        ],
        tenants=lambda: ["acme"],
        owner="test",
        clock=service.clock,
        backoff=(0.0,),
    )
    with TestClient(create_app(service)) as client:
        park(client, "give up")
    hooks.round()
    hooks.round()
    hooks.round()
    (delivery, attempts) = service.journal.webhook_deliveries(tenant="acme")[0]
    hooks.close()
    service.close()
    failing.close()
    assert len(attempts) == 2
    assert delivery.gave_up_at is not None
    assert len(failing.received) == 2


def test_a_webhook_only_hears_the_events_it_lists(tmp_path, effects_path, receiver):
    """Events = ["decided"]: the parking is not sent, the decision is."""
    service = open_service(tmp_path, webhook_toml(receiver.url, events='events = ["decided"]\n'))
    with TestClient(create_app(service)) as client:
        parked = park(client, "decisions only")
        client.post(
            f"/v1/invocations/{parked['invocation_id']}/decision",
            json={"digest": parked["digest"], "decision": "deny"},
            headers={"Authorization": f"Bearer {KEYS['ana']}"},
        )
        assert service.webhooks is not None
        service.webhooks.round()
    service.close()
    assert [e["type"] for e in receiver.events()] == ["toolbound.call.decided"]


@pytest.mark.parametrize(
    ("toml", "where"),
    [
        ('\n[[webhook]]\nname = "x"\nurl = "ftp://x"\nsecret_env = "S"\n', "webhook[0].url"),
        ('\n[[webhook]]\nname = "x"\nurl = "https://x"\n', "webhook[0].secret_env"),
        (
            '\n[[webhook]]\nname = "x"\nurl = "https://x"\nsecret_env = "S"\nevents = ["sent"]\n',
            "webhook[0].events",
        ),
        (
            '\n[[webhook]]\nname = "x"\nurl = "https://x"\nsecret_env = "S"\ncolour = 1\n',
            "webhook[0].colour",
        ),
    ],
)
def test_a_webhook_configured_wrongly_is_refused_with_its_key_path(tmp_path, toml, where):
    """check-config names the key of each mistake in a [[webhook]]."""
    with pytest.raises(ConfigError) as refused:
        parse_config(config_text("sqlite:///toolbound.db", extra=toml), source=tmp_path / "t.toml")
    assert where in str(refused.value)


def test_the_signing_secret_may_be_read_from_a_file(tmp_path, effects_path, receiver, monkeypatch):
    """`secret_file` (a mounted secret) signs the deliveries; the secret stays out of reprs."""
    monkeypatch.delenv("HOOK_SECRET", raising=False)
    (tmp_path / "hook.secret").write_text(SECRET + "\n")
    toml = webhook_toml(receiver.url).replace(
        'secret_env = "HOOK_SECRET"', 'secret_file = "hook.secret"'
    )
    service = open_service(tmp_path, toml)
    (config,) = service.config.webhooks
    assert config.secret == SECRET
    assert SECRET not in repr(service.config)
    with TestClient(create_app(service)) as client:
        parked = park(client, "signed from a file")
        assert service.webhooks is not None
        service.webhooks.round()
    service.close()
    (event,) = receiver.events()
    assert event["data"]["invocation_id"] == parked["invocation_id"]

"""A loopback HTTP "shop" for execution tests: a real server on 127.0.0.1.

It keeps an orders table and de-duplicates writes by Idempotency-Key, so a retry
after a lost response can be shown to return the original result with one side
effect. ``plan`` scripts the behaviour of the next ``POST /orders`` calls:
``"answer"``, ``"drop"`` (commit, then hang up), ``"slow"`` or ``"fail:<status>"``.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import unquote, urlsplit

from toolbound.execution.egress import EgressPolicy

if TYPE_CHECKING:
    from collections.abc import Iterator

DELAY = 0.3  # the server's deliberate delay on the slow routes
# HTTP tools refuse loopback by default; tools aimed at the shop opt in, explicitly.
LOOPBACK = EgressPolicy(allow=("127.0.0.0/8", "::1"))

# -- the server -------------------------------------------------------------------------


@dataclass
class Seen:
    """One request as the server received it."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Shop:
    """The server's own state: what it committed and every request it saw."""

    base: str = ""
    orders: dict[str, dict[str, object]] = field(default_factory=dict)
    by_key: dict[str, tuple[int, bytes, str]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)  # behaviour of the next POST /orders
    extra_headers: dict[str, str] = field(default_factory=dict)  # for /status/...
    lock: threading.Lock = field(default_factory=threading.Lock)
    committed: threading.Event = field(default_factory=threading.Event)  # an order was placed
    late_answer_sent: threading.Event = field(default_factory=threading.Event)  # "slow" replied


ERROR_BODIES: dict[int, dict[str, object]] = {
    401: {"error": {"message": "token expired"}},
    403: {"error": "not your order"},
    404: {"message": "no such order"},
    422: {"detail": "quantity must be a positive integer"},
    429: {"message": "slow down"},
    500: {"message": "internal error"},
    502: {"message": "bad gateway"},
    503: {"message": "maintenance"},
    504: {"message": "upstream timed out"},
}


class ShopHandler(BaseHTTPRequestHandler):
    """Routes of the loopback shop; ``shop`` is set per test on a subclass."""

    shop: ClassVar[Shop]
    timeout = 2  # a stuck client never holds a server thread for long

    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        """Silence the per-request log line."""

    def do_GET(self):
        self.route()

    def do_POST(self):
        self.route()

    def route(self):
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.shop.lock:
            self.shop.seen.append(Seen(self.command, url.path, url.query, headers, body))
        match self.command, url.path.strip("/").split("/"):
            case "POST", ["orders"]:
                self.create(body)
            case "GET", ["orders", order_id]:
                order = self.shop.orders.get(order_id)
                if order is None:
                    self.reply(404, ERROR_BODIES[404])
                else:
                    self.reply(200, order)
            case _, ["status", code]:
                status = int(code)
                self.reply(status, ERROR_BODIES.get(status, {}), self.shop.extra_headers)
            case "POST", ["long-error"]:
                self.reply(400, {"message": "bad  \n request " + "x" * 1000})
            case "GET", ["slow"]:
                time.sleep(DELAY)
                self.reply(200, {"late": True})
            case "GET", ["echo-auth"]:
                self.reply(200, {"you_sent": self.headers.get("Authorization"), "ok": True})
            case "GET", ["ops", key]:
                self.operation(unquote(key))
            case _:
                self.reply(404, {"message": f"no route {url.path}"})

    def create(self, body: bytes) -> None:
        key = self.headers.get("Idempotency-Key")
        with self.shop.lock:
            behaviour = self.shop.plan.pop(0) if self.shop.plan else "answer"
            if behaviour.startswith("fail:"):
                status = int(behaviour.removeprefix("fail:"))
                self.reply(status, ERROR_BODIES.get(status, {}), self.shop.extra_headers)
                return
            if key is not None and key in self.shop.by_key:
                # De-duplication by key: the stored answer, no second order.
                status, payload, location = self.shop.by_key[key]
            else:
                number = len(self.shop.orders) + 1
                order = {"id": f"ord-{number}", **json.loads(body), "status": "placed"}
                self.shop.orders[order["id"]] = order
                status, payload = 201, json.dumps(order).encode()
                location = f"{self.shop.base}/orders/{order['id']}"
                if key is not None:
                    self.shop.by_key[key] = (status, payload, location)
                self.shop.committed.set()
        if behaviour == "drop":
            # Committed above; now hang up without a word.
            self.close_connection = True
            return
        if behaviour == "slow":
            time.sleep(DELAY)
            self.send(status, payload, {"Location": location})
            self.shop.late_answer_sent.set()
            return
        self.send(status, payload, {"Location": location})

    def operation(self, key: str) -> None:
        if key == "busy":
            self.reply(503, ERROR_BODIES[503])
            return
        stored = self.shop.by_key.get(key)
        if stored is None:
            self.reply(404, {"message": "unknown key"})
        else:
            _, payload, location = stored
            self.send(200, payload, {"Location": location})

    def reply(self, status: int, document: object, headers: dict[str, str] | None = None) -> None:
        self.send(status, json.dumps(document).encode(), headers or {})

    def send(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting: that is the point of the slow routes


class Server(ThreadingHTTPServer):
    """A threading server that joins its handlers on close and keeps their errors."""

    daemon_threads = False  # server_close() joins handler threads: no stray sockets
    errors: list[str]

    def handle_error(self, request, client_address):  # noqa: ARG002 - the stdlib signature
        import traceback

        self.errors.append(traceback.format_exc())


@contextmanager
def serve_shop() -> Iterator[Shop]:
    """Run a fresh shop on an ephemeral loopback port for the block."""
    state = Shop()
    handler = type("Handler", (ShopHandler,), {"shop": state})
    server = Server(("127.0.0.1", 0), handler)
    server.errors = []
    state.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert server.errors == []

"""Slow clients against a real ``toolbound serve``: every connection is bounded in time.

A request head trickled a byte at a time is cut off after ``header_timeout``; a body
trickled after its head is answered 408 after ``body_timeout``; past
``max_connections`` a request is answered 503 at once. Loopback only.
"""

from __future__ import annotations

import contextlib
import socket
import time

import httpx
import pytest
from servers import Server
from service_config import KEYS, config_text

BOUNDS = "header_timeout = 1\nbody_timeout = 1\nmax_connections = 6\nkeep_alive = 1\n"


@pytest.fixture
def server(tmp_path, effects_path):
    config = tmp_path / "toolbound.toml"
    config.write_text(config_text("sqlite:///toolbound.db", extra=BOUNDS))
    running = Server(config, env={}).start()
    yield running
    running.stop()


def _connect(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def _closed_after(sock: socket.socket, trickle: bytes, *, every: float, limit: float) -> float:
    """Send ``trickle`` a byte every ``every`` seconds; when the server closed, or ``limit``."""
    start = time.monotonic()
    for byte in trickle:
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            return time.monotonic() - start
        sock.settimeout(every)
        try:
            if sock.recv(4096) == b"":
                return time.monotonic() - start
        except TimeoutError:
            pass
        except OSError:
            return time.monotonic() - start
        if time.monotonic() - start > limit:
            break
    return float("inf")


def test_a_trickled_request_head_is_cut_off(server):
    """Headers sent a byte every 0.2 s: the connection is closed after about a second."""
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"
    with _connect(server) as sock:
        assert _closed_after(sock, head, every=0.2, limit=8.0) < 4.0
    # Everyone else is still served.
    assert httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200


def test_a_silent_connection_is_closed(server):
    """A client that connects and sends nothing is disconnected after header_timeout."""
    with _connect(server) as sock:
        start = time.monotonic()
        sock.settimeout(8)
        assert sock.recv(1) == b""
        assert time.monotonic() - start < 4.0


def test_a_trickled_body_is_answered_408(server):
    """A head in full, then a body a byte every 0.2 s: 408 body_timeout, then closed."""
    body = b'{"tool": "notes.shout", "arguments": "{}", "call_id": "c"}'
    head = (
        b"POST /v1/proposals HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + KEYS["agent"].encode() + b"\r\nIdempotency-Key: slow\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    with _connect(server) as sock:
        sock.sendall(head)
        start = time.monotonic()
        answer = b""
        for byte in body:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            sock.settimeout(0.2)
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                continue
            answer += chunk
            if not chunk or b"\r\n\r\n" in answer:
                break
        elapsed = time.monotonic() - start
        sock.settimeout(5)
        # The server closes with the last trickled byte unread in its buffer, which the
        # kernel turns into a reset: a reset after the answer is the close.
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(4096):
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b'"code":"body_timeout"' in answer
    assert elapsed < 4.0


def test_past_max_connections_a_request_is_answered_503(server):
    """Connections held open up to the cap: the next request is refused 503 at once."""
    held = [_connect(server) for _ in range(6)]
    try:
        time.sleep(0.2)
        start = time.monotonic()
        r = httpx.get(f"{server.url}/healthz", timeout=5)
        assert r.status_code == 503
        assert time.monotonic() - start < 1.0
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.3)
    assert httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200

"""A loopback HTTP server that replays scripted provider responses, for real SDK clients.

Not a test module: ``test_real_sdks.py`` imports it. Each request takes the next
scripted reply in order (a JSON body or an SSE byte stream) and is recorded, so a
test can check both what the SDK sent and what it made of the reply.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from collections.abc import Iterable

# SSE bodies go out in small writes so the client really reads a stream in pieces,
# with boundaries that fall inside events, lines and characters.
_SSE_PIECE = 61


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted HTTP reply."""

    body: bytes
    content_type: str
    status: int = 200


@dataclass(frozen=True, slots=True)
class Request:
    """What a client sent: method, path and the JSON body (``None`` if there was none)."""

    method: str
    path: str
    body: object


def json_reply(body: object, status: int = 200) -> Reply:
    """A reply with a JSON body."""
    return Reply(json.dumps(body).encode(), "application/json", status)


def sse_reply(raw: bytes) -> Reply:
    """A reply that streams ``raw`` as it is, as ``text/event-stream``."""
    return Reply(raw, "text/event-stream")


def jsonl_as_sse(lines: Iterable[str]) -> bytes:
    """One-JSON-event-per-line recordings as the SSE the APIs send.

    Each event goes out as ``event: <its type>`` plus one ``data:`` line, the form
    the OpenAI Responses and Anthropic Messages APIs use on the wire.
    """
    out = bytearray()
    for line in lines:
        text = line.strip()
        if not text:
            continue
        kind = json.loads(text)["type"]
        out += f"event: {kind}\ndata: {text}\n\n".encode()
    return bytes(out)


@dataclass
class ReplayServer:
    """Replays ``replies`` in order on ``127.0.0.1`` at an ephemeral port, in a thread.

    Use as a context manager: on exit it stops serving, closes its socket and joins
    its thread, so nothing is left open for a ResourceWarning.
    """

    replies: list[Reply]
    requests: list[Request] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.replies = list(self.replies)  # consumed as requests arrive; not the caller's

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.0: the server closes each connection after its reply, which
            # ends an SSE body without chunked encoding.
            protocol_version = "HTTP/1.0"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                reply = owner._take(Request("POST", self.path, json.loads(raw) if raw else None))
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                if reply.content_type == "application/json":
                    self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                if reply.content_type == "text/event-stream":
                    for start in range(0, len(reply.body), _SSE_PIECE):
                        self.wfile.write(reply.body[start : start + _SSE_PIECE])
                        self.wfile.flush()
                else:
                    self.wfile.write(reply.body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                """Quiet: the test output is for the tests."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # Handler threads are joined on close: none outlives the test.
        self._server.daemon_threads = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        assert self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _take(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if not self.replies:
                return json_reply({"error": {"message": "no reply scripted"}}, status=500)
            return self.replies.pop(0)

"""R18: the HTTP shapes every toolbound endpoint shares — the body limit and the key header."""

from __future__ import annotations

import asyncio
import json

import pytest

from toolbound._errors import ConfigurationError
from toolbound.adapters.http import (
    MAX_IDEMPOTENCY_KEY,
    PROBLEM_JSON,
    ApiError,
    BodyLimit,
    idempotency_key,
)

CHUNK = b"x" * 1000


class Client:
    """A raw ASGI client: sends ``chunks`` as one request body and records the answer."""

    def __init__(self, chunks: list[bytes], headers: list[tuple[bytes, bytes]] = ()) -> None:
        self.chunks = chunks
        self.headers = list(headers)
        self.pulled = 0
        self.sent: list[dict] = []

    async def receive(self) -> dict:
        if self.pulled == len(self.chunks):
            return {"type": "http.disconnect"}
        self.pulled += 1
        more = self.pulled < len(self.chunks)
        return {"type": "http.request", "body": self.chunks[self.pulled - 1], "more_body": more}

    async def send(self, message: dict) -> None:
        self.sent.append(message)

    def run(self, app) -> tuple[int, dict[bytes, bytes], bytes]:
        scope = {"type": "http", "method": "POST", "path": "/", "headers": self.headers}
        asyncio.run(app(scope, self.receive, self.send))
        start = next(m for m in self.sent if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")
        return start["status"], dict(start["headers"]), body


async def echo_length(scope, receive, send) -> None:
    """An app that reads the whole body, as a handler would, and answers its length."""
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(len(body)).encode()})


def test_a_body_within_the_limit_reaches_the_app():
    """A body of exactly the limit is read whole by the app."""
    status, _, body = Client([CHUNK] * 3).run(BodyLimit(echo_length, max_bytes=3000))
    assert (status, body) == (200, b"3000")


def test_a_declared_length_over_the_limit_is_refused_before_the_app_runs():
    """Content-Length over the limit: 413 problem+json at once; not one body byte is read."""
    client = Client([CHUNK] * 50, headers=[(b"content-length", b"50000")])
    status, headers, body = client.run(BodyLimit(echo_length, max_bytes=3000))
    assert status == 413
    assert headers[b"content-type"] == PROBLEM_JSON.encode()
    assert headers[b"connection"] == b"close"
    assert json.loads(body)["code"] == "request_too_large"
    assert client.pulled == 0


def test_a_streamed_body_is_counted_as_it_arrives():
    """Chunked, no Content-Length: the receive that passes the limit stops the read; 413."""
    client = Client([CHUNK] * 1000)
    status, headers, body = client.run(BodyLimit(echo_length, max_bytes=3500))
    assert status == 413
    assert headers[b"content-type"] == PROBLEM_JSON.encode()
    assert json.loads(body)["status"] == 413
    assert client.pulled == 4, "reading stops at the chunk that passes the limit"


def test_the_apps_own_answer_to_a_refused_body_is_dropped():
    """An app that turns the refusal into an answer of its own still yields one 413."""

    async def forgiving(scope, receive, send) -> None:
        try:
            await echo_length(scope, receive, send)
        except Exception:  # noqa: BLE001 - what a careless app does
            await send({"type": "http.response.start", "status": 500, "headers": []})
            await send({"type": "http.response.body", "body": b"boom"})

    status, _, body = Client([CHUNK] * 10).run(BodyLimit(forgiving, max_bytes=2500))
    assert status == 413
    assert b"boom" not in body


def test_other_failures_of_the_app_are_not_hidden():
    """An exception that is not the limit's propagates unchanged."""

    async def broken(scope, receive, send) -> None:
        msg = "bug"
        raise KeyError(msg)

    with pytest.raises(KeyError, match="bug"):
        Client([CHUNK]).run(BodyLimit(broken, max_bytes=10_000))


def test_a_limit_must_be_positive():
    """BodyLimit(max_bytes=0) is a configuration error."""
    with pytest.raises(ConfigurationError):
        BodyLimit(echo_length, max_bytes=0)


@pytest.mark.parametrize(
    ("header", "key"),
    [
        ("8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ('"8e03978e"', "8e03978e"),
        (r'"a \"quoted\" \\ key"', r'a "quoted" \ key'),
        ("k" * MAX_IDEMPOTENCY_KEY, "k" * MAX_IDEMPOTENCY_KEY),
    ],
)
def test_an_idempotency_key_is_bare_or_a_structured_field_string(header, key):
    """A bare printable key is taken as is; a quoted one is an RFC 8941 sf-string."""
    assert idempotency_key(header) == key


@pytest.mark.parametrize(
    "header",
    [
        "",
        "k" * (MAX_IDEMPOTENCY_KEY + 1),
        "k" * 10_000,
        "clé",
        "tab\there",
        '""',
        '"unterminated',
        '"after" the quote',
        r'"bad \n escape"',
        '"caf\u00e9"',
    ],
)
def test_a_malformed_idempotency_key_is_a_400(header):
    """Empty, over 255 characters, not printable ASCII, or a broken sf-string: refused."""
    with pytest.raises(ApiError) as info:
        idempotency_key(header)
    assert (info.value.status, info.value.code) == (400, "idempotency_key_invalid")

"""The gateway's HTTP leg keeps its connection: a closing response is drained, briefly."""

from __future__ import annotations

import time

import anyio
import httpx2

from toolbound.mcp.keepalive import DRAIN_BYTES, DRAIN_SECONDS, KeepAliveTransport


class Body(httpx2.AsyncByteStream):
    """A response body: ``parts``, then (if ``endless``) nothing ever again."""

    def __init__(self, parts: list[bytes], *, endless: bool = False) -> None:
        self.parts = parts
        self.endless = endless
        self.read: list[bytes] = []
        self.closed = False

    async def __aiter__(self):
        for part in self.parts:
            self.read.append(part)
            yield part
        if self.endless:
            await anyio.sleep_forever()

    async def aclose(self) -> None:
        self.closed = True


class Upstream(httpx2.AsyncBaseTransport):
    """A server whose every answer is ``body``."""

    def __init__(self, body: Body) -> None:
        self.body = body

    async def handle_async_request(self, _request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, stream=self.body)


async def read_first_part_then_close(body: Body) -> float:
    async with httpx2.AsyncClient(transport=KeepAliveTransport(Upstream(body))) as http:
        async with http.stream("POST", "http://upstream.test/mcp") as response:
            async for _ in response.aiter_raw():
                break  # the reader has what it waited for, as the SDK does
            started = time.monotonic()
        return time.monotonic() - started


def test_the_rest_of_a_body_that_ends_is_read_before_it_closes():
    """What is left after the reader stopped is read, so the connection can be kept."""
    body = Body([b"event: message\n", b"data: {}\n\n", b""])
    anyio.run(read_first_part_then_close, body)
    assert body.read == body.parts
    assert body.closed


def test_a_body_that_does_not_end_is_closed_after_a_moment():
    """A stream that goes on is not waited for: closed after DRAIN_SECONDS."""
    body = Body([b"event: message\n"], endless=True)
    waited = anyio.run(read_first_part_then_close, body)
    assert body.closed
    assert DRAIN_SECONDS * 0.9 <= waited < DRAIN_SECONDS + 1.0


def test_a_large_rest_is_not_read_to_keep_a_connection():
    """More than DRAIN_BYTES left: the drain gives up and the response closes."""
    big = b"x" * 8192
    body = Body([b"first", *([big] * (DRAIN_BYTES // len(big) + 4))])
    anyio.run(read_first_part_then_close, body)
    assert body.closed
    assert len(body.read) < len(body.parts)

"""Resumable SSE streams (SEP-1699): a priming event with ``retry``, and ``Last-Event-ID``.

Over streamable HTTP on loopback, as a client speaking 2025-11-25 sees it, with raw
HTTP requests so each SSE field can be read: the gateway (``mcp-serve`` builds the
same endpoint) in front of ``conformance_upstream.py``.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp_support import TOKENS, gateway, grant, run, serving, write_config
from test_mcp_content import media_upstream

from toolbound.mcp.events import DEFAULT_RETRY_MS, MemoryEventStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from mcp.server.streamable_http import EventMessage

VERSION = "2025-11-25"
HEADERS = {
    "Authorization": f"Bearer {TOKENS['mira']}",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


def message(n: int) -> types.JSONRPCMessage:
    return types.JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"n": n})


async def events(response: httpx2.Response) -> AsyncIterator[dict[str, str]]:
    """The SSE events of ``response``, each as its fields (WHATWG: a blank line ends one)."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if fields:
                yield fields
            fields = {}
            continue
        name, _, value = line.partition(":")
        fields[name] = value.removeprefix(" ")


async def session(http: httpx2.AsyncClient, url: str) -> str:
    """Initialize a 2025-11-25 session; its id."""
    hello = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": VERSION,
            "capabilities": {},
            "clientInfo": {"name": "resume-test", "version": "1"},
        },
    }
    opened = await http.post(url, json=hello, headers=HEADERS)
    sid = opened.headers["mcp-session-id"]
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
    await http.post(url, json=ready, headers=headers)
    return sid


def call(request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "media.test_image_content", "arguments": {}},
    }


async def replay(http: httpx2.AsyncClient, url: str, sid: str, last: str) -> list[dict[str, str]]:
    """What a GET with ``Last-Event-ID: last`` receives, until the call's answer or the end."""
    headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
    headers["Last-Event-ID"] = last
    got: list[dict[str, str]] = []
    with anyio.move_on_after(5):
        async with http.stream("GET", url, headers=headers) as resumed:
            async for event in events(resumed):
                got.append(event)
                if event.get("data", "").startswith("{") and '"result"' in event["data"]:
                    break
    return got


@contextlib.asynccontextmanager
async def gateway_url(tmp_path: Path) -> AsyncIterator[str]:
    config = write_config(tmp_path, media_upstream() + grant("mira", "media:read"))
    async with serving(gateway(config)) as url:
        yield url


def test_a_call_s_stream_starts_with_a_priming_event_and_a_retry(tmp_path: Path) -> None:
    """The first event has an id, empty data and retry; the answer follows with an id."""

    async def scenario() -> list[dict[str, str]]:
        async with gateway_url(tmp_path) as url, httpx2.AsyncClient(timeout=30) as http:
            sid = await session(http, url)
            headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
            async with http.stream("POST", url, json=call(1), headers=headers) as answer:
                return [e async for e in events(answer)]

    first, *rest = run(scenario())
    assert first["id"]
    assert first.get("data", "") == ""
    assert first["retry"] == str(DEFAULT_RETRY_MS)
    assert rest
    assert all(e["id"] for e in rest)
    assert json.loads(rest[-1]["data"])["id"] == 1


def test_a_client_reconnecting_with_last_event_id_gets_what_it_missed(tmp_path: Path) -> None:
    """The stream broke after its priming event: a GET with that id replays the answer."""

    async def scenario() -> list[dict[str, str]]:
        async with gateway_url(tmp_path) as url, httpx2.AsyncClient(timeout=30) as http:
            sid = await session(http, url)
            headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
            async with http.stream("POST", url, json=call(7), headers=headers) as answer:
                priming = await anext(events(answer))  # then the connection drops
            await anyio.sleep(1.0)  # the answer is sent (and stored) meanwhile
            return await replay(http, url, sid, priming["id"])

    replayed = run(scenario())
    answers = [json.loads(e["data"]) for e in replayed if e.get("data", "").startswith("{")]
    assert [a["id"] for a in answers] == [7]
    assert answers[0]["result"]["content"]


def test_another_session_cannot_replay_a_session_s_events(tmp_path: Path) -> None:
    """Each session has its own store: one session's event id replays nothing in another."""

    async def scenario() -> list[dict[str, str]]:
        async with gateway_url(tmp_path) as url, httpx2.AsyncClient(timeout=30) as http:
            mine, theirs = await session(http, url), await session(http, url)
            headers = {**HEADERS, "mcp-session-id": mine, "mcp-protocol-version": VERSION}
            async with http.stream("POST", url, json=call(3), headers=headers) as answer:
                priming = await anext(events(answer))
            await anyio.sleep(1.0)
            return await replay(http, url, theirs, priming["id"])

    assert [e for e in run(scenario()) if e.get("data")] == []


def test_the_store_replays_one_stream_after_an_event_never_its_priming_events() -> None:
    """Only the messages of the event's own stream, after it, in order."""
    store = MemoryEventStore()
    sent: list[tuple[str | None, types.JSONRPCMessage]] = []

    async def collect(event: EventMessage) -> None:
        sent.append((event.event_id, event.message))

    async def scenario() -> str | None:
        start = await store.store_event("a", None)
        one = await store.store_event("a", message(1))
        await store.store_event("b", message(2))
        two = await store.store_event("a", message(3))
        sent.clear()
        stream = await store.replay_events_after(start, collect)
        assert sent == [(one, message(1)), (two, message(3))]
        return stream

    assert run(scenario()) == "a"


def test_the_store_is_bounded_and_forgets_the_oldest() -> None:
    """Past max_events the oldest go; an id no longer held replays nothing."""
    store = MemoryEventStore(max_events=3)

    async def scenario() -> tuple[str | None, int]:
        old = await store.store_event("a", message(0))
        for n in range(1, 5):
            await store.store_event("a", message(n))
        return await store.replay_events_after(old, _nothing), store.held

    assert run(scenario()) == (None, 3)
    with pytest.raises(ValueError, match="at least 1"):
        MemoryEventStore(max_events=0)


async def _nothing(_event: EventMessage) -> None:
    raise AssertionError

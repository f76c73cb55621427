"""Bearer JWTs at the MCP gateway: a trusted issuer's token calls a tool like an API key."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from typing import TYPE_CHECKING

from mcp_support import TOKENS, as_, gateway, grant, run, serving, time_upstream, write_config
from test_mcp_confirm_http import desk

from identity_support import SigningKey, identity_table, jwks

if TYPE_CHECKING:
    from pathlib import Path

KEY = SigningKey("gw-1", "EC")
MIRA = {"sub": "mira", "tid": "acme", "roles": ["Tools.Call"]}


def test_the_gateway_accepts_a_jwt_for_an_mcp_call(tmp_path: Path) -> None:
    """An agent's JWT calls an upstream tool; an expired one is a 401 naming token_expired."""
    (tmp_path / "jwks.json").write_text(json.dumps(jwks(KEY)))
    body = time_upstream() + grant("mira", "time:read") + identity_table('jwks_file = "jwks.json"')
    config = write_config(tmp_path, body)
    seen: dict[str, object] = {}

    async def scenario() -> None:
        async with serving(gateway(config)) as url:
            async with as_(KEY.token(**MIRA), url) as client:
                seen["call"] = await client.call_tool("time.get_current_time", {"timezone": "UTC"})
            expired = KEY.token(**MIRA, exp=int(time.time()) - 600)
            async with desk(url, expired) as late:
                seen["metrics"] = await late.get("/metrics")

    run(scenario())
    call = seen["call"]
    assert call.is_error is False, call
    assert call.structured_content["timezone"] == "UTC"
    assert seen["metrics"].status_code == 401
    assert seen["metrics"].json()["code"] == "token_expired"


class _Silent:
    """An identity provider that accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/jwks.json"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.held.append(self.sock.accept()[0])

    def close(self) -> None:
        for conn in self.held:
            conn.close()
        self.sock.close()


def test_a_silent_identity_provider_never_stalls_the_gateway(tmp_path: Path) -> None:
    """JWTs whose issuer never answers wait off the loop: an API key's call stays fast."""
    idp = _Silent()
    body = time_upstream() + grant("mira", "time:read") + identity_table(f'jwks_url = "{idp.url}"')
    config = write_config(tmp_path, body)
    forged = SigningKey("forged").token(**MIRA)
    timings: dict[str, float] = {}

    async def forged_call(url: str) -> None:
        async with desk(url, forged) as client:
            await client.get("/confirmations")

    async def key_call(url: str) -> None:
        async with as_(TOKENS["mira"], url) as client:
            await client.call_tool("time.get_current_time", {"timezone": "UTC"})

    def timed_key_call(url: str) -> None:
        # Its own thread and loop: a stalled server loop cannot hide from this clock.
        time.sleep(0.2)  # the forged tokens are waiting for the issuer now
        started = time.monotonic()
        asyncio.run(key_call(url))
        timings["key"] = time.monotonic() - started

    async def scenario() -> None:
        async with serving(gateway(config)) as url:
            await key_call(url)  # the upstream started, warm
            waiting = [asyncio.create_task(forged_call(url)) for _ in range(4)]
            await asyncio.to_thread(timed_key_call, url)
            await asyncio.gather(*waiting, return_exceptions=True)

    try:
        run(scenario())
    finally:
        idp.close()
    assert timings["key"] < 0.8

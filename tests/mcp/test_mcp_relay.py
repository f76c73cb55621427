"""Progress from an upstream reaches the client's token; a client's cancellation reaches it.

Over streamable HTTP, as clients connect: the in-process transport keeps progress
tokens out of ``_meta``.

The upstream is ``conformance_upstream.py`` over stdio: ``test_tool_with_progress``
reports 0, 50 and 100 of 100; ``test_slow`` sleeps and notes when it is cancelled.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
from mcp_support import QUIET, TOKENS, as_, grant, run, serving, write_config
from test_mcp_content import media_upstream

from toolbound.mcp import Gateway

if TYPE_CHECKING:
    from pathlib import Path


def test_an_upstream_s_progress_reaches_the_client_s_progress_callback(tmp_path: Path) -> None:
    """Three progress notifications, in order, arrive for the downstream call."""
    config = write_config(tmp_path, media_upstream() + grant("mira", "media:read"))
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def scenario() -> None:
        gw = Gateway(config, errlog=QUIET)
        async with serving(gw) as url, as_(TOKENS["mira"], url) as client:
            result = await client.call_tool(
                "media.test_tool_with_progress", {}, progress_callback=on_progress
            )
            assert result.is_error is False

    run(scenario())
    assert seen == [(0, 100, "step 0"), (50, 100, "step 50"), (100, 100, "step 100")]


def test_a_client_s_cancellation_reaches_the_upstream_request(tmp_path: Path) -> None:
    """Cancelling the downstream call cancels the upstream one (it notes the cancellation)."""
    state = tmp_path / "upstream-state"
    config = write_config(tmp_path, media_upstream(state) + grant("mira", "media:read"))

    async def scenario() -> None:
        gw = Gateway(config, errlog=QUIET)
        async with serving(gw) as url, as_(TOKENS["mira"], url) as client:
            with anyio.move_on_after(1.0):
                await client.call_tool("media.test_slow", {"seconds": 30})
            deadline = time.monotonic() + 10
            # The upstream is another process: a file is what it leaves behind.
            while not state.exists() and time.monotonic() < deadline:  # noqa: ASYNC110
                await anyio.sleep(0.05)

    started = time.monotonic()
    run(scenario())
    assert state.read_text() == "cancelled"
    assert time.monotonic() - started < 20

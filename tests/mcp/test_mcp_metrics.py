"""The gateway's /metrics: calls by tool and outcome, quarantine, upstream health."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from mcp.shared.exceptions import MCPError
from mcp_support import TOKENS, as_, gateway, grant, run, serving, sha, time_upstream, write_config
from test_mcp_confirm_http import desk

if TYPE_CHECKING:
    from pathlib import Path

WATCHER = "watcher-token-5e1d"

OPERATOR = f"""
[[principal]]
name = "watcher"
key_sha256 = "{sha(WATCHER)}"
subject = "watcher"
tenant = "acme"
roles = ["operator"]
"""


def test_an_operator_reads_the_gateways_metrics(tmp_path: Path) -> None:
    """After a call the count and the upstream's health show; others get 401 or 403."""
    config = write_config(tmp_path, OPERATOR + time_upstream() + grant("mira", "time:read"))
    seen: dict[str, object] = {}

    async def scenario() -> None:
        async with serving(gateway(config)) as url:
            async with as_(TOKENS["mira"], url) as client:
                await client.call_tool("time.get_current_time", {"timezone": "UTC"})
                with contextlib.suppress(MCPError):  # an unknown tool is a protocol error
                    await client.call_tool("time.no_such_tool", {})
            async with desk(url, WATCHER) as operator:
                seen["ok"] = await operator.get("/metrics")
            async with desk(url, None) as nobody:
                seen["anonymous"] = await nobody.get("/metrics")
            async with desk(url, TOKENS["mira"]) as agent:
                seen["agent"] = await agent.get("/metrics")

    run(scenario())
    ok = seen["ok"]
    assert ok.status_code == 200, ok.text
    assert ok.headers["content-type"].startswith("text/plain")
    text = ok.text
    assert 'toolbound_tool_calls_total{outcome="observed",tool="time.get_current_time@' in text
    assert 'toolbound_upstream_up{upstream="time"} 1.0' in text
    assert "toolbound_quarantined_tools 0.0" in text
    assert "toolbound_pending_confirmations 0.0" in text
    assert "no_such_tool" not in text  # a made-up name never becomes a label
    assert seen["anonymous"].status_code == 401
    assert seen["agent"].status_code == 403
    assert seen["agent"].headers["content-type"] == "application/problem+json"

"""Bearer JWTs at the MCP gateway: a trusted issuer's token calls a tool like an API key."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from mcp_support import as_, gateway, grant, run, serving, time_upstream, write_config
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

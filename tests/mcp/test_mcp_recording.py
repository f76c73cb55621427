"""The gateway keeps every call in the journal of its [store], where the service keeps its own.

Real upstream (mcp-server-time), the official SDK client over streamable HTTP, and
``toolbound trace`` read back through click's runner, as an operator would run it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from click.testing import CliRunner
from mcp_support import (
    TOKENS,
    as_,
    built,
    envelope,
    gateway,
    grant,
    run,
    serving,
    time_upstream,
    write_config,
)

from toolbound.cli import _cli
from toolbound.wiring import journal_for

if TYPE_CHECKING:
    from pathlib import Path

    from toolbound.journal import StoredCall
    from toolbound.mcp import GatewayConfig


def _calls(config: GatewayConfig) -> list[StoredCall]:
    journal = journal_for(config.service.store_url)
    try:
        return journal.list_calls("acme")
    finally:
        journal.close()


def _events(config: GatewayConfig, invocation_id: str) -> list[dict[str, object]]:
    journal = journal_for(config.service.store_url)
    try:
        return journal.events(invocation_id)
    finally:
        journal.close()


def _trace(tmp_path: Path, invocation_id: str) -> str:
    result = CliRunner().invoke(
        _cli, ["trace", invocation_id, "--config", str(tmp_path / "gateway.toml")]
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_a_read_through_the_gateway_is_found_by_toolbound_trace(tmp_path: Path) -> None:
    """A read through the gateway is in the journal: trace shows its surface and events."""
    config = write_config(tmp_path, time_upstream() + grant("mira", "time:read"))
    gw = gateway(config)

    async def scenario() -> None:
        async with serving(gw) as url, as_(TOKENS["mira"], url) as client:
            result = await client.call_tool("time.get_current_time", {"timezone": "UTC"})
            assert not result.is_error
        assert gw.recorder is not None

    run(scenario())
    [call] = _calls(config)
    assert (call.surface, call.status, call.subject, call.principal) == (
        "mcp-gateway",
        "observed",
        "mira",
        "mira",
    )
    assert call.body["request"]["arguments"] == '{"timezone":"UTC"}'  # type: ignore[index]
    out = _trace(tmp_path, call.invocation_id)
    assert "surface mcp-gateway" in out
    assert "status observed" in out
    for kind in ("proposal", "transition", "attempt", "tool_message"):
        assert kind in out


def test_a_rejected_call_is_recorded_with_its_problem(tmp_path: Path) -> None:
    """A call with an argument the schema does not know is rejected and still recorded."""
    config = write_config(tmp_path, time_upstream() + grant("mira", "time:read"))

    async def scenario() -> None:
        async with serving(gateway(config)) as url, as_(TOKENS["mira"], url) as client:
            result = await client.call_tool(
                "time.get_current_time", {"timezone": "UTC", "bogus": 1}
            )
            assert envelope(result)

    run(scenario())
    [call] = _calls(config)
    assert (call.surface, call.status, call.state) == (
        "mcp-gateway",
        "rejected",
        "validation_rejected",
    )
    assert call.body["response"]["problem"]["kind"] == "validation"  # type: ignore[index]
    assert "validation_rejected" in _trace(tmp_path, call.invocation_id)


def test_a_parked_call_is_listed_waiting_then_recorded_denied(tmp_path: Path) -> None:
    """A parked gateway call is in the journal awaiting confirmation; denied, it ends so."""
    config = write_config(
        tmp_path,
        time_upstream() + grant("mira", "time:read", confirm=True),
        gateway='confirm = "console"',
    )
    gw = gateway(config)

    async def scenario() -> None:
        async with serving(gw) as url, as_(TOKENS["mira"], url) as client:
            result = await client.call_tool("time.get_current_time", {"timezone": "UTC"})
            assert result.is_error
            assert gw.recorder is not None
            gw.recorder.flush()
            [waiting] = built(lambda: _calls(config))  # the journal, off the loop
            assert (waiting.status, waiting.surface) == ("awaiting_confirmation", "mcp-gateway")
            [parked] = gw.runtime.pending()
            # A decision in the journal: off the loop, as the gateway's own routes make it.
            await gw.runtime.off_loop(
                gw.runtime.deny, parked.invocation_id, digest=parked.digest, approver="ops"
            )

    run(scenario())
    [call] = _calls(config)
    assert (call.status, call.state, call.decision, call.approver) == (
        "rejected",
        "authorization_rejected",
        "denied",
        "ops",
    )
    events = _events(config, call.invocation_id)
    kinds = [event["kind"] for event in events]
    # R14: append-only — the events up to the parking stay first.
    assert kinds[0] == "proposal"
    assert kinds.count("tool_message") == 2
    assert "confirmation" in kinds
    assert [event["seq"] for event in events] == list(range(len(events)))

"""What passes between a client and an upstream besides a call and its answer.

Progress from an upstream reaches the client's token; a client's cancellation reaches
it; its log messages reach the caller at the caller's level; its sampling and
elicitation requests reach the caller where the configuration allows; resource
subscriptions are relayed both ways.

Over streamable HTTP, as clients connect: the in-process transport keeps progress
tokens out of ``_meta``.

The upstream is ``conformance_upstream.py`` over stdio: ``test_tool_with_progress``
reports 0, 50 and 100 of 100; ``test_slow`` sleeps and notes when it is cancelled;
the others log, ask the client or announce a resource update.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import mcp_types as types
import pytest
from conformance_upstream import ELICIT_ENUMS
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_support import (
    TOKENS,
    as_,
    gateway,
    grant,
    run,
    serving,
    time_upstream,
    write_config,
)
from test_mcp_content import Recorder, media_upstream

from toolbound._state import State
from toolbound.mcp.content import TRUST_META_KEY
from toolbound.mcp.federation import RESOURCE_NOT_FOUND
from toolbound.mcp.passage import UPSTREAM_META_KEY
from toolbound.wiring import journal_for

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


def test_an_upstream_s_progress_reaches_the_client_s_progress_callback(tmp_path: Path) -> None:
    """Three progress notifications, in order, arrive for the downstream call."""
    config = write_config(tmp_path, media_upstream() + grant("mira", "media:read"))
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def scenario() -> None:
        gw = gateway(config)
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
        gw = gateway(config)
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


# -- what an upstream asks or says outside its answers -------------------------------------

ASKING = (
    "test_tool_with_logging",
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1330_enums",
    "test_touch_resource",
    "test_announce_tools_changed",
)


def asking_upstream(**settings: object) -> str:
    """The fixture server as ``media``, its asking tools reads of ``media:read`` too."""
    rules = "".join(
        f'\n[upstream.tools.{t}]\neffect = "read"\ncapability = "media:read"\n' for t in ASKING
    )
    return media_upstream(**settings) + rules + grant("mira", "media:read")


@contextlib.asynccontextmanager
async def legacy_client(url: str, token: str, **callbacks: Any) -> AsyncIterator[Client]:
    """An SDK client on a 2025-era connection (server-to-client requests, setLevel)."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy", **callbacks) as c,
    ):
        yield c


async def set_level(client: Client, level: types.LoggingLevel) -> None:
    """``logging/setLevel``, as a 2025-era client sends it."""
    request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
    await client.session.send_request(request, types.EmptyResult)


def said(result: types.CallToolResult) -> str:
    """The upstream tool's text, out of toolbound's envelope."""
    assert isinstance(result.content[0], types.TextContent)
    return str(json.loads(result.content[0].text)["data"])


def relayed(recorder: Recorder, kind: str) -> list[dict[str, object]]:
    return [dict(e.data) for e in recorder.events if e.kind == kind]


def test_an_upstream_s_log_messages_reach_the_caller_at_its_level(tmp_path: Path) -> None:
    """Three info messages arrive, marked and named; at level warning none do; both traced."""
    config = write_config(tmp_path, asking_upstream())
    recorder = Recorder()
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def scenario() -> list[types.LoggingMessageNotificationParams]:
        gw = gateway(config, sinks=[recorder])
        async with (
            serving(gw) as url,
            legacy_client(url, TOKENS["mira"], logging_callback=on_log) as client,
        ):
            await set_level(client, "info")
            await client.call_tool("media.test_tool_with_logging", {})
            at_info = list(logs)
            await set_level(client, "warning")
            await client.call_tool("media.test_tool_with_logging", {})
            return at_info

    at_info = run(scenario())
    assert [p.data for p in at_info] == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    assert {p.logger for p in at_info} == {"media"}
    assert all((p.meta or {})[TRUST_META_KEY] == "untrusted_tool_data" for p in at_info)
    assert all((p.meta or {})[UPSTREAM_META_KEY] == "media" for p in at_info)
    assert len(logs) == 3  # nothing more at level warning
    assert [e["relayed"] for e in relayed(recorder, "upstream_log")] == [True] * 3 + [False] * 3


def test_on_a_2026_connection_log_messages_follow_the_call_s_opt_in(tmp_path: Path) -> None:
    """A client that opts in at info hears the three messages; one that does not, none."""
    config = write_config(tmp_path, asking_upstream())
    heard: dict[str | None, list[object]] = {"info": [], None: []}

    async def scenario(level: types.LoggingLevel | None) -> str:
        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            heard[level].append(params.data)

        gw = gateway(config)
        async with (
            serving(gw) as url,
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['mira']}"}) as http,
            Client(
                streamable_http_client(url, http_client=http),
                logging_callback=on_log,
                log_level=level,
            ) as client,
        ):
            await client.call_tool("media.test_tool_with_logging", {})
            return client.protocol_version

    assert run(scenario("info")) == "2026-07-28"
    run(scenario(None))
    assert heard == {
        "info": ["Tool execution started", "Tool processing data", "Tool execution completed"],
        None: [],
    }


def test_sampling_reaches_the_caller_only_where_the_upstream_is_allowed(tmp_path: Path) -> None:
    """allow_sampling: the client's model answers, marked; by default refused, and traced."""
    asked: list[types.CreateMessageRequestParams] = []

    async def sample(
        _ctx: object, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        asked.append(params)
        answer = types.TextContent(type="text", text="four")
        return types.CreateMessageResult(role="assistant", content=answer, model="test-model")

    def call(folder: Path, upstream: str, recorder: Recorder) -> types.CallToolResult:
        folder.mkdir()
        config = write_config(folder, upstream)

        async def scenario() -> types.CallToolResult:
            gw = gateway(config, sinks=[recorder])
            async with (
                serving(gw) as url,
                legacy_client(url, TOKENS["mira"], sampling_callback=sample) as client,
            ):
                return await client.call_tool("media.test_sampling", {"prompt": "2 + 2?"})

        return run(scenario())

    allowed, refused = Recorder(), Recorder()
    answered = call(tmp_path / "allowed", asking_upstream(allow_sampling=True), allowed)
    assert answered.is_error is False
    assert said(answered) == "LLM response: four"
    [params] = asked
    assert (params.meta or {})[TRUST_META_KEY] == "untrusted_tool_data"
    assert (params.meta or {})[UPSTREAM_META_KEY] == "media"
    assert [e["refused"] for e in relayed(allowed, "upstream_request")] == [None]

    denied = call(tmp_path / "default", asking_upstream(), refused)
    assert denied.is_error is True
    assert len(asked) == 1  # the client was not asked again
    reasons = [str(e["refused"]) for e in relayed(refused, "upstream_request")]
    assert reasons
    assert all("allow_sampling is not set" in r for r in reasons)


def test_a_2026_client_is_not_asked_for_a_sample_and_the_upstream_hears_why(
    tmp_path: Path,
) -> None:
    """A 2026-07-28 connection takes no server-to-client request: refused, and traced."""
    config = write_config(tmp_path, asking_upstream(allow_sampling=True))
    recorder = Recorder()
    asked: list[object] = []

    async def sample(_ctx: object, params: object) -> types.CreateMessageResult:
        asked.append(params)
        answer = types.TextContent(type="text", text="never")
        return types.CreateMessageResult(role="assistant", content=answer, model="test-model")

    async def scenario() -> types.CallToolResult:
        gw = gateway(config, sinks=[recorder])
        async with (
            serving(gw) as url,
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['mira']}"}) as http,
            Client(streamable_http_client(url, http_client=http), sampling_callback=sample) as c,
        ):
            return await c.call_tool("media.test_sampling", {"prompt": "2 + 2?"})

    result = run(scenario())
    assert result.is_error is True
    assert asked == []
    reasons = [str(e["refused"]) for e in relayed(recorder, "upstream_request")]
    assert reasons
    assert all("2026-07-28" in r for r in reasons)


def test_a_refused_elicitation_is_kept_in_the_journal_with_its_reason(tmp_path: Path) -> None:
    """By default an elicitation is refused; the call's journal row keeps the event."""
    config = write_config(tmp_path, asking_upstream())
    asked: list[object] = []

    async def elicit(_ctx: object, params: object) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="decline")

    async def scenario() -> None:
        gw = gateway(config)
        async with (
            serving(gw) as url,
            legacy_client(url, TOKENS["mira"], elicitation_callback=elicit) as client,
        ):
            await client.call_tool("media.test_elicitation", {"message": "Who are you?"})

    run(scenario())
    assert asked == []
    journal = journal_for(config.service.store_url)
    try:
        [call] = journal.list_calls("acme")
        events = journal.events(call.invocation_id)
    finally:
        journal.close()
    [first, *_] = [e["data"] for e in events if e["kind"] == "upstream_request"]
    assert first["method"] == "elicitation/create"
    assert "allow_elicitation is not set" in first["refused"]


def test_elicitation_reaches_the_caller_with_its_schema_whole(tmp_path: Path) -> None:
    """allow_elicitation: the person's answer goes back; the requested schema is unchanged."""
    config = write_config(tmp_path, asking_upstream(allow_elicitation=True))
    asked: list[types.ElicitRequestParams] = []

    async def elicit(_ctx: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"untitledSingle": "option2"})

    async def scenario() -> types.CallToolResult:
        gw = gateway(config)
        async with (
            serving(gw) as url,
            legacy_client(url, TOKENS["mira"], elicitation_callback=elicit) as client,
        ):
            return await client.call_tool("media.test_elicitation_sep1330_enums", {})

    result = run(scenario())
    assert (
        said(result)
        == "Elicitation completed: action=accept, content={'untitledSingle': 'option2'}"
    )
    [params] = asked
    assert isinstance(params, types.ElicitRequestFormParams)
    assert params.requested_schema == ELICIT_ENUMS
    assert (params.meta or {})[UPSTREAM_META_KEY] == "media"


def test_a_subscribed_caller_hears_of_updates_until_it_unsubscribes(tmp_path: Path) -> None:
    """A subscription runs (traced) like a read; updates reach the caller until it unsubscribes."""
    config = write_config(tmp_path, asking_upstream() + grant("mira", "media:resources"))
    recorder = Recorder()
    heard: list[str] = []
    uri = "test://watched-resource"

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(str(message.params.uri))

    async def touch(client: Client) -> str:
        return said(await client.call_tool("media.test_touch_resource", {"uri": uri}))

    async def scenario() -> tuple[str, str]:
        gw = gateway(config, sinks=[recorder])
        async with (
            serving(gw) as url,
            legacy_client(url, TOKENS["mira"], message_handler=on_message) as client,
        ):
            subscribe = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
            await client.session.send_request(subscribe, types.EmptyResult)
            assert client.server_capabilities.resources is not None
            assert client.server_capabilities.resources.subscribe is True
            while_subscribed = await touch(client)
            await anyio.sleep(0.3)
            leave = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
            await client.session.send_request(leave, types.EmptyResult)
            return while_subscribed, await touch(client)

    while_subscribed, after = run(scenario())
    assert (while_subscribed, after) == ("subscribed", "not subscribed")
    assert heard == [uri]
    proposed = [e.data["name"] for e in recorder.events if e.kind == "proposal"]
    assert proposed[0] == "resources.subscribe.media"
    assert State.OBSERVED in [e.state for e in recorder.events]


def test_a_caller_without_the_resources_grant_cannot_subscribe(tmp_path: Path) -> None:
    """Leo holds no media:resources: the URI is unknown to him, as for a read."""
    config = write_config(tmp_path, asking_upstream())

    async def scenario() -> MCPError:
        gw = gateway(config)
        async with serving(gw) as url, legacy_client(url, TOKENS["leo"]) as client:
            subscribe = types.SubscribeRequest(
                params=types.SubscribeRequestParams(uri="test://watched-resource")
            )
            with pytest.raises(MCPError) as refused:
                await client.session.send_request(subscribe, types.EmptyResult)
            return refused.value

    refused = run(scenario())
    assert refused.code == RESOURCE_NOT_FOUND
    assert "Resource not found" in refused.error.message


def test_subscriptions_are_offered_only_when_an_upstream_offers_them(tmp_path: Path) -> None:
    """Before an upstream without subscriptions, resources.subscribe is not advertised."""
    config = write_config(tmp_path, time_upstream() + grant("mira", "time:resources"))

    async def scenario() -> types.ServerCapabilities:
        gw = gateway(config)
        async with serving(gw) as url, legacy_client(url, TOKENS["mira"]) as client:
            return client.server_capabilities

    offered = run(scenario())
    assert offered.resources is not None
    assert not offered.resources.subscribe


def test_an_upstream_s_tool_list_change_reaches_the_gateway_s_clients(tmp_path: Path) -> None:
    """The gateway re-reads the upstream, then its client hears tools/list_changed, marked."""
    config = write_config(tmp_path, asking_upstream())
    heard: list[types.ToolListChangedNotification] = []

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append(message)

    async def scenario() -> None:
        gw = gateway(config)
        async with (
            serving(gw) as url,
            legacy_client(url, TOKENS["mira"], message_handler=on_message) as client,
        ):
            await client.call_tool("media.test_announce_tools_changed", {})
            with anyio.fail_after(10):
                while not heard:  # noqa: ASYNC110 - the notification comes on its own
                    await anyio.sleep(0.05)

    run(scenario())
    [notification] = heard
    meta = notification.params.meta if notification.params is not None else None
    assert (meta or {})[UPSTREAM_META_KEY] == "media"

"""tools/call answered below the SDK's typed layer: the same JSON on the wire, the same refusals.

:func:`toolbound.mcp.wire.wire_result` against the SDK server's own shaping of a
handler's result (``ServerRunner._serialize``), for every protocol version; and a
malformed or premature ``tools/call`` sent as raw JSON-RPC, refused alike with and
without :class:`~toolbound.mcp.wire.DirectCalls`.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import pytest
from local_tools import registry
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.memory import create_client_server_memory_streams
from mcp_support import MIRA, run
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from toolbound import Grant, GrantPolicy, Runtime
from toolbound.mcp import GuardedServer, StaticCatalog, holds_capabilities
from toolbound.mcp.server import error_result
from toolbound.mcp.telemetry import ServerSpans
from toolbound.mcp.wire import DirectCalls, _copies, wire_result

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from mcp.server import Server

TEXT = types.TextContent(type="text", text='{"type":"tool_result","data":{"a":1}}')
ENVELOPE = {"kind": "execution", "code": "locked", "hint": None, "nested": [1, None, {"x": 2.5}]}

RESULTS = {
    "structured object": types.CallToolResult(content=[TEXT], structured_content={"a": 1}),
    "structured scalar": types.CallToolResult(content=[TEXT], structured_content=3),
    "structured array": types.CallToolResult(content=[TEXT], structured_content=[1, "b"]),
    "text only": types.CallToolResult(content=[TEXT]),
    "several texts": types.CallToolResult(content=[TEXT, TEXT]),
    "no content": types.CallToolResult(content=[]),
    "error envelope": error_result(ENVELOPE),
    "own server info": types.CallToolResult(
        content=[TEXT], _meta={"io.modelcontextprotocol/serverInfo": {"name": "x", "version": "9"}}
    ),
    "not plain JSON": types.CallToolResult(content=[TEXT], structured_content={"t": (1, 2)}),
    "annotated text": types.CallToolResult(
        content=[
            types.TextContent(type="text", text="x", annotations=types.Annotations(priority=1))
        ]
    ),
    "image block": types.CallToolResult(
        content=[
            TEXT,
            types.ImageContent(
                type="image", data="AAAA", mime_type="image/png", _meta={"io.toolbound/trust": "u"}
            ),
        ]
    ),
    "input required": types.InputRequiredResult(
        input_requests={
            "confirm": types.ElicitRequest(
                params=types.ElicitRequestFormParams(
                    message="ok?", requested_schema={"type": "object", "properties": {}}
                )
            )
        },
        request_state="state",
    ),
}


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[GuardedServer]:
    """A guarded server over the notes pack, its runtime closed after."""
    grants = [
        Grant(subject="mira", tenant="acme", capability="notes:read", actions=frozenset({"read"}))
    ]
    server = GuardedServer(
        runtime=Runtime(policy=GrantPolicy(grants)),
        catalog=StaticCatalog(registry(tmp_path / "notes.txt"), holds_capabilities(grants)),
    )
    yield server
    server.runtime.close()


def _shaped_by_sdk(server: Server[Any], result: object, version: str) -> object:
    runner = ServerRunner(server, Connection.from_envelope(version, None, None), {})
    try:
        return runner._serialize("tools/call", version, result)  # type: ignore[arg-type]
    except MCPError as exc:
        return ("refused", exc.error.code, exc.error.message)


def _ours(server: Server[Any], result: Any, version: str) -> object:
    try:
        return wire_result(result, version, lambda: server.server_info_stamp)
    except MCPError as exc:
        return ("refused", exc.error.code, exc.error.message)


@pytest.mark.parametrize("version", KNOWN_PROTOCOL_VERSIONS)
@pytest.mark.parametrize("name", list(RESULTS))
def test_a_result_goes_on_the_wire_as_the_sdk_would_send_it(
    guarded: GuardedServer, name: str, version: str
) -> None:
    """Written out or shaped the SDK's way, the JSON object (or the refusal) is the SDK's."""
    server = guarded.lowlevel(MIRA)
    result = RESULTS[name]
    assert _ours(server, result, version) == _shaped_by_sdk(server, result, version)


async def _raw_calls(
    server: Server[Any], requests: list[tuple[str, dict[str, Any] | None]]
) -> list[object]:
    """Send raw JSON-RPC requests to ``server`` over memory streams; each answer or error."""
    answers: list[object] = []
    async with create_client_server_memory_streams() as (client, served):
        dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(*client)

        async def ignore(*_args: object) -> None:
            return None

        async def refuse(*_args: object) -> dict[str, Any]:
            raise MCPError(code=types.METHOD_NOT_FOUND, message="no")

        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: server.run(served[0], served[1], server.create_initialization_options())
            )
            await tg.start(dispatcher.run, refuse, ignore)
            for method, params in requests:
                if method.startswith("notifications/"):
                    await dispatcher.notify(method, params)
                    continue
                try:
                    answers.append(await dispatcher.send_raw_request(method, params))
                except MCPError as exc:
                    answers.append(("error", exc.error.code, exc.error.message))
            tg.cancel_scope.cancel()
    return answers


INITIALIZE = (
    "initialize",
    {
        "protocolVersion": LATEST_HANDSHAKE_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
)
MALFORMED = [
    ("tools/call", {"name": "notes.read", "arguments": {}}),  # before initialize: refused
    INITIALIZE,
    ("notifications/initialized", None),
    ("tools/call", {"name": 5}),
    ("tools/call", {"arguments": {}}),
    ("tools/call", {"name": "notes.read", "arguments": [1]}),
    ("tools/call", {"name": "notes.read", "_meta": {"progressToken": [1]}}),
    ("tools/call", None),
    ("tools/call", {"name": "no.such.tool", "arguments": {}}),
]


def test_malformed_and_premature_calls_are_refused_as_the_sdk_refuses_them(
    guarded: GuardedServer,
) -> None:
    """The SDK's own checks run first: their refusals are the same with the fast path or not."""
    fast = guarded.lowlevel(MIRA)
    assert any(isinstance(m, DirectCalls) for m in fast.middleware)
    sdk = guarded.lowlevel(MIRA)
    sdk.middleware[:] = [m for m in sdk.middleware if isinstance(m, ServerSpans)]
    with_fast_path = run(_raw_calls(fast, MALFORMED))
    without = run(_raw_calls(sdk, MALFORMED))
    assert with_fast_path == without
    refusals = [a for a in with_fast_path if isinstance(a, tuple)]
    assert [a[1] for a in refusals] == [types.INVALID_PARAMS] * 7


def test_a_well_formed_call_answers_the_same_with_the_fast_path_or_not(
    guarded: GuardedServer,
) -> None:
    """notes.read over raw JSON-RPC: the same result object either way."""
    calls = [
        INITIALIZE,
        ("notifications/initialized", None),
        ("tools/call", {"name": "notes.read", "arguments": {}}),
    ]
    fast = guarded.lowlevel(MIRA)
    sdk = guarded.lowlevel(MIRA)
    sdk.middleware[:] = [m for m in sdk.middleware if isinstance(m, ServerSpans)]
    answered = run(_raw_calls(fast, calls))[-1]
    assert answered == run(_raw_calls(sdk, calls))[-1]
    assert isinstance(answered, dict)
    assert answered["structuredContent"] == {"titles": [], "count": 0}


def test_every_result_gets_a_server_info_stamp_of_its_own(guarded: GuardedServer) -> None:
    """The stamp equals the SDK's; no two results share one (an in-process client gets dicts)."""
    server = guarded.lowlevel(MIRA)
    fresh = _copies(lambda: server.server_info_stamp)
    stamps = [fresh() for _ in range(3)]
    assert stamps == [server.server_info_stamp] * 3
    assert len({id(s) for s in stamps}) == 3
    stamps[0]["name"] = "changed"
    assert fresh() == server.server_info_stamp


def test_a_stamp_with_nested_values_is_copied_deeply() -> None:
    """Icons are objects in the stamp: each result gets its own, as the SDK's deep copy does."""
    source = {"name": "x", "icons": [{"src": "https://example.com/i.png"}]}

    def deep() -> dict[str, Any]:
        return copy.deepcopy(source)

    fresh = _copies(deep)
    first, second = fresh(), fresh()
    assert first == second == source
    assert first["icons"] is not second["icons"]

"""A toolbound tool set served as a guarded MCP server (in process, official SDK client)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import jsonschema
import mcp_types as types
import pytest
from local_tools import registry
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_support import LEO, MIRA, envelope, run

from toolbound import Grant, GrantPolicy, Runtime
from toolbound.mcp import GuardedServer, StaticCatalog, holds_capabilities
from toolbound.mcp.server import annotations_for

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

GRANTS = [
    Grant(subject="mira", tenant="acme", capability="notes:read", actions=frozenset({"read"})),
    Grant(
        subject="mira",
        tenant="acme",
        capability="notes:write",
        actions=frozenset({"create"}),
        confirm=True,
    ),
    Grant(subject="leo", tenant="acme", capability="notes:read", actions=frozenset({"read"})),
]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., GuardedServer]]:
    """Builds guarded servers over the notes in tmp_path, and closes their runtimes after."""
    made: list[GuardedServer] = []

    def build(*, confirm: str = "elicitation") -> GuardedServer:
        server = GuardedServer(
            runtime=Runtime(policy=GrantPolicy(GRANTS)),
            catalog=StaticCatalog(registry(tmp_path / "notes.txt"), holds_capabilities(GRANTS)),
            confirm=confirm,
        )
        made.append(server)
        return server

    yield build
    for server in made:
        server.runtime.close()


def data(result: types.CallToolResult) -> object:
    return json.loads(result.content[0].text)["data"]  # type: ignore[union-attr]


class Person:
    """Approves every elicitation, and counts them."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self, _ctx: object, _params: object) -> types.ElicitResult:
        self.asked += 1
        return types.ElicitResult(action="accept", content={"approve": True})


@pytest.mark.parametrize(
    ("effect", "read_only", "destructive", "open_world"),
    [
        ("pure", True, False, False),
        ("read", True, False, False),
        ("reversible_write", False, False, False),
        ("irreversible_write", False, True, False),
        ("open_world", False, True, True),
    ],
)
def test_annotations_follow_the_effect_class(
    effect: str,
    read_only: bool,  # noqa: FBT001 - a parametrised expectation
    destructive: bool,  # noqa: FBT001
    open_world: bool,  # noqa: FBT001
) -> None:
    """Every class maps to hints that say what toolbound enforces (repeats replay: idempotent)."""
    notes = annotations_for(effect)  # type: ignore[arg-type]
    assert (notes.read_only_hint, notes.destructive_hint, notes.open_world_hint) == (
        read_only,
        destructive,
        open_world,
    )
    assert notes.idempotent_hint is True


def test_each_subject_lists_exactly_the_tools_its_grants_reach(
    serve: Callable[..., GuardedServer],
) -> None:
    """Mira reads and writes notes; leo only reads, and notes.add does not exist for him."""
    server = serve()

    async def scenario() -> tuple[dict[str, types.Tool], list[str], str]:
        async with Client(server.lowlevel(MIRA)) as mira, Client(server.lowlevel(LEO)) as leo:
            mine = {t.name: t for t in (await mira.list_tools()).tools}
            his = [t.name for t in (await leo.list_tools()).tools]
            with pytest.raises(MCPError) as refused:
                await leo.call_tool("notes.add", {"title": "x"})
            return mine, his, str(refused.value)

    mine, his, refused = run(scenario())
    assert sorted(mine) == ["notes.add", "notes.fail", "notes.read"]
    assert sorted(his) == ["notes.fail", "notes.read"]
    assert refused == "Unknown tool: notes.add"
    add = mine["notes.add"]
    assert add.input_schema["properties"]["title"]["maxLength"] == 40
    assert add.annotations is not None
    assert add.annotations.read_only_hint is False
    assert add.meta == {"io.toolbound/version": "v1", "io.toolbound/effect": "reversible_write"}


def test_a_call_returns_structured_content_valid_against_the_output_schema(
    serve: Callable[..., GuardedServer],
) -> None:
    """notes.read: schema-valid structuredContent, and the untrusted envelope as text."""
    server = serve()

    async def scenario() -> tuple[types.Tool, types.CallToolResult]:
        async with Client(server.lowlevel(MIRA)) as client:
            tool = next(t for t in (await client.list_tools()).tools if t.name == "notes.read")
            return tool, await client.call_tool("notes.read", {})

    tool, result = run(scenario())
    assert result.is_error is False
    jsonschema.validate(result.structured_content, tool.output_schema or {})
    assert result.structured_content == {"titles": [], "count": 0}
    assert json.loads(result.content[0].text)["trust"] == "untrusted_tool_data"  # type: ignore[union-attr]


def test_an_execution_error_is_an_error_result_with_kind_recoverable_and_hint(
    serve: Callable[..., GuardedServer],
) -> None:
    """notes.fail refuses before its commit: isError, and the problem in machine-readable form."""
    server = serve()

    async def scenario() -> types.CallToolResult:
        async with Client(server.lowlevel(MIRA)) as client:
            return await client.call_tool("notes.fail", {})

    result = run(scenario())
    assert result.is_error is True
    error = envelope(result)
    assert error["commit_status"] == "not_committed"
    assert error["error"] == {
        "kind": "execution",
        "code": "locked",
        "message": "the notebook is locked",
        "recoverable": True,
        "hint": "ask the owner to unlock it",
    }


def test_arguments_are_parsed_strictly(serve: Callable[..., GuardedServer]) -> None:
    """A NaN that slipped through JSON-RPC is refused by the parse gate, not passed on."""
    server = serve()
    params = types.CallToolRequestParams(name="notes.add", arguments={"title": float("nan")})
    result = run(server.call_tool(MIRA, params))
    assert result.is_error is True  # type: ignore[union-attr]
    error = envelope(result)["error"]  # type: ignore[union-attr]
    assert (error["kind"], error["code"]) == ("parse", "non_finite_number")


def test_a_confirmed_write_runs_once_and_its_repeat_replays_without_asking(
    tmp_path: Path, serve: Callable[..., GuardedServer]
) -> None:
    """Elicitation approves the first notes.add; the identical second call replays it."""
    server = serve()
    person = Person()

    async def scenario() -> list[types.CallToolResult]:
        async with Client(server.lowlevel(MIRA), elicitation_callback=person) as client:
            return [await client.call_tool("notes.add", {"title": "buy milk"}) for _ in range(2)]

    first, second = run(scenario())
    assert first.is_error is False
    assert data(second) == data(first) == {"added": "buy milk", "count": 1}
    assert (tmp_path / "notes.txt").read_text() == "buy milk\n"
    assert person.asked == 1


def test_a_person_who_denies_through_elicitation_tells_the_model_why(
    tmp_path: Path, serve: Callable[..., GuardedServer]
) -> None:
    """The form's optional reason reaches the model's tool result, attributed to the person."""
    server = serve()
    asked: list[dict[str, object]] = []

    async def deny(_ctx: object, params: types.ElicitRequestFormParams) -> types.ElicitResult:
        asked.append(params.requested_schema)
        return types.ElicitResult(
            action="accept", content={"approve": False, "reason": "we are out of milk already"}
        )

    async def scenario() -> types.CallToolResult:
        async with Client(server.lowlevel(MIRA), elicitation_callback=deny) as client:
            return await client.call_tool("notes.add", {"title": "buy milk"})

    result = run(scenario())
    assert result.is_error is True
    assert "reason" in asked[0]["properties"]  # type: ignore[operator]
    error = envelope(result)["error"]  # type: ignore[index]
    assert error["code"] == "denied_by_person"
    assert 'who said: "we are out of milk already"' in error["message"]
    assert not (tmp_path / "notes.txt").exists()


def test_a_forged_request_state_is_never_taken_as_an_answer(
    tmp_path: Path, serve: Callable[..., GuardedServer]
) -> None:
    """A retry carrying an approval under a state this server did not seal asks again instead."""
    server = serve()

    async def scenario() -> object:
        async with Client(server.lowlevel(MIRA), elicitation_callback=Person()) as client:
            return await client.session.call_tool(
                "notes.add",
                {"title": "forged"},
                input_responses={
                    "confirm": types.ElicitResult(action="accept", content={"approve": True})
                },
                request_state="whatever.0000",
                allow_input_required=True,
            )

    answer = run(scenario())
    assert isinstance(answer, types.InputRequiredResult)
    assert not (tmp_path / "notes.txt").exists()


def test_console_mode_never_asks_the_client(serve: Callable[..., GuardedServer]) -> None:
    """confirm="console": even a client that could answer gets the pending result."""
    server = serve(confirm="console")
    person = Person()

    async def scenario() -> types.CallToolResult:
        async with Client(server.lowlevel(MIRA), elicitation_callback=person) as client:
            return await client.call_tool("notes.add", {"title": "later"})

    result = run(scenario())
    assert envelope(result)["status"] == "awaiting_confirmation"  # type: ignore[index]
    assert person.asked == 0
    assert [p.tool for p in server.runtime.pending()] == ["notes.add@v1"]

"""A pack's resources, prompts, content blocks, progress and logs through mcp-serve (R18).

In process, with the official SDK client: on a 2025-era connection (``mode="legacy"``)
where a test needs ``logging/setLevel`` or ``resources/subscribe``, which the
2026-07-28 protocol replaced.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import time
import warnings
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import mcp_types as types
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_support import LEO, MIRA, run

from toolbound import Grant, GrantPolicy, Proposal, Registry, Runtime, Subject, ToolSpec
from toolbound.define import tool
from toolbound.library import Message, prompt, resource, resource_template
from toolbound.mcp import GuardedServer, HttpEndpoint, StaticCatalog, holds_capabilities
from toolbound.mcp.server import holds_capability
from toolbound.mcp.serving_resources import LocalResources
from toolbound.pipeline.runtime import CallContext
from toolbound.results.content import Content, Embedded, Image, Text

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from toolbound import ToolContext
    from toolbound._model import JSONObject, JSONValue, Resource
    from toolbound.trace import TraceEvent

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
    "0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
)
NOBODY = Subject(id="nobody", tenant="acme")
LIMIT = 1000


@dataclass(frozen=True, slots=True)
class Prefix:
    """A scope: the resources whose id starts with ``prefix``."""

    prefix: str

    def admits(self, resource: Resource, subject: Subject) -> str | None:
        del subject
        return None if resource.id.startswith(self.prefix) else "outside_scope"


READ = frozenset({"read"})
GRANTS = [
    Grant(subject="mira", tenant="acme", capability="docs:read", actions=READ),
    Grant(
        subject="leo",
        tenant="acme",
        capability="docs:read",
        actions=READ,
        scope=Prefix("docs://page/"),
    ),
    Grant(
        subject="mira",
        tenant="acme",
        capability="docs:write",
        actions=frozenset({"modify", "create"}),
    ),
]


@resource("docs://readme", mime_type="text/markdown", capabilities=("docs:read",))
def readme() -> str:
    """The read-me."""
    return "# Read me\n"


@resource("docs://logo", mime_type="image/png", capabilities=("docs:read",))
def logo() -> bytes:
    """The logo."""
    return PNG


@resource("docs://big", capabilities=("docs:read",))
def big() -> str:
    """Too large to pass on."""
    return "x" * (LIMIT + 1)


@resource_template(
    "docs://page/{slug}",
    capabilities=("docs:read",),
    complete={"slug": lambda typed: [s for s in ("intro", "install") if s.startswith(typed)]},
)
async def page(slug: str) -> str:
    """One page, by its slug."""
    return f"page {slug}"


@prompt(capabilities=("docs:read",), complete={"tone": lambda _typed: ["brief", "long"]})
def review(topic: str, tone: str = "brief") -> list[Message]:
    """Review a page.

    Args:
        topic: What to review.
        tone: How to write it.

    """
    return [
        Message(content=Text(text=f"Review {topic}, {tone}.")),
        Message(content=Image(data=PNG, mime_type="image/png")),
        Message(content=Embedded(uri="docs://readme", text="# Read me\n", mime_type="text/plain")),
    ]


@dataclass
class Pack:
    """The docs pack: a registry with tools, resources, a template and a prompt."""

    registry: Registry = field(default_factory=Registry)
    reported_from: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for item in (readme, logo, big, page):
            item.register(self.registry)
        review.register(self.registry)
        spec = ToolSpec(
            name="docs.touch",
            version="v1",
            description="Mark the read-me changed.",
            input_schema={"type": "object", "properties": {}},
            effect="reversible_write",
            capabilities=("docs:write",),
        )
        self.registry.register(spec, self.touch)
        for name, run_ in (("docs.chart", self.chart), ("docs.work", self.work)):
            self.registry.register(
                ToolSpec(
                    name=name,
                    version="v1",
                    description=name,
                    input_schema={"type": "object", "properties": {}},
                    effect="read",
                    capabilities=("docs:read",),
                ),
                run_,
            )

    def touch(self, _args: JSONObject, _ctx: ToolContext) -> JSONValue:
        self.registry.library.changed("docs://readme")
        return "touched"

    def chart(self, _args: JSONObject, _ctx: ToolContext) -> Content:
        return Content("A chart:", Image(data=PNG, mime_type="image/png"))

    def work(self, _args: JSONObject, ctx: ToolContext) -> JSONValue:
        """A sync tool: it reports from a worker thread."""
        self.reported_from.append(threading.current_thread().name)
        for step in (1, 2, 3):
            ctx.report_progress(step, 3, f"step {step}")
            time.sleep(0.01)
        ctx.log("detail", level="debug")
        ctx.log({"rows": 3}, level="info", logger="docs")
        ctx.log("disk almost full", level="warning")
        return "worked"


class Events:
    """A trace sink that keeps every event."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def emit(self, invocation_id: str, event: TraceEvent) -> None:
        del invocation_id
        self.events.append(event)

    def kinds(self, kind: str) -> list[TraceEvent]:
        return [e for e in self.events if e.kind == kind]


@pytest.fixture
def pack() -> Pack:
    return Pack()


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def server(pack: Pack, events: Events) -> Iterator[GuardedServer]:
    runtime = Runtime(policy=GrantPolicy(GRANTS), sinks=(events,))
    library = LocalResources(
        pack.registry.library, runtime=runtime, holds=holds_capability(GRANTS), limit=LIMIT
    )
    yield GuardedServer(
        runtime=runtime,
        catalog=StaticCatalog(pack.registry, holds_capabilities(GRANTS)),
        content=lambda _name: ("", LIMIT),
        federation=library,
    )
    library.close()
    runtime.close()


def legacy(server: GuardedServer, subject: Subject, **kwargs: Any) -> Client:
    return Client(server.lowlevel(subject), mode="legacy", **kwargs)


def test_server_info_names_toolbound_s_version(server: GuardedServer) -> None:
    """serverInfo.version is the installed package's version, on either era of connection."""

    async def scenario() -> tuple[str | None, str | None]:
        async with Client(server.lowlevel(MIRA)) as modern, legacy(server, MIRA) as old:
            versions = [
                None if c.server_info is None else c.server_info.version for c in (modern, old)
            ]
            return versions[0], versions[1]

    assert run(scenario()) == (version("toolbound"), version("toolbound"))


# -- resources ---------------------------------------------------------------------------------


def test_a_caller_lists_the_resources_and_templates_its_grants_reach(
    server: GuardedServer,
) -> None:
    """Mira and leo hold docs:read and list them all; nobody holds it and sees none."""

    async def scenario() -> tuple[list[str], list[str], list[str], int]:
        async with Client(server.lowlevel(MIRA)) as mira, Client(server.lowlevel(NOBODY)) as no:
            uris = [str(r.uri) for r in (await mira.list_resources()).resources]
            templates = [t.uri_template for t in (await mira.list_resource_templates())
                         .resource_templates]  # fmt: skip
            none = [str(r.uri) for r in (await no.list_resources()).resources]
            prompts = len((await no.list_prompts()).prompts)
            return uris, templates, none, prompts

    uris, templates, none, prompts = run(scenario())
    assert uris == ["docs://readme", "docs://logo", "docs://big"]
    assert templates == ["docs://page/{slug}"]
    assert (none, prompts) == ([], 0)


def test_a_read_runs_through_the_runtime_and_its_contents_are_marked_untrusted(
    server: GuardedServer, events: Events
) -> None:
    """resources/read: authorized, traced (resource_contents), text and blob marked untrusted."""

    async def scenario() -> tuple[types.ReadResourceResult, types.ReadResourceResult]:
        async with Client(server.lowlevel(MIRA)) as client:
            return (
                await client.read_resource("docs://readme"),
                await client.read_resource("docs://logo"),
            )

    text, blob = run(scenario())
    first = text.contents[0]
    assert isinstance(first, types.TextResourceContents)
    assert (first.text, first.mime_type) == ("# Read me\n", "text/markdown")
    assert first.meta == {"io.toolbound/trust": "untrusted_tool_data"}
    second = blob.contents[0]
    assert isinstance(second, types.BlobResourceContents)
    assert base64.b64decode(second.blob) == PNG
    read = [e.data["uri"] for e in events.kinds("resource_contents")]
    assert read == ["docs://readme", "docs://logo"]
    tools = {e.data.get("tool") for e in events.events if e.kind == "proposed"} - {None}
    assert tools <= {"resources.read.readme", "resources.read.logo"}


def test_a_grant_scope_applies_to_a_read_as_to_any_call(server: GuardedServer) -> None:
    """Leo's scope reaches docs://page/ only: a page reads, the read-me is refused."""

    async def scenario() -> tuple[types.ReadResourceResult, str]:
        async with Client(server.lowlevel(LEO)) as client:
            found = await client.read_resource("docs://page/intro")
            with pytest.raises(MCPError) as refused:
                await client.read_resource("docs://readme")
            return found, str(refused.value)

    found, refused = run(scenario())
    assert found.contents[0].text == "page intro"  # type: ignore[union-attr]
    assert "outside_scope" in refused


def test_hidden_and_absent_resources_are_refused_alike(server: GuardedServer) -> None:
    """Nobody reading the read-me and mira reading a URI no one declared: -32602, same words.

    The code and ``data.uri`` are the specification's since its 2025-11-25 revision.
    """

    async def refuse(subject: Subject, uri: str) -> tuple[int, str, object]:
        async with Client(server.lowlevel(subject)) as client:
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
            error = refused.value.error
            return error.code, error.message, error.data

    assert run(refuse(NOBODY, "docs://readme")) == (
        -32602,
        "Resource not found: docs://readme",
        {"uri": "docs://readme"},
    )
    assert run(refuse(MIRA, "docs://nowhere")) == (
        -32602,
        "Resource not found: docs://nowhere",
        {"uri": "docs://nowhere"},
    )


def test_an_item_over_the_limit_is_replaced_by_a_note_and_the_cut_recorded(
    server: GuardedServer, events: Events
) -> None:
    """docs://big is one byte over: a JSON note says what was cut; the trace has the cut."""

    async def scenario() -> types.ReadResourceResult:
        async with Client(server.lowlevel(MIRA)) as client:
            return await client.read_resource("docs://big")

    note = json.loads(run(scenario()).contents[0].text)  # type: ignore[union-attr]
    assert note["type"] == "content_cut"
    assert f"max_content_bytes of {LIMIT}" in note["detail"]
    assert "from resource big" in note["detail"]
    (recorded,) = events.kinds("resource_contents")
    assert [c.pointer for c in recorded.data["cuts"]] == ["/contents/0"]  # type: ignore[attr-defined]


def test_a_subscriber_hears_when_the_pack_says_a_resource_changed(
    server: GuardedServer,
) -> None:
    """docs.touch calls library.changed: the subscriber hears once; unsubscribed, no more."""
    updates: list[str] = []
    heard = asyncio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))
            heard.set()

    async def scenario() -> None:
        async with legacy(server, MIRA, message_handler=on_message) as client:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # subscriptions are 2025-era
                await client.subscribe_resource("docs://readme")
                await client.call_tool("docs.touch", {})
                await asyncio.wait_for(heard.wait(), 5)
                await client.unsubscribe_resource("docs://readme")
            await client.call_tool("docs.touch", {"again": 1})
            await asyncio.sleep(0.1)

    run(scenario())
    assert updates == ["docs://readme"]


def test_a_listen_stream_honours_only_the_resources_the_caller_may_read(
    server: GuardedServer,
) -> None:
    """2026-07-28: mira listens to the read-me and an unknown URI; only the read-me is honoured.

    Nobody, who may read neither, is honoured nothing; mira hears the read-me change.
    """

    async def scenario() -> tuple[list[str], list[str], str]:
        async with Client(server.lowlevel(MIRA)) as mira, Client(server.lowlevel(NOBODY)) as no:
            async with no.listen(resource_subscriptions=["docs://readme"]) as theirs:
                refused = list(theirs.honored.resource_subscriptions or [])
            async with mira.listen(
                resource_subscriptions=["docs://readme", "docs://nowhere"]
            ) as mine:
                honored = list(mine.honored.resource_subscriptions or [])
                await mira.call_tool("docs.touch", {})
                event = await asyncio.wait_for(anext(aiter(mine)), 5)
            return refused, honored, str(event.uri)  # type: ignore[union-attr]

    refused, honored, changed = run(scenario())
    assert (refused, honored, changed) == ([], ["docs://readme"], "docs://readme")


def test_a_subscription_to_a_resource_the_caller_may_not_read_is_refused(
    server: GuardedServer,
) -> None:
    """Nobody may not subscribe to the read-me: the same -32602 as a read."""

    async def scenario() -> int:
        async with legacy(server, NOBODY) as client:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with pytest.raises(MCPError) as refused:
                    await client.subscribe_resource("docs://readme")
            return refused.value.error.code

    assert run(scenario()) == -32602


# -- prompts and completion ---------------------------------------------------------------------


def test_a_prompt_lists_its_arguments_and_renders_them(server: GuardedServer) -> None:
    """review: topic required, tone optional; text stays, the image and resource are marked."""

    async def scenario() -> tuple[types.Prompt, types.GetPromptResult]:
        async with Client(server.lowlevel(MIRA)) as client:
            (listed,) = (await client.list_prompts()).prompts
            return listed, await client.get_prompt("review", {"topic": "install"})

    listed, got = run(scenario())
    assert [(a.name, a.required, a.description) for a in listed.arguments or []] == [
        ("topic", True, "What to review."),
        ("tone", False, "How to write it."),
    ]
    text, image, embedded = (m.content for m in got.messages)
    assert isinstance(text, types.TextContent)
    assert (text.text, text.meta) == ("Review install, brief.", None)
    assert isinstance(image, types.ImageContent)
    assert isinstance(embedded, types.EmbeddedResource)
    for block in (image, embedded):
        assert block.meta == {"io.toolbound/trust": "untrusted_tool_data"}


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({}, "prompt review: missing topic"),
        ({"topic": "x", "mood": "y"}, "prompt review: unknown mood"),
    ],
)
def test_a_prompt_refuses_missing_and_unknown_arguments(
    server: GuardedServer, arguments: dict[str, str], error: str
) -> None:
    """prompts/get checks the declared arguments: -32602 naming what is wrong."""

    async def scenario() -> tuple[int, str]:
        async with Client(server.lowlevel(MIRA)) as client:
            with pytest.raises(MCPError) as refused:
                await client.get_prompt("review", arguments)
            return refused.value.error.code, refused.value.error.message

    assert run(scenario()) == (-32602, error)


def test_completion_answers_for_prompt_and_template_arguments(server: GuardedServer) -> None:
    """Tone completes to brief and long; slug "in" to intro and install; topic to nothing."""

    async def scenario() -> list[list[str]]:
        async with Client(server.lowlevel(MIRA)) as client:
            prompt_ref = types.PromptReference(type="ref/prompt", name="review")
            page_ref = types.ResourceTemplateReference(
                type="ref/resource", uri="docs://page/{slug}"
            )
            asked = [
                (prompt_ref, {"name": "tone", "value": ""}),
                (page_ref, {"name": "slug", "value": "in"}),
                (prompt_ref, {"name": "topic", "value": "x"}),
            ]
            return [(await client.complete(r, a)).completion.values for r, a in asked]

    assert run(scenario()) == [["brief", "long"], ["intro", "install"], []]


# -- content, progress and logs ------------------------------------------------------------------


def test_a_tool_answering_content_reaches_the_client_as_blocks(server: GuardedServer) -> None:
    """docs.chart: the envelope as text naming the image, then the image block, marked."""

    async def scenario() -> types.CallToolResult:
        async with Client(server.lowlevel(MIRA)) as client:
            return await client.call_tool("docs.chart", {})

    result = run(scenario())
    text, image = result.content
    envelope = json.loads(text.text)  # type: ignore[union-attr]
    assert envelope["trust"] == "untrusted_tool_data"
    assert envelope["data"] == [
        {"type": "text", "text": "A chart:"},
        {"type": "image", "passed_as_block": 1, "what": "image image/png"},
    ]
    assert isinstance(image, types.ImageContent)
    assert base64.b64decode(image.data) == PNG
    assert image.meta == {"io.toolbound/trust": "untrusted_tool_data"}


def test_elsewhere_a_content_answer_is_a_json_value_and_reports_go_nowhere(pack: Pack) -> None:
    """Without MCP: docs.chart's value is the blocks' JSON; docs.work's reports are dropped."""
    with Runtime(policy=GrantPolicy(GRANTS)) as runtime:
        context = CallContext(subject=MIRA, tools=pack.registry.toolset())
        chart = runtime.run(Proposal(name="docs.chart", arguments=b"{}", proposal_id="p1"), context)
        work = runtime.run(Proposal(name="docs.work", arguments=b"{}", proposal_id="p2"), context)
    assert chart.kind == work.kind == "observed"
    assert chart.result.value == [  # type: ignore[union-attr]
        {"type": "text", "text": "A chart:"},
        {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"},
    ]
    assert work.result.value == "worked"  # type: ignore[union-attr]


def test_progress_and_logs_from_a_sync_tool_reach_the_client_in_order(
    server: GuardedServer, pack: Pack, events: Events
) -> None:
    """docs.work in a worker thread: three progress steps; logs from the level set (warning).

    The trace counts what was sent and dropped, without the messages (R14).
    """
    logs: list[types.LoggingMessageNotificationParams] = []
    steps: list[tuple[float, float | None, str | None]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append((progress, total, message))

    async def scenario() -> types.CallToolResult:
        async with legacy(server, MIRA, logging_callback=on_log) as client:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # logging/setLevel is 2025-era
                await client.set_logging_level("warning")
            return await client.call_tool("docs.work", {}, progress_callback=on_progress)

    result = run(scenario())
    assert result.is_error is False
    assert pack.reported_from != [threading.main_thread().name]
    assert steps == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert [(log.level, log.data) for log in logs] == [("warning", "disk almost full")]
    (counted,) = events.kinds("tool_reports")
    assert dict(counted.data) == {"progress": 3, "logs": 1, "dropped": 2}


def test_without_a_level_set_info_and_above_reach_the_client(
    server: GuardedServer, events: Events
) -> None:
    """No logging/setLevel: info and warning arrive, debug does not; no token, no progress."""
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def scenario() -> None:
        async with legacy(server, MIRA, logging_callback=on_log) as client:
            await client.call_tool("docs.work", {})

    run(scenario())
    assert [(log.level, log.logger, log.data) for log in logs] == [
        ("info", "docs", {"rows": 3}),
        ("warning", None, "disk almost full"),
    ]
    (counted,) = events.kinds("tool_reports")
    assert dict(counted.data) == {"progress": 0, "logs": 2, "dropped": 4}


def test_a_defined_tool_returning_content_declares_no_output_schema() -> None:
    """@tool on a function annotated -> Content: its blocks go out as blocks, no schema."""

    @tool(effect="read", capabilities=("docs:read",))
    def snapshot() -> Content:
        """A snapshot of the page."""
        return Content(Image(data=PNG, mime_type="image/png"))

    assert snapshot.spec.output_schema is None


# -- over streamable HTTP ----------------------------------------------------------------------


@contextlib.asynccontextmanager
async def over_http(server: GuardedServer) -> AsyncIterator[str]:
    """``server`` on a free loopback port in local mode as mira; yields its MCP URL."""
    endpoint = HttpEndpoint(
        server, authenticate=lambda _token: None, allowed_hosts=["127.0.0.1:*"], local=MIRA
    )
    app = endpoint.starlette("/mcp")
    web = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    task = asyncio.create_task(web.serve())
    try:
        while not web.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{web.servers[0].sockets[0].getsockname()[1]}/mcp"
    finally:
        web.should_exit = True
        await task


def test_over_http_updates_logs_and_progress_reach_the_client(server: GuardedServer) -> None:
    """Streamable HTTP, 2025-era: the update on the standalone stream, logs and progress.

    Logs and progress ride the call's own stream, before its result.
    """
    updates: list[str] = []
    logs: list[object] = []
    steps: list[float] = []
    heard = asyncio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))
            heard.set()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async def on_progress(progress: float, _total: float | None, _message: str | None) -> None:
        steps.append(progress)

    async def scenario() -> None:
        async with (
            over_http(server) as url,
            Client(
                streamable_http_client(url),
                mode="legacy",
                message_handler=on_message,
                logging_callback=on_log,
            ) as client,
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # 2025-era methods
                await client.subscribe_resource("docs://readme")
            await client.call_tool("docs.touch", {})
            await asyncio.wait_for(heard.wait(), 5)
            await client.call_tool("docs.work", {}, progress_callback=on_progress)

    run(scenario())
    assert updates == ["docs://readme"]
    assert steps == [1, 2, 3]
    assert logs == [{"rows": 3}, "disk almost full"]

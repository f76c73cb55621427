"""An upstream MCP server (stdio) with the conformance suite's fixtures no toolbound tool can be.

Run as ``python conformance_upstream.py``. Behind ``toolbound mcp-gateway`` it gives
the suite what it asks for by name — tools answering image, audio, embedded-resource
and mixed content, a tool reporting progress, the ``test://`` resources and template,
the ``test_*`` prompts and argument completion — so the gateway's pass-through,
federation and relays are what the suite checks. The gateway tests use it too.

``test_tool_with_progress`` reports 0, 50 and 100 of 100; ``test_slow`` (``seconds``)
sleeps, and writes ``cancelled`` to ``$CONFORMANCE_STATE`` when it is cancelled first.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

# A 1x1 red PNG.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
        "0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
    )
).decode()
# A tiny WAV header and no samples.
WAV = base64.b64encode(b"RIFF$\x00\x00\x00WAVEfmt " + b"\x00" * 24).decode()
BIG = "A" * 400_000  # 300,000 decoded bytes: over a small max_content_bytes
NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


def tool(name: str, description: str, schema: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=schema or NO_ARGUMENTS)


TOOLS = [
    tool("test_image_content", "Returns an image."),
    tool("test_audio_content", "Returns audio."),
    tool("test_embedded_resource", "Returns an embedded resource."),
    tool("test_multiple_content_types", "Returns text, an image and a resource."),
    tool("test_big_image", "Returns a large image."),
    tool("test_tool_with_progress", "Reports progress three times."),
    tool(
        "test_slow",
        "Sleeps.",
        {"type": "object", "properties": {"seconds": {"type": "number"}}},
    ),
]


def content(name: str) -> list[types.ContentBlock]:
    image = types.ImageContent(type="image", data=PNG, mime_type="image/png")
    if name == "test_image_content":
        return [image]
    if name == "test_big_image":
        return [types.ImageContent(type="image", data=BIG, mime_type="image/png")]
    if name == "test_audio_content":
        return [types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")]
    embedded = types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(
            uri="test://embedded-resource", mime_type="text/plain", text="Embedded resource."
        ),
    )
    if name == "test_embedded_resource":
        return [embedded]
    return [types.TextContent(type="text", text="Multiple content types test:"), image, embedded]


RESOURCES = [
    types.Resource(uri="test://static-text", name="static-text", mime_type="text/plain"),
    types.Resource(uri="test://static-binary", name="static-binary", mime_type="image/png"),
]
TEMPLATE = types.ResourceTemplate(
    uri_template="test://template/{id}/data", name="template-data", mime_type="application/json"
)
PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A simple prompt."),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with arguments.",
        arguments=[
            types.PromptArgument(name="arg1", required=True),
            types.PromptArgument(name="arg2", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt with a resource.",
        arguments=[types.PromptArgument(name="resourceUri", required=True)],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with an image."),
]


def read(uri: str) -> list[types.TextResourceContents | types.BlobResourceContents]:
    if uri == "test://static-text":
        text = "This is the content of the static text resource."
        return [types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)]
    if uri == "test://static-binary":
        return [types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)]
    parts = uri.split("/")
    if uri.startswith("test://template/") and uri.endswith("/data") and len(parts) == 5:
        text = json.dumps({"id": parts[3], "templateTest": True, "data": f"Data for {parts[3]}"})
        return [types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
    raise MCPError(code=-32002, message=f"Resource not found: {uri}")


def prompt(name: str, args: dict[str, str]) -> list[types.PromptMessage]:
    def user(block: types.ContentBlock) -> types.PromptMessage:
        return types.PromptMessage(role="user", content=block)

    def say(text: str) -> types.PromptMessage:
        return user(types.TextContent(type="text", text=text))

    if name == "test_simple_prompt":
        return [say("This is a simple prompt for testing.")]
    if name == "test_prompt_with_arguments":
        return [say(f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'")]
    if name == "test_prompt_with_embedded_resource":
        uri = args["resourceUri"]
        resource = types.TextResourceContents(uri=uri, mime_type="text/plain", text="Resource.")
        return [user(types.EmbeddedResource(type="resource", resource=resource)), say("Use it.")]
    if name == "test_prompt_with_image":
        image = types.ImageContent(type="image", data=PNG, mime_type="image/png")
        return [user(image), say("Describe the image.")]
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {name}")


async def run_tool(
    ctx: Any,
    params: types.CallToolRequestParams,
    state: Path | None,
) -> types.CallToolResult:
    if params.name == "test_tool_with_progress":
        meta = dict(ctx.meta or {})
        token = meta.get("progress_token", meta.get("progressToken"))
        for step in (0, 50, 100):
            if token is not None:
                await ctx.session.send_progress_notification(
                    token, step, 100, f"step {step}", related_request_id=ctx.request_id
                )
            await anyio.sleep(0.05)
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])
    if params.name == "test_slow":
        try:
            await anyio.sleep(float((params.arguments or {}).get("seconds", 5)))
        except anyio.get_cancelled_exc_class():
            if state is not None:
                state.write_text("cancelled")  # noqa: ASYNC240 - once, as the call ends
            raise
        return types.CallToolResult(content=[types.TextContent(type="text", text="slept")])
    if params.name not in {t.name for t in TOOLS}:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
    return types.CallToolResult(content=content(params.name))


def build(state: Path | None) -> Server[Any]:
    async def list_tools(_ctx: Any, _params: object) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await run_tool(ctx, params, state)

    async def list_resources(_ctx: Any, _params: object) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=RESOURCES)

    async def list_templates(_ctx: Any, _params: object) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[TEMPLATE])

    async def read_resource(
        _ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return types.ReadResourceResult(contents=read(str(params.uri)))

    async def list_prompts(_ctx: Any, _params: object) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=PROMPTS)

    async def get_prompt(_ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return types.GetPromptResult(messages=prompt(params.name, dict(params.arguments or {})))

    async def complete(_ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        words = ["paris", "park", "party", "test-value"]
        found = [w for w in words if w.startswith(params.argument.value)]
        return types.CompleteResult(
            completion=types.Completion(values=found, total=len(found), has_more=False)
        )

    return Server(
        "conformance-upstream",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
    )


async def main() -> None:
    found = os.environ.get("CONFORMANCE_STATE")
    server = build(Path(found) if found else None)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)

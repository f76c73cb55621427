"""An upstream MCP server (stdio) with the conformance suite's fixtures no toolbound tool can be.

Run as ``python conformance_upstream.py``. Behind ``toolbound mcp-gateway`` it gives
the suite what it asks for by name — tools answering image, audio, embedded-resource
and mixed content, a tool reporting progress, the ``test://`` resources and template,
the ``test_*`` prompts and argument completion — so the gateway's pass-through,
federation and relays are what the suite checks. The gateway tests use it too.

``test_tool_with_progress`` reports 0, 50 and 100 of 100; ``test_slow`` (``seconds``)
sleeps, and writes ``cancelled`` to ``$CONFORMANCE_STATE`` when it is cancelled first.
``test_tool_with_logging`` (and ``test_logging_tool``, the stateless suite's name)
sends three info log messages, ``test_sampling`` and the ``test_elicitation*`` tools
ask the client (through the gateway, which relays only where its configuration
allows), ``test_touch_resource`` (``uri``) announces
that a resource changed (``notifications/resources/updated``) if it was subscribed,
and ``test_announce_tools_changed`` sends ``notifications/tools/list_changed``.
"""

from __future__ import annotations

import base64
import json
import os
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata

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
FOR_USER = types.Annotations(audience=["user"], priority=0.9)
FOR_ASSISTANT = types.Annotations(audience=["assistant"], priority=0.2)
ANNOTATED: dict[str, list[types.ContentBlock]] = {
    "test_annotated_text": [
        types.TextContent(type="text", text="For the user.", annotations=FOR_USER)
    ],
    "test_annotated_blocks": [
        types.TextContent(type="text", text="Plain."),
        types.TextContent(type="text", text="For the user.", annotations=FOR_USER),
        types.ImageContent(
            type="image", data=PNG, mime_type="image/png", annotations=FOR_ASSISTANT
        ),
    ],
}


def tool(name: str, description: str, schema: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=schema or NO_ARGUMENTS)


TOOLS = [
    tool("test_image_content", "Returns an image."),
    tool("test_audio_content", "Returns audio."),
    tool("test_embedded_resource", "Returns an embedded resource."),
    tool("test_multiple_content_types", "Returns text, an image and a resource."),
    tool("test_annotated_text", "Returns one text block with annotations."),
    tool("test_annotated_blocks", "Returns text blocks and an image, some annotated."),
    tool("test_big_image", "Returns a large image."),
    tool("test_tool_with_progress", "Reports progress three times."),
    tool(
        "test_slow",
        "Sleeps.",
        {"type": "object", "properties": {"seconds": {"type": "number"}}},
    ),
    tool("test_tool_with_logging", "Sends three log messages."),
    tool("test_logging_tool", "Sends three log messages (the stateless suite's name)."),
    tool(
        "test_sampling",
        "Asks the client's model.",
        {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
    ),
    tool(
        "test_elicitation",
        "Asks the user.",
        {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    ),
    tool("test_elicitation_sep1034_defaults", "Asks the user, with defaults."),
    tool("test_elicitation_sep1330_enums", "Asks the user, with enums."),
    tool("test_announce_tools_changed", "Says its tool list changed."),
    tool(
        "test_touch_resource",
        "Announces that a resource changed.",
        {"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]},
    ),
]
ELICIT_USER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}
ELICIT_DEFAULTS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "default": True},
    },
}
ELICIT_ENUMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


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
    annotated = ANNOTATED.get(name)
    if annotated is not None:
        return annotated
    return [types.TextContent(type="text", text="Multiple content types test:"), image, embedded]


RESOURCES = [
    types.Resource(uri="test://static-text", name="static-text", mime_type="text/plain"),
    types.Resource(uri="test://watched-resource", name="watched-resource", mime_type="text/plain"),
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
    if uri == "test://watched-resource":
        return [types.TextResourceContents(uri=uri, mime_type="text/plain", text="Watched.")]
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


def text(value: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)])


async def ask(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult | None:
    """The tools that ask the client something, on the stream of the call."""
    args = params.arguments or {}
    send = partial(
        ctx.session.send_request, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
    )
    if params.name == "test_sampling":
        message = types.SamplingMessage(
            role="user", content=types.TextContent(type="text", text=str(args.get("prompt")))
        )
        request = types.CreateMessageRequest(
            params=types.CreateMessageRequestParams(messages=[message], max_tokens=100)
        )
        sampled = await send(request, types.CreateMessageResult)
        block = sampled.content
        return text(f"LLM response: {block.text if isinstance(block, types.TextContent) else ''}")
    schema = {
        "test_elicitation": ELICIT_USER,
        "test_elicitation_sep1034_defaults": ELICIT_DEFAULTS,
        "test_elicitation_sep1330_enums": ELICIT_ENUMS,
    }.get(params.name)
    if schema is None:
        return None
    form = types.ElicitRequestFormParams(
        message=str(args.get("message", "Please answer.")), requested_schema=schema
    )
    answer = await send(types.ElicitRequest(params=form), types.ElicitResult)
    return text(f"Elicitation completed: action={answer.action}, content={answer.content}")


async def say(
    ctx: Any, params: types.CallToolRequestParams, watched: set[str]
) -> types.CallToolResult | None:
    """The tools that send the client notifications (or nothing special)."""
    if params.name in {"test_tool_with_logging", "test_logging_tool"}:
        for step, line in enumerate(
            ("Tool execution started", "Tool processing data", "Tool execution completed")
        ):
            if step:
                await anyio.sleep(0.05)
            log = types.LoggingMessageNotification(
                params=types.LoggingMessageNotificationParams(level="info", data=line)
            )
            await ctx.session.send_notification(log, related_request_id=ctx.request_id)
        return text("Logged three messages.")
    if params.name == "test_announce_tools_changed":
        await ctx.session.send_notification(types.ToolListChangedNotification())
        return text("announced")
    if params.name == "test_touch_resource":
        uri = str((params.arguments or {}).get("uri"))
        if uri in watched:
            await ctx.session.send_resource_updated(uri)
        return text("subscribed" if uri in watched else "not subscribed")
    return None


async def run_tool(
    ctx: Any,
    params: types.CallToolRequestParams,
    state: Path | None,
    watched: set[str],
) -> types.CallToolResult:
    answered = await ask(ctx, params) or await say(ctx, params, watched)
    if answered is not None:
        return answered
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


def subscriptions(watched: set[str]) -> dict[str, Any]:
    async def subscribe(_ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        watched.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(_ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        watched.discard(str(params.uri))
        return types.EmptyResult()

    return {"on_subscribe_resource": subscribe, "on_unsubscribe_resource": unsubscribe}


def build(state: Path | None) -> Server[Any]:
    watched: set[str] = set()

    async def list_tools(_ctx: Any, _params: object) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await run_tool(ctx, params, state, watched)

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
        **subscriptions(watched),
    )


async def main() -> None:
    found = os.environ.get("CONFORMANCE_STATE")
    server = build(Path(found) if found else None)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)

"""An upstream MCP server (stdio) whose tools ask the client for input (SEP-2322).

Run as ``python conformance_asking.py``. On a 2026-07-28 connection each tool answers
its first call with an ``InputRequiredResult`` and completes once the retry carries
the answers, as the conformance suite's ``input-required-result-*`` scenarios want:

* ``test_input_required_result_elicitation`` asks ``user_name`` (elicitation) and
  greets the name; ``..._sampling`` asks ``capital_question``; ``..._list_roots``
  asks ``client_roots``;
* ``..._request_state`` and ``..._tampered_state`` send a ``requestState`` and
  answer ``state-ok`` only when it comes back unchanged;
* ``..._multiple_inputs`` asks for all three at once; ``..._multi_round`` asks
  ``step1`` then ``step2``, with a new ``requestState`` each round;
* ``..._capabilities`` asks only for what the request's ``_meta`` says the client
  offers (sampling, else elicitation);
* the stateless diagnostics: ``test_missing_capability`` always asks for a sample
  (a client that offers no sampling gets -32021 from the gateway),
  ``test_streaming_elicitation`` asks the user.

The prompt ``test_input_required_result_prompt`` asks ``user_context`` (elicitation)
and is rendered with the answer.

A call that carries no answer for what it needs is asked again. ``arguments.note``,
if given, is echoed, so a test can see which arguments reached this server.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {"note": {"type": "string"}}}
PREFIX = "test_input_required_result_"
TOOLS = [
    types.Tool(name=PREFIX + suffix, description=f"Asks the client ({suffix}).",
               input_schema=NO_ARGUMENTS)
    for suffix in ("elicitation", "sampling", "list_roots", "request_state", "multiple_inputs",
                   "multi_round", "tampered_state", "capabilities")
] + [
    types.Tool(name=name, description=f"A stateless diagnostic ({name}).",
               input_schema=NO_ARGUMENTS)
    for name in ("test_missing_capability", "test_streaming_elicitation")
]  # fmt: skip


def elicit(message: str, field: str, kind: str = "string") -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {field: {"type": kind}},
                "required": [field],
            },
        },
    }


def sample(text: str, max_tokens: int) -> dict[str, Any]:
    return {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens,
        },
    }


ROOTS: dict[str, Any] = {"method": "roots/list", "params": {}}
# What each tool asks in its first round, and the state it sends with it.
ASKS: dict[str, tuple[dict[str, Any], str | None]] = {
    "elicitation": ({"user_name": elicit("What is your name?", "name")}, None),
    "sampling": ({"capital_question": sample("What is the capital of France?", 100)}, None),
    "list_roots": ({"client_roots": ROOTS}, None),
    "request_state": ({"confirm": elicit("Please confirm", "ok", "boolean")}, "state-1"),
    "tampered_state": ({"confirm": elicit("Please confirm", "ok", "boolean")}, "state-1"),
    "multiple_inputs": (
        {
            "user_name": elicit("What is your name?", "name"),
            "greeting": sample("Generate a greeting", 50),
            "client_roots": ROOTS,
        },
        "state-multi",
    ),
    "multi_round": ({"step1": elicit("Step 1: What is your name?", "name")}, "round-1"),
}


def asking(requests: dict[str, Any], state: str | None) -> types.InputRequiredResult:
    return types.InputRequiredResult.model_validate(
        {"resultType": "input_required", "inputRequests": requests, "requestState": state}
    )


def done(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def answers(params: types.CallToolRequestParams) -> dict[str, Any]:
    return {
        key: value.model_dump(by_alias=True, mode="json", exclude_none=True)
        for key, value in (params.input_responses or {}).items()
    }


def diagnostic(
    ctx: Any, name: str, got: dict[str, Any]
) -> types.CallToolResult | types.InputRequiredResult:
    """The suite's stateless diagnostics, and the tool asking what the client offers."""
    if name in {"test_missing_capability", "test_streaming_elicitation"}:
        wanted = "sampling" if name == "test_missing_capability" else "elicitation"
    else:
        meta = dict(ctx.meta or {})
        offered = meta.get("io.modelcontextprotocol/clientCapabilities") or {}
        wanted = "sampling" if "sampling" in offered else "elicitation"
    if "ask" in got:
        return done("answered")
    if wanted == "sampling":
        return asking({"ask": sample("Say something", 20)}, None)
    return asking({"ask": elicit("Say something", "text")}, None)


DIAGNOSTICS = {
    "test_missing_capability",
    "test_streaming_elicitation",
    PREFIX + "capabilities",
}


def run(
    ctx: Any, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    got = answers(params)
    if params.name in DIAGNOSTICS:
        return diagnostic(ctx, params.name, got)
    suffix = params.name.removeprefix(PREFIX)
    note = (params.arguments or {}).get("note")
    said = f" ({note})" if note else ""
    if suffix == "multi_round" and params.request_state == "round-1" and "step1" in got:
        return asking({"step2": elicit("Step 2: What is your favorite color?", "color")}, "round-2")
    if suffix == "multi_round" and params.request_state == "round-2" and "step2" in got:
        return done(f"Done{said}")
    requests, state = ASKS[suffix]
    if suffix != "multi_round" and set(requests) <= set(got) and params.request_state == state:
        if suffix == "elicitation":
            name = got["user_name"].get("content", {}).get("name", "")
            return done(f"Hello, {name}!{said}")
        return done(f"state-ok{said}" if state else f"Answered{said}")
    return asking(requests, state)


PROMPT = types.Prompt(name=PREFIX + "prompt", description="Asks the user for its context.")


def prompt(
    params: types.GetPromptRequestParams,
) -> types.GetPromptResult | types.InputRequiredResult:
    answered = (params.input_responses or {}).get("user_context")
    if not isinstance(answered, types.ElicitResult) or answered.content is None:
        return asking(
            {"user_context": elicit("What context should the prompt use?", "context")}, None
        )
    text = f"Use this context: {answered.content.get('context')}"
    message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
    return types.GetPromptResult(messages=[message])


def build() -> Server[Any]:
    async def list_tools(_ctx: Any, _params: object) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def list_prompts(_ctx: Any, _params: object) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[PROMPT])

    async def get_prompt(
        _ctx: Any, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        return prompt(params)

    async def call_tool(
        ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        return run(ctx, params)

    return Server(
        "conformance-asking",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def main() -> None:
    server = build()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)

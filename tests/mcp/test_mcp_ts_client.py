"""The official TypeScript SDK client reads every kind of toolbound result (R11, R18).

``toolbound mcp-serve --http`` serves ``typed_tools`` (each tool declares an
``outputSchema``) on loopback; ``node/ts_client.mjs`` lists the tools and calls them
with ``@modelcontextprotocol/sdk``'s ``Client``, which checks any ``structuredContent``
against the tool's ``outputSchema`` and throws ``-32602`` when it does not conform.
Every result must come back as a result — none may throw — and each error carries
toolbound's envelope in its text and in ``_meta``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp_support import TOKENS, grant, write_config
from node_support import free_port, require_node_modules, run_node, serving_command

from toolbound.mcp import ENVELOPE_META_KEY

PLAN = [
    {"label": "success", "name": "typed.read", "arguments": {"limit": 2}},
    {"label": "validation_error", "name": "typed.read", "arguments": {"limit": "two"}},
    {"label": "denial", "name": "typed.open", "arguments": {"path": "/etc/passwd"}},
    {"label": "pending", "name": "typed.add", "arguments": {"title": "later"}},
    {"label": "outcome_unknown", "name": "typed.send", "arguments": {}},
]


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the TypeScript client saw, for each step of PLAN."""
    node = require_node_modules()
    folder = tmp_path_factory.mktemp("ts-client")
    root = folder / "notes"
    root.mkdir()
    config = write_config(
        folder,
        grant("mira", "typed:read")
        + grant("mira", "typed:open", root=root)
        + grant("mira", "typed:write", "modify", confirm=True)
        + grant("mira", "typed:send", "create"),
        gateway='confirm = "console"',
    )
    port = free_port()
    args = ["mcp-serve", "--config", str(config.service.source), "--tools", "typed_tools:tools"]
    with serving_command([*args, "--http", "--host", "127.0.0.1", "--port", str(port)], port=port):
        out = run_node(
            node,
            "ts_client.mjs",
            f"http://127.0.0.1:{port}/mcp",
            TOKENS["mira"],
            json.dumps(PLAN),
        )
    return json.loads(out)  # type: ignore[no-any-return]


def result(answers: dict[str, Any], label: str) -> dict[str, Any]:
    """The result of one step; the client must not have thrown."""
    step = answers["results"][label]
    assert "thrown" not in step, step
    return step["result"]  # type: ignore[no-any-return]


def error_envelope(answers: dict[str, Any], label: str) -> dict[str, Any]:
    """An isError result with no structuredContent, and toolbound's envelope as text and _meta."""
    got = result(answers, label)
    assert got["isError"] is True
    assert "structuredContent" not in got
    envelope: dict[str, Any] = got["_meta"][ENVELOPE_META_KEY]
    assert json.loads(got["content"][0]["text"]) == envelope
    return envelope


def test_the_client_lists_every_typed_tool_with_its_output_schema(answers: dict[str, Any]) -> None:
    """tools/list: the four tools mira holds grants for."""
    assert sorted(answers["tools"]) == ["typed.add", "typed.open", "typed.read", "typed.send"]


def test_a_success_carries_structured_content_the_client_accepts(answers: dict[str, Any]) -> None:
    """The value conforms to the outputSchema; the text is the untrusted envelope."""
    got = result(answers, "success")
    assert got.get("isError", False) is False
    assert got["structuredContent"] == {"count": 2, "titles": ["one", "two"]}
    text = json.loads(got["content"][0]["text"])
    assert text["trust"] == "untrusted_tool_data"
    assert text["data"] == got["structuredContent"]


def test_a_validation_error_reads_as_an_error_result(answers: dict[str, Any]) -> None:
    """Arguments that fail the input schema: kind validation, nothing ran."""
    envelope = error_envelope(answers, "validation_error")
    assert envelope["error"]["kind"] == "validation"
    assert envelope["commit_status"] == "not_committed"


def test_a_denial_reads_as_an_error_result(answers: dict[str, Any]) -> None:
    """A path outside the granted root: resource_out_of_scope."""
    envelope = error_envelope(answers, "denial")
    assert envelope["error"]["code"] == "resource_out_of_scope"
    assert envelope["error"]["kind"] == "authorization"


def test_a_pending_confirmation_reads_as_an_error_result(answers: dict[str, Any]) -> None:
    """A write a person must confirm: awaiting_confirmation, with its invocation and digest."""
    envelope = error_envelope(answers, "pending")
    assert envelope["type"] == "tool_pending"
    assert envelope["status"] == "awaiting_confirmation"
    assert envelope["digest"].startswith("sha256:")
    assert envelope["error"]["code"] == "awaiting_confirmation"


def test_an_unknown_outcome_reads_as_an_error_result(answers: dict[str, Any]) -> None:
    """A write whose answer was lost: commit_status unknown, never "not executed"."""
    envelope = error_envelope(answers, "outcome_unknown")
    assert envelope["commit_status"] == "unknown"

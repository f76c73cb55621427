"""Upstream image, audio and resource blocks reach the client as blocks, bounded and marked.

The upstream is ``conformance_upstream.py`` over stdio: the conformance suite's content
fixtures (``test_image_content``, ``test_multiple_content_types``, …) as a real server.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import mcp_types as types
from mcp import Client
from mcp_support import MIRA, gateway, grant, run, write_config

from toolbound.mcp.content import TRUST_META_KEY

if TYPE_CHECKING:
    from toolbound.trace import TraceEvent

UPSTREAM = Path(__file__).parent / "conformance_upstream.py"
READS = (
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_annotated_text",
    "test_annotated_blocks",
    "test_big_image",
    "test_tool_with_progress",
    "test_slow",
)


def media_upstream(state: Path | None = None, **settings: object) -> str:
    """The fixture server as upstream ``media``; its tools are reads of ``media:read``."""
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items())
    if state is not None:
        extra += f'env = {{ CONFORMANCE_STATE = "{state}" }}\n'
    rules = "".join(
        f'\n[upstream.tools.{t}]\neffect = "read"\ncapability = "media:read"\n' for t in READS
    )
    return f"""
[[upstream]]
name = "media"
command = ["{sys.executable}", "{UPSTREAM}"]
{extra}{rules}"""


class Recorder:
    """A trace sink keeping every event."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def emit(self, invocation_id: str, event: TraceEvent) -> None:
        del invocation_id
        self.events.append(event)


def call(
    tmp_path: Path, tool: str, **settings: object
) -> tuple[types.CallToolResult, list[TraceEvent]]:
    config = write_config(tmp_path, media_upstream(**settings) + grant("mira", "media:read"))
    sink = Recorder()

    async def scenario() -> types.CallToolResult:
        gw = gateway(config, sinks=[sink])
        async with gw.running(), Client(gw.server.lowlevel(MIRA)) as client:
            return await client.call_tool(f"media.{tool}", {})

    return run(scenario()), sink.events


def test_an_upstream_image_reaches_the_client_as_an_image_block_marked_untrusted(
    tmp_path: Path,
) -> None:
    """The image is passed on whole with the trust mark; the envelope names it, not its bytes."""
    result, events = call(tmp_path, "test_image_content")
    assert result.is_error is False
    text, image = result.content
    assert isinstance(text, types.TextContent)
    envelope = json.loads(text.text)
    assert envelope["trust"] == "untrusted_tool_data"
    assert envelope["data"] == [{"type": "image", "passed_as_block": 1, "what": "image image/png"}]
    assert isinstance(image, types.ImageContent)
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.data).startswith(b"\x89PNG")
    assert image.meta == {TRUST_META_KEY: "untrusted_tool_data"}
    sent = [e for e in events if e.kind == "tool_message"][-1]
    assert sent.data["content"] == text.text.encode()
    assert [b["type"] for b in sent.data["blocks"]] == ["image"]  # type: ignore[attr-defined]


def test_mixed_content_keeps_text_in_the_envelope_and_passes_image_and_resource_on(
    tmp_path: Path,
) -> None:
    """Text, image, resource: the text in the untrusted envelope, the others as marked blocks."""
    result, _ = call(tmp_path, "test_multiple_content_types")
    kinds = [b.type for b in result.content]
    assert kinds == ["text", "image", "resource"]
    envelope = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert envelope["data"][0] == {"type": "text", "text": "Multiple content types test:"}
    for block in result.content[1:]:
        assert block.meta == {TRUST_META_KEY: "untrusted_tool_data"}


def test_audio_and_an_embedded_resource_are_passed_through(tmp_path: Path) -> None:
    """Audio and embedded-resource blocks arrive as such."""
    audio, _ = call(tmp_path, "test_audio_content")
    assert [b.type for b in audio.content] == ["text", "audio"]
    resource, _ = call(tmp_path, "test_embedded_resource")
    assert [b.type for b in resource.content] == ["text", "resource"]


def test_a_block_over_the_upstream_limit_is_replaced_by_a_note_and_the_cut_recorded(
    tmp_path: Path,
) -> None:
    """Over max_content_bytes: a text note says what was cut; the trace records the cut."""
    result, events = call(tmp_path, "test_big_image", max_content_bytes=1000)
    assert not any(isinstance(b, types.ImageContent) for b in result.content)
    note = json.loads(result.content[1].text)  # type: ignore[union-attr]
    assert note["type"] == "content_cut"
    assert note["trust"] == "untrusted_tool_data"
    assert "image image/png of 300000 bytes" in note["detail"]
    assert "max_content_bytes of 1000" in note["detail"]
    sent = [e for e in events if e.kind == "tool_message"][-1]
    cuts = sent.data["cuts"]
    assert any(c.pointer == "/0" and c.reason == "truncated" for c in cuts)  # type: ignore[attr-defined]


def test_annotations_on_a_single_text_block_reach_the_client(tmp_path: Path) -> None:
    """The envelope's text block carries the upstream block's audience and priority."""
    result, _ = call(tmp_path, "test_annotated_text")
    [block] = result.content
    assert isinstance(block, types.TextContent)
    assert block.annotations is not None
    assert (block.annotations.audience, block.annotations.priority) == (["user"], 0.9)
    envelope = json.loads(block.text)
    assert envelope["trust"] == "untrusted_tool_data"
    assert envelope["data"][0]["text"] == "For the user."


def test_annotations_are_kept_on_every_block_the_first_text_block_included(
    tmp_path: Path,
) -> None:
    """Text folded into the envelope keeps the first annotations; the image keeps its own."""
    result, _ = call(tmp_path, "test_annotated_blocks")
    envelope, image = result.content
    assert isinstance(envelope, types.TextContent)
    assert isinstance(image, types.ImageContent)
    assert envelope.annotations is not None
    assert envelope.annotations.audience == ["user"]
    assert image.annotations is not None
    assert (image.annotations.audience, image.annotations.priority) == (["assistant"], 0.2)
    data = json.loads(envelope.text)["data"]
    assert data[1]["annotations"] == {"audience": ["user"], "priority": 0.9}

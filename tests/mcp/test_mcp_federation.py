"""Upstream resources and prompts through the gateway: granted per upstream, reads traced.

The upstream is ``conformance_upstream.py`` over stdio (``test://`` resources, a
template and the ``test_*`` prompts), served as ``media``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_support import LEO, MIRA, gateway, grant, run, write_config
from test_mcp_content import Recorder, media_upstream

from toolbound.mcp.content import TRUST_META_KEY

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from toolbound import Subject

GRANTS = grant("mira", "media:resources") + grant("mira", "media:prompts")


def session(
    tmp_path: Path,
    subject: Subject,
    body: Callable[[Client], Awaitable[object]],
    sink: Recorder | None = None,
) -> object:
    config = write_config(tmp_path, media_upstream() + GRANTS)

    async def scenario() -> object:
        gw = gateway(config, sinks=[] if sink is None else [sink])
        async with gw.running(), Client(gw.server.lowlevel(subject)) as client:
            return await body(client)

    return run(scenario())


def test_resources_are_listed_with_prefixed_names_and_their_own_uris(tmp_path: Path) -> None:
    """resources/list and templates/list: names as tools are (media.<name>), URIs unchanged."""

    async def body(client: Client) -> object:
        return (await client.list_resources(), await client.list_resource_templates())

    listed, templates = session(tmp_path, MIRA, body)  # type: ignore[misc]
    assert {(r.name, str(r.uri)) for r in listed.resources} == {
        ("media.static-text", "test://static-text"),
        ("media.static-binary", "test://static-binary"),
        ("media.watched-resource", "test://watched-resource"),
    }
    assert [(t.name, t.uri_template) for t in templates.resource_templates] == [
        ("media.template-data", "test://template/{id}/data")
    ]


def test_a_resource_read_runs_as_a_traced_read_and_its_contents_are_marked(
    tmp_path: Path,
) -> None:
    """resources/read goes through the runtime (traced like a tool read); contents untrusted."""
    sink = Recorder()

    async def body(client: Client) -> object:
        return (
            await client.read_resource("test://static-text"),
            await client.read_resource("test://static-binary"),
            await client.read_resource("test://template/7/data"),
        )

    text, binary, templated = session(tmp_path, MIRA, body, sink)  # type: ignore[misc]
    first = text.contents[0]
    assert isinstance(first, types.TextResourceContents)
    assert first.text == "This is the content of the static text resource."
    assert first.meta == {TRUST_META_KEY: "untrusted_tool_data"}
    assert isinstance(binary.contents[0], types.BlobResourceContents)
    assert '"id": "7"' in templated.contents[0].text
    kinds = [e.kind for e in sink.events]
    assert kinds.count("resource_contents") == 3
    proposed = [e for e in sink.events if e.kind == "proposal"]
    assert len(proposed) == 3
    assert "resources.read.media" in str(proposed[0].data)


def test_without_a_grant_nothing_is_listed_and_a_read_or_get_is_refused(tmp_path: Path) -> None:
    """A caller without media:resources or media:prompts: empty lists, reads and gets refused."""

    async def body(client: Client) -> object:
        resources = await client.list_resources()
        prompts = await client.list_prompts()
        with pytest.raises(MCPError, match="Resource not found"):
            await client.read_resource("test://static-text")
        with pytest.raises(MCPError, match="Unknown prompt"):
            await client.get_prompt("media.test_simple_prompt")
        return resources, prompts

    resources, prompts = session(tmp_path, LEO, body)  # type: ignore[misc]
    assert resources.resources == []
    assert prompts.prompts == []


def test_prompts_are_listed_prefixed_and_got_with_arguments_and_marked_blocks(
    tmp_path: Path,
) -> None:
    """prompts/list and prompts/get under media.<name>; arguments reach the upstream."""

    async def body(client: Client) -> object:
        listed = await client.list_prompts()
        with_args = await client.get_prompt(
            "media.test_prompt_with_arguments", {"arg1": "one", "arg2": "two"}
        )
        image = await client.get_prompt("media.test_prompt_with_image")
        return listed, with_args, image

    listed, with_args, image = session(tmp_path, MIRA, body)  # type: ignore[misc]
    assert "media.test_simple_prompt" in {p.name for p in listed.prompts}
    assert "arg1='one', arg2='two'" in with_args.messages[0].content.text
    block = image.messages[0].content
    assert isinstance(block, types.ImageContent)
    assert block.meta == {TRUST_META_KEY: "untrusted_tool_data"}


def test_completion_is_forwarded_for_a_prompt_the_caller_may_get(tmp_path: Path) -> None:
    """completion/complete for media.test_prompt_with_arguments reaches the upstream."""

    async def body(client: Client) -> object:
        ref = types.PromptReference(type="ref/prompt", name="media.test_prompt_with_arguments")
        return await client.complete(ref, {"name": "arg1", "value": "par"})

    result = session(tmp_path, MIRA, body)
    assert result.completion.values == ["paris", "park", "party"]  # type: ignore[attr-defined]


def test_a_scoped_grant_lets_a_caller_read_only_the_resources_in_its_scope(
    tmp_path: Path,
) -> None:
    """An id scope on media:resources: the listed URI is read, another is resource_out_of_scope."""
    scoped = grant("leo", "media:resources").replace(
        "confirm = false", 'confirm = false\nscope = { kind = "id", ids = ["test://static-text"] }'
    )
    config = write_config(tmp_path, media_upstream() + scoped)

    async def scenario() -> tuple[object, str]:
        gw = gateway(config)
        async with gw.running(), Client(gw.server.lowlevel(LEO)) as client:
            allowed = await client.read_resource("test://static-text")
            with pytest.raises(MCPError) as refused:
                await client.read_resource("test://static-binary")
            return allowed, str(refused.value)

    allowed, refused = run(scenario())
    assert allowed.contents[0].text.startswith("This is the content")  # type: ignore[attr-defined]
    assert "resource_out_of_scope" in refused

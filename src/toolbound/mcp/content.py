"""Upstream content blocks passed through to the client, bounded and marked untrusted (R11).

An upstream tool may answer with images, audio, embedded resources and resource
links beside its text. The gateway passes those blocks on as blocks — a client shows
an image, a model reads it — instead of flattening them into one JSON text::

    text blocks                  one text block: toolbound's untrusted envelope, whose
                                 data lists every block (a non-text one by a descriptor),
                                 annotated as the first annotated text block was
    image, audio, resource,      passed on as they came, each with
      resource link              _meta["io.toolbound/trust"] = "untrusted_tool_data"
    a block over the limit       a text note saying what was cut (a Cut, in the trace)

The same marking applies to what ``resources/read`` returns
(:func:`mark_contents`). Everything here is a pure function over the SDK's types.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, cast

from toolbound.results.encode import TRUST_MARK, dumps
from toolbound.results.redact import Cut

try:
    import mcp_types as types
    from pydantic import TypeAdapter, ValidationError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from toolbound._model import JSONObject, JSONValue

__all__ = [
    "TRUST_META_KEY",
    "Passed",
    "block_size",
    "content_blocks",
    "mark_block",
    "mark_contents",
    "pass_through",
    "summary",
    "text_annotations",
]

TRUST_META_KEY: Final = "io.toolbound/trust"
"""Where a non-text block says it is untrusted tool data (``_meta``)."""

_BLOCKS: Final = TypeAdapter(list[types.ContentBlock])


@dataclass(frozen=True, slots=True, kw_only=True)
class Passed:
    """What goes to the client for one result's blocks: the envelope's data and the blocks."""

    data: list[JSONValue]
    """The envelope's data: text blocks as they are, each other block by a descriptor."""
    blocks: tuple[types.ContentBlock, ...]
    """The non-text blocks (or the notes that replace them), in their order."""
    cuts: tuple[Cut, ...] = ()


def content_blocks(value: JSONValue) -> list[types.ContentBlock] | None:
    """``value`` as MCP content blocks when it is a list of them with a non-text one.

    Or with annotations on any block: those reach the client on blocks too. ``None``
    for anything else, which then reaches the client as a JSON value.
    """
    if not isinstance(value, list) or not value:
        return None
    try:
        blocks = _BLOCKS.validate_python(value)
    except ValidationError:
        return None
    if all(isinstance(b, types.TextContent) and b.annotations is None for b in blocks):
        return None
    return blocks


def text_annotations(blocks: list[types.ContentBlock]) -> types.Annotations | None:
    """The annotations the envelope's text block carries: the first text block's that has any."""
    return next(
        (b.annotations for b in blocks if isinstance(b, types.TextContent) and b.annotations),
        None,
    )


def block_size(block: types.ContentBlock) -> int:
    """The bytes a block carries: decoded data, resource text or blob (a link: none)."""
    if isinstance(block, types.ImageContent | types.AudioContent):
        return _decoded(block.data)
    if isinstance(block, types.EmbeddedResource):
        res = block.resource
        if isinstance(res, types.TextResourceContents):
            return len(res.text.encode())
        return _decoded(res.blob)
    if isinstance(block, types.TextContent):
        return len(block.text.encode())
    return 0


def pass_through(blocks: list[types.ContentBlock], *, limit: int, source: str) -> Passed:
    """The blocks of one result as the client receives them; ``source`` names its origin.

    A block larger than ``limit`` bytes is replaced by a text note naming what it was
    and how large; the cut is returned so the caller records it (R12, R14).
    """
    data: list[JSONValue] = []
    sent: list[types.ContentBlock] = []
    cuts: list[Cut] = []
    for index, block in enumerate(blocks):
        if isinstance(block, types.TextContent):
            data.append(_json(block))
            continue
        size = block_size(block)
        what = _describe(block)
        if size > limit:
            detail = (
                f"{what} of {size} bytes from {source} is over its "
                f"max_content_bytes of {limit}; it was not passed on"
            )
            cuts.append(Cut(pointer=f"/{index}", reason="truncated", detail=detail))
            data.append({"type": block.type, "cut": detail})
            note = {"type": "content_cut", "trust": TRUST_MARK, "detail": detail}
            sent.append(types.TextContent(type="text", text=dumps(note).decode()))
            continue
        data.append({"type": block.type, "passed_as_block": len(sent) + 1, "what": what})
        sent.append(mark_block(block))
    return Passed(data=data, blocks=tuple(sent), cuts=tuple(cuts))


def mark_contents(
    contents: list[types.TextResourceContents | types.BlobResourceContents],
) -> list[types.TextResourceContents | types.BlobResourceContents]:
    """Resource contents as read from an upstream, each marked untrusted tool data."""
    return [
        c.model_copy(update={"meta": {**(c.meta or {}), TRUST_META_KEY: TRUST_MARK}})
        for c in contents
    ]


def summary(block: types.ContentBlock) -> JSONObject:
    """What the trace keeps of a block sent on: its kind, size and digest, not its bytes."""
    raw = block.model_dump_json(by_alias=True, exclude_none=True).encode()
    return {
        "type": block.type,
        "what": _describe(block),
        "bytes": block_size(block),
        "sha256": hashlib.sha256(raw).hexdigest(),
    }


def mark_block(block: types.ContentBlock) -> types.ContentBlock:
    """``block`` with ``_meta["io.toolbound/trust"] = "untrusted_tool_data"`` (R11)."""
    meta = {**(block.meta or {}), TRUST_META_KEY: TRUST_MARK}
    return block.model_copy(update={"meta": meta})


def _describe(block: types.ContentBlock) -> str:
    if isinstance(block, types.ImageContent | types.AudioContent):
        return f"{block.type} {block.mime_type}"
    if isinstance(block, types.EmbeddedResource):
        return f"resource {block.resource.uri}"
    if isinstance(block, types.ResourceLink):
        return f"resource link {block.uri}"
    return block.type


def _json(block: types.ContentBlock) -> JSONValue:
    return cast("JSONValue", block.model_dump(by_alias=True, mode="json", exclude_none=True))


def _decoded(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)

"""Content a tool, a resource or a prompt gives beside plain JSON: text, images, audio, resources.

These are neutral values, free of any protocol SDK. Each block encodes to one JSON
object in MCP's content-block shape (:func:`block_json`), which is also what the
ledger records and what other surfaces show the model: a JSON value, binary data
as base64::

    Text(text)                       {"type": "text", "text": ...}
    Image(data, mime_type)           {"type": "image", "data": <base64>, "mimeType": ...}
    Audio(data, mime_type)           {"type": "audio", "data": <base64>, "mimeType": ...}
    Embedded(uri, text=|data=, ...)  {"type": "resource", "resource": {"uri": ..., "text"
                                      or "blob": <base64>, "mimeType": ...}}
    Link(uri, name, ...)             {"type": "resource_link", "uri": ..., "name": ...}

A tool returns :class:`Content` (a :class:`~toolbound.ToolOutput`) to answer with
blocks. The output contract is unchanged (R11): the blocks' JSON is the value an
``output_schema`` is checked against, redacted, budgeted and marked untrusted like
any other; an MCP server passes the non-text blocks on as blocks
(:mod:`toolbound.mcp.content`).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

from toolbound._errors import SpecError
from toolbound.execution.tool import ToolOutput

if TYPE_CHECKING:
    from toolbound._model import JSONObject

__all__ = [
    "Audio",
    "Block",
    "Content",
    "Embedded",
    "Image",
    "Link",
    "MessageRole",
    "Text",
    "block_json",
    "contents_json",
]

MessageRole: TypeAlias = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Text:
    """Plain text."""

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Image:
    """An image: its bytes and media type (``image/png``)."""

    data: bytes
    mime_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Audio:
    """A sound: its bytes and media type (``audio/wav``)."""

    data: bytes
    mime_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Embedded:
    """A resource's contents, embedded: ``text`` or binary ``data``, never both."""

    uri: str
    text: str | None = None
    data: bytes | None = None
    mime_type: str | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.data is None):
            msg = f"embedded resource {self.uri}: give exactly one of text and data"
            raise SpecError(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """A link to a resource the client may read itself (``resources/read``)."""

    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None


Block: TypeAlias = Text | Image | Audio | Embedded | Link


class Content(ToolOutput):
    """A tool's answer as content blocks; its ``value`` is their JSON (:func:`block_json`)."""

    __slots__ = ("blocks",)

    def __init__(self, *blocks: Block | str, external_resource_id: str | None = None) -> None:
        if not blocks:
            msg = "Content needs at least one block"
            raise SpecError(msg)
        made = tuple(Text(text=b) if isinstance(b, str) else b for b in blocks)
        super().__init__([block_json(b) for b in made], external_resource_id)
        object.__setattr__(self, "blocks", made)


def block_json(block: Block) -> JSONObject:
    """One block in MCP's content-block shape (binary data as base64)."""
    match block:
        case Text(text=text):
            return {"type": "text", "text": text}
        case Image() | Audio():
            kind = "image" if isinstance(block, Image) else "audio"
            return {"type": kind, "data": _b64(block.data), "mimeType": block.mime_type}
        case Embedded():
            return {"type": "resource", "resource": contents_json(block)}
        case Link():
            link: JSONObject = {"type": "resource_link", "uri": block.uri, "name": block.name}
            if block.description is not None:
                link["description"] = block.description
            if block.mime_type is not None:
                link["mimeType"] = block.mime_type
            return link


def contents_json(item: Embedded) -> JSONObject:
    """A resource's contents in MCP's shape: ``uri``, ``mimeType`` and ``text`` or ``blob``."""
    found: JSONObject = {"uri": item.uri}
    if item.mime_type is not None:
        found["mimeType"] = item.mime_type
    if item.text is not None:
        found["text"] = item.text
    else:
        found["blob"] = _b64(item.data or b"")
    return found


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")

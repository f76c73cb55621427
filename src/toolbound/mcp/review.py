"""The MCP side of reviewing a quarantined tool: what of a definition a person sees.

The diff itself is :mod:`toolbound.tool_review`; the file that keeps both definitions
is :mod:`toolbound.approvals`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from toolbound.approvals import Quarantined
from toolbound.mcp.upstream import definition_of

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    import mcp_types as types

    from toolbound._model import JSONObject, JSONValue

__all__ = ["held", "shown_definition"]


def shown_definition(tool: types.Tool) -> JSONObject:
    """What a person reviews of ``tool``: the digested definition, its title and annotations."""
    shown = definition_of(tool)
    if tool.title is not None:
        shown["title"] = tool.title
    if tool.annotations is not None:
        shown["annotations"] = cast(
            "JSONValue", tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
    return shown


def held(
    upstream: str,
    statuses: Iterable[tuple[str, str, str, JSONObject]],
    *,
    now: datetime,
) -> list[Quarantined]:
    """The quarantined definitions to keep: ``(name, digest, reason, definition)`` each."""
    return [
        Quarantined(
            name=name, upstream=upstream, digest=digest, reason=reason, seen_at=now, definition=d
        )
        for name, digest, reason, d in statuses
    ]
